"""``torchrl._utils._optional.has_module``: optional libraries found without being imported."""
from __future__ import annotations

import subprocess
import sys

from torchrl._utils._optional import has_module


def test_has_module():
    assert has_module("torch") is True
    assert has_module("surely_not_an_installed_module_xyz") is False
    assert has_module("surely_not_installed_xyz.sub") is False  # missing parent: False, not an error
    assert has_module("torch.nn") is True


def test_does_not_import():
    code = "import sys; from torchrl._utils._optional import has_module; has_module('tensorboard'); print('tensorboard' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
