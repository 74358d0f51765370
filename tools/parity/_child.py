"""Runs one scenario file under the current interpreter and prints its results as one JSON line.

usage: python _child.py SCENARIO_FILE [NAME ...]   (run from a directory that holds no ``torchrl`` package)
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _summary import exception, summarize  # noqa: E402

MARK = "@@parity@@"


def main(argv: list[str]) -> int:
    path, wanted = argv[0], set(argv[1:])
    warnings.simplefilter("ignore")
    import tensordict
    import torchrl

    info = {"torchrl": torchrl.__version__, "tensordict": tensordict.__version__, "torch": torch.__version__}
    results: dict[str, object] = {}
    spec = importlib.util.spec_from_file_location("parity_scenarios", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a file that fails to import is one result
        results["<import>"] = exception(err)
    else:
        for name, fn in list(vars(module).items()):
            if not name.startswith("scenario_") or not callable(fn) or (wanted and name not in wanted):
                continue
            torch.manual_seed(0)
            random.seed(0)
            np.random.seed(0)
            try:
                value = fn()
                results[name] = summarize(value)
            except Exception as err:  # noqa: BLE001 - the exception is the scenario's result
                results[name] = exception(err)
    sys.stdout.write(MARK + json.dumps({"info": info, "results": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
