"""``gSDENoise``: the primer of gSDE's exploration matrix (shapes and reset values as TorchRL 0.14.1's)."""
from __future__ import annotations

import doctest

import torch

from torchrl.data import Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs import gSDENoise as from_envs
from torchrl.envs.transforms import TensorDictPrimer, gSDENoise
from torchrl.envs.transforms import _gsde_noise as gsde_noise_module


def test_primer_specs():
    assert from_envs is gSDENoise and issubclass(gSDENoise, TensorDictPrimer)
    cases = [({}, (), (1,), False), ({"state_dim": 3, "action_dim": 2}, (), (2, 3), True),
             ({"shape": (2,)}, (2,), (2, 1), False), ({"state_dim": 3, "action_dim": 2, "shape": (4,)}, (4,), (4, 2, 3), True)]
    for kwargs, shape, entry, random in cases:
        t = gSDENoise(**kwargs)
        assert t.primers.shape == shape and t.primers["_eps_gSDE"].shape == entry, kwargs
        assert isinstance(t.primers["_eps_gSDE"], Unbounded) and bool(t.random) is random


def test_reset_values():
    torch.manual_seed(0)
    env = TransformedEnv(PendulumEnv(), gSDENoise())
    assert torch.equal(env.reset()["_eps_gSDE"], torch.zeros(1))
    data = env.rollout(3)
    assert data["_eps_gSDE"].shape == data["next", "_eps_gSDE"].shape == (3, 1)
    assert "_eps_gSDE" in env.state_spec.keys()
    drawn = TransformedEnv(PendulumEnv(), gSDENoise(state_dim=3, action_dim=1)).reset()["_eps_gSDE"]
    assert drawn.shape == (1, 3) and drawn.abs().sum() > 0
    batched = TransformedEnv(PendulumEnv(batch_size=[2]), gSDENoise(shape=(2,)))
    assert batched.reset()["_eps_gSDE"].shape == (2, 1)


def test_docstring_examples():
    result = doctest.testmod(gsde_noise_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
