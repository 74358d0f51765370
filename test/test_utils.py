"""``torchrl._utils``: the names TorchRL's recipes import from that path, with TorchRL's behaviour."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch
from tensordict import unravel_key as td_unravel_key

import torchrl
import torchrl._utils as utils
from torchrl._utils import (
    KeyDependentDefaultDict,
    accept_remote_rref_invocation,
    accept_remote_rref_udf_invocation,
    compile_with_warmup,
    get_available_device,
    get_binary_env_var,
    implement_for,
    logger,
    prod,
    rl_warnings,
    seed_generator,
    set_profiling_enabled,
    strtobool,
    timeit,
)


def test_reexports_are_the_package_objects():
    assert timeit is torchrl.timeit
    assert logger is torchrl.logger and logger.name == "torchrl"
    assert compile_with_warmup is torchrl.compile_with_warmup
    assert implement_for is torchrl.implement_for
    assert utils.unravel_key is td_unravel_key
    assert utils.DEFAULT_DONE_KEYS == ("done", "truncated", "terminated")
    assert utils.BATCHED_PIPE_TIMEOUT == 10000.0 and utils.WEIGHT_SYNC_TIMEOUT == 60.0
    for name in utils.__all__:
        assert hasattr(utils, name), name


def test_available_device_on_this_machine():
    dev = get_available_device()
    assert isinstance(dev, torch.device)
    assert get_available_device(return_str=True) == str(dev)
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert dev == torch.device("cpu")


def test_prod_and_seed_generator():
    assert prod([2, 3, 4]) == 24 and prod(()) == 1 and prod(torch.Size([2, 3])) == 6
    assert prod([2.5, 2]) == 5.0 and prod(iter([1, 2, 3])) == 6
    with pytest.raises(TypeError):
        prod(5)
    assert seed_generator(0) == 795726461


def test_strtobool_and_env_vars(monkeypatch):
    assert strtobool("yes") is True and strtobool("0") is False and strtobool("OFF") is False
    with pytest.raises(ValueError, match="Invalid truth value 'maybe'"):
        strtobool("maybe")
    monkeypatch.setenv("TORCHRL_TEST_FLAG", "1")
    assert get_binary_env_var("TORCHRL_TEST_FLAG") is True
    monkeypatch.setenv("TORCHRL_TEST_FLAG", "False")
    assert get_binary_env_var("TORCHRL_TEST_FLAG") is False
    monkeypatch.delenv("TORCHRL_TEST_FLAG")
    assert get_binary_env_var("TORCHRL_TEST_FLAG") is False
    monkeypatch.setenv("TORCHRL_TEST_FLAG", "bla")
    with pytest.raises(ValueError, match="should be in 'True', 'False', '0' or '1'. Got bla"):
        get_binary_env_var("TORCHRL_TEST_FLAG")


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "False True True INFO"),
        ({"VERBOSE": "1"}, "True True True INFO"),
        ({"RL_WARNINGS": "0"}, "False False False INFO"),
        ({"RL_LOGGING_LEVEL": "DEBUG"}, "True True True DEBUG"),
    ],
)
def test_flags_read_from_the_environment(env, expected):
    code = "import torchrl._utils as u; print(u.VERBOSE, u.RL_WARNINGS, u.rl_warnings(), u.LOGGING_LEVEL)"
    base = {k: v for k, v in __import__("os").environ.items() if k not in ("VERBOSE", "RL_WARNINGS", "RL_LOGGING_LEVEL")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == expected


def test_profiling_switch_needs_the_env_var():
    assert rl_warnings() is utils.RL_WARNINGS
    if utils._PROFILING_ALLOWED:
        pytest.skip("TORCHRL_PROFILING is set in this environment")
    with pytest.warns(UserWarning, match="TORCHRL_PROFILING=1 was not set"):
        assert set_profiling_enabled(True) is None
    assert utils._PROFILING_ENABLED is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        set_profiling_enabled(False)
    assert utils._PROFILING_ENABLED is False


def test_remote_markers_and_default_dict():
    def f(x):
        return x + 1

    wrapped = accept_remote_rref_invocation(f)
    assert wrapped(1) == 2 and wrapped.__wrapped__ is f and wrapped.__name__ == "f"

    class C:
        pass

    assert accept_remote_rref_udf_invocation(C) is C
    d = KeyDependentDefaultDict(lambda k: k * 2)
    assert d[3] == 6 and dict(d) == {3: 6}


def test_print_directory_tree(tmp_path, caplog):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("hi\n")
    (tmp_path / "sub" / "b.bin").write_text("hello\n")
    with caplog.at_level("INFO", logger="torchrl"):
        utils.print_directory_tree(str(tmp_path))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["Directory size: 9.00 B", f"{tmp_path.name}/", "    sub/", "        b.bin", "    a.txt"]
