"""The packages' lazy ``__getattr__``: names that do not exist answer ``AttributeError`` (so ``hasattr`` is False)."""
from __future__ import annotations

import importlib

import pytest

import torchrl


@pytest.mark.parametrize("module_name", ["torchrl", "torchrl.data", "torchrl.train"])
@pytest.mark.parametrize("name", ["surely_not_a_name", "checkpoint_xyz", "llm", "datasets_xyz", "Foo"])
def test_missing_names_raise_attribute_error(module_name, name):
    module = importlib.import_module(module_name)
    if name in dir(module):
        pytest.skip(f"{module_name} has {name}")
    with pytest.raises(AttributeError, match=rf"module '{module_name}' has no attribute '{name}'"):
        getattr(module, name)
    assert hasattr(module, name) is False


def test_subpackages_and_lazy_names_resolve():
    for name in ("envs", "data", "modules", "objectives", "collectors", "record", "trainers"):
        assert hasattr(torchrl, name), name
    import torchrl.data as data
    import torchrl.train as train

    assert data.ReplayBuffer.__name__ == "ReplayBuffer" and data.MultiStep.__name__ == "MultiStep"
    assert all(hasattr(train, n) for n in train.__all__)
    assert hasattr(torchrl, "checkpoint") in (True, False)  # never raises
