"""``_apply_to_composite`` (``torchrl.envs.transforms.transforms``), as used by TorchRL's Pendulum tutorial."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDictBase

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import CatTensors, PendulumEnv, TransformedEnv, UnsqueezeTransform, check_env_specs
from torchrl.envs.transforms import Transform
from torchrl.envs.transforms.transforms import _apply_to_composite


class _Sin(Transform):
    """The tutorial's pattern: a leaf-wise ``_apply_transform`` and a leaf-wise spec method."""

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.sin()

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    @_apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return Bounded(low=-1, high=1, shape=observation_spec.shape, dtype=observation_spec.dtype,
                       device=observation_spec.device)


class _Cos(_Sin):
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.cos()


class TestApplyToComposite:
    def test_writes_each_out_key_in_place(self):
        seen = []

        class Probe(Transform):
            @_apply_to_composite
            def transform_observation_spec(self, spec):
                seen.append(spec)
                return Bounded(-1, 1, shape=spec.shape, dtype=spec.dtype)

        leaf = Unbounded((3,))
        spec = Composite(a=leaf, n=Composite(b=Unbounded((2,))), z=Unbounded((1,)))
        t = Probe(in_keys=["a", ("n", "b"), "missing", "n"], out_keys=["a2", ("n", "b2"), "m2", "n2"])
        out = t.transform_observation_spec(spec)
        assert out is spec
        assert set(out.keys(True, True)) == {"a", "a2", ("n", "b"), ("n", "b2"), "z"}
        assert isinstance(out["a2"], Bounded) and isinstance(out["a"], Unbounded)
        assert len(seen) == 2 and seen[0] is not leaf and seen[0] == leaf  # a clone of the leaf, not the leaf
        assert Probe.transform_observation_spec.__name__ == "transform_observation_spec"

    def test_leaf_spec_and_errors(self):
        class Probe(Transform):
            @_apply_to_composite
            def transform_reward_spec(self, spec):
                return Bounded(-1, 1, shape=spec.shape)

        assert isinstance(Probe(in_keys=["r"]).transform_reward_spec(Unbounded((4,))), Bounded)
        with pytest.raises(ValueError, match=r"in_keys \['a'\] and out_keys \['a', 'b'\] differ in length"):
            Probe(in_keys=["a"], out_keys=["a", "b"]).transform_reward_spec(Composite(a=Unbounded((1,))))

    def test_pendulum_tutorial_transforms(self):
        env = TransformedEnv(PendulumEnv(), UnsqueezeTransform(-1, in_keys=["th", "thdot"], in_keys_inv=["th", "thdot"]))
        env.append_transform(_Sin(in_keys=["th"], out_keys=["sin"]))
        env.append_transform(_Cos(in_keys=["th"], out_keys=["cos"]))
        env.append_transform(CatTensors(in_keys=["sin", "cos", "thdot"], dim=-1, out_key="observation", del_keys=False))
        check_env_specs(env)
        obs_spec = env.observation_spec
        for key in ("sin", "cos"):
            assert isinstance(obs_spec[key], Bounded) and obs_spec[key].shape == torch.Size([1])
            assert obs_spec[key].space.low.item() == -1 and obs_spec[key].space.high.item() == 1
        assert obs_spec["observation"].shape == torch.Size([3])
        torch.manual_seed(0)
        td = env.rollout(5)
        torch.testing.assert_close(td["sin"], td["th"].sin())
        # CatTensors sorts its in_keys (as TorchRL's does): cos, sin, thdot
        torch.testing.assert_close(td["observation"], torch.cat([td["th"].cos(), td["th"].sin(), td["thdot"]], -1))
