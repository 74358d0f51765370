"""The examples in the spec docstrings run and print what they say."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "_base", "_binary", "_bounded", "_boxes", "_categorical", "_choice", "_composite", "_multi",
    "_non_tensor", "_one_hot", "_stacked", "_unbounded",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"torchrl.data.tensor_specs.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
