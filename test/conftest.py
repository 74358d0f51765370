"""Test-suite hooks: every test generated for a CUDA device carries the ``cuda`` marker (``pytest -m cuda``)."""
from __future__ import annotations

import pytest
import torch


def _is_cuda(value) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(_is_cuda(v) for v in callspec.params.values()):
            item.add_marker(pytest.mark.cuda)
