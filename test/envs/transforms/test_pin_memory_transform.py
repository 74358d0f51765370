import doctest
from unittest import mock

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import PinMemoryTransform
from torchrl.envs.transforms import _pin_memory_transform as module

HAS_ACCELERATOR = module._accelerator_available()


def fake_pin(calls):
    """A stand-in for ``TensorDict.pin_memory`` on CPU-only machines: records the call, returns a copy."""

    def pin_memory(self, *args, **kwargs):
        calls.append(self)
        return self.clone().set("pinned", torch.ones(self.batch_size, dtype=torch.bool))

    return pin_memory


class TestPinMemoryTransform(TransformContract):
    def make_transform(self):
        return PinMemoryTransform()

    def test_decision_follows_accelerator(self):
        assert PinMemoryTransform().pins == HAS_ACCELERATOR
        with mock.patch.object(module, "_accelerator_available", return_value=False):
            assert not PinMemoryTransform().pins
        with mock.patch.object(module, "_accelerator_available", return_value=True):
            assert PinMemoryTransform().pins
        with mock.patch.object(torch.accelerator, "is_available", return_value=False):
            assert not module._accelerator_available()
        with mock.patch.object(torch.accelerator, "is_available", return_value=True):
            assert module._accelerator_available()
        assert PinMemoryTransform().in_keys == [] and PinMemoryTransform().out_keys == []

    def test_no_accelerator_is_a_no_op(self):
        with mock.patch.object(module, "_accelerator_available", return_value=False):
            t = PinMemoryTransform()
        td = TensorDict(obs=torch.zeros(3))
        assert t(td) is td and not td["obs"].is_pinned()
        assert repr(t) == "PinMemoryTransform(pins=False)"

    def test_call_path_pins(self):
        calls = []
        with mock.patch.object(module, "_accelerator_available", return_value=True):
            t = PinMemoryTransform()
        td = TensorDict(obs=torch.zeros(3))
        with mock.patch.object(TensorDict, "pin_memory", fake_pin(calls)):
            out = t(td)
        assert len(calls) == 1 and calls[0] is td and out is not td and out["pinned"].item()

    def test_env_pins_steps_and_resets(self):
        calls = []
        with mock.patch.object(module, "_accelerator_available", return_value=True):
            env = TransformedEnv(PendulumEnv(seed=0), PinMemoryTransform())
        with mock.patch.object(TensorDict, "pin_memory", fake_pin(calls)):
            data = env.rollout(3)
        assert len(calls) == 4  # one reset and three steps
        assert data["pinned"].all() and data["next", "pinned"].all()

    def test_replay_buffer_sample_pinned(self):
        calls = []
        with mock.patch.object(module, "_accelerator_available", return_value=True):
            t = PinMemoryTransform()
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4, transform=t)
        rb.extend(TensorDict(obs=torch.arange(6.0), batch_size=[6]))
        with mock.patch.object(TensorDict, "pin_memory", fake_pin(calls)):
            sample = rb.sample()
        assert len(calls) == 1 and sample["pinned"].shape == (4,)

    @pytest.mark.skipif(not HAS_ACCELERATOR, reason="real pinning needs an accelerator; the mocks above cover the call")
    def test_real_pinning(self):
        out = PinMemoryTransform()(TensorDict(obs=torch.zeros(3)))
        assert out["obs"].is_pinned()
        env = TransformedEnv(PendulumEnv(seed=0), PinMemoryTransform())
        check_env_specs(env, seed=0)
        assert env.rand_step(env.reset())["next", "th"].is_pinned()  # a rollout stacks into new memory
        assert env.reset()["th"].is_pinned()


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
