"""``torchrl.check_mode`` / ``set_check_mode``: the switch, its nesting and the environment variable."""
from __future__ import annotations

import doctest
import os
import subprocess
import sys

import torchrl._utils._check_mode as check_mode_module
from torchrl import check_mode, set_check_mode
from torchrl._utils._check_mode import _state


def test_off_by_default():
    assert os.environ.get("TORCHRL_CHECK_MODE") is None  # the suite runs without it
    assert check_mode() is False and _state["on"] is False


def test_context_manager_nests_and_restores():
    with set_check_mode(True):
        assert check_mode() is True and _state["on"] is True
        with set_check_mode(False):
            assert check_mode() is False and _state["on"] is False
        assert check_mode() is True
    assert check_mode() is False and _state["on"] is False


def test_decorator():
    @set_check_mode(True)
    def inside():
        return check_mode()

    assert inside() is True
    assert check_mode() is False


def test_global_set_and_back():
    set_check_mode(True).set()
    try:
        assert check_mode() is True
        with set_check_mode(False):
            assert check_mode() is False
        assert check_mode() is True  # the global setting comes back after the block
    finally:
        set_check_mode(False).set()
    assert check_mode() is False


def test_environment_variable_turns_it_on_for_the_process():
    code = ("import torch, torchrl\n"
            "from torchrl.envs import PendulumEnv\n"
            "env = PendulumEnv()\n"
            "td = env.reset()\n"
            "td['action'] = torch.tensor([3.5])\n"
            "print(torchrl.check_mode())\n"
            "try:\n"
            "    env.step(td)\n"
            "except ValueError as err:\n"
            "    print(err)\n"
            "with torchrl.set_check_mode(False):\n"
            "    print(env.step(td)['next', 'reward'].shape)\n")
    env = dict(os.environ, TORCHRL_CHECK_MODE=" Yes ")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "True"
    assert lines[1] == "PendulumEnv.step: action 'action' is out of bounds [-2.0, 2.0]: got max 3.5."
    assert lines[2] == "torch.Size([1])"


def test_docstring_examples():
    result = doctest.testmod(check_mode_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0
