import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase, TransformedEnv, check_env_specs
from torchrl.envs.transforms import PermuteTransform
from torchrl.envs.transforms import _permute_transform as module

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract

_W = torch.arange(6.0).reshape(2, 3)


class MatrixActionEnv(EnvBase):
    """Action of shape (2, 3); reward = sum(action * [[0, 1, 2], [3, 4, 5]]); observation = the last action."""

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(observation=Bounded(-1.0, 1.0, shape=(*shape, 2, 3)), shape=shape)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*shape, 2, 3))
        self.reward_spec = Unbounded(shape=(*shape, 1))

    def _reset(self, tensordict, **kwargs):
        return TensorDict(observation=torch.zeros((*self.batch_size, 2, 3)), batch_size=self.batch_size)

    def _step(self, tensordict):
        action = tensordict["action"]
        if action.shape[-2:] != (2, 3):
            raise RuntimeError(f"MatrixActionEnv: action of shape {tuple(action.shape)}")
        reward = (action * _W).sum((-2, -1)).unsqueeze(-1)
        done = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(observation=action.clone(), reward=reward, done=done, batch_size=self.batch_size)

    def _set_seed(self, seed):
        pass


class TestPermuteImages(TransformContract):
    def make_env(self, batch_size=()):
        return PixelEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return PermuteTransform((-1, -3, -2), in_keys=["pixels"])

    def test_shapes_and_values(self):
        env = TransformedEnv(PixelEnv(batch_size=[2]), self.make_transform())
        spec = env.observation_spec["pixels"]
        assert spec.shape == (2, 3, 8, 6) and spec.dtype == torch.uint8 and isinstance(spec, Bounded)
        data = env.rollout(3)
        assert data["pixels"].shape == (2, 3, 3, 8, 6)
        x = torch.arange(24.0).reshape(2, 3, 4)
        out = PermuteTransform((-1, -3, -2), in_keys=["p"])(TensorDict(p=x))["p"]
        torch.testing.assert_close(out, x.permute(2, 0, 1))
        t = PermuteTransform([-2, -1], in_keys=["p"])
        assert t.dims == (-2, -1) and t.out_keys == ["p"] and PermuteTransform((-2, -1)).in_keys == []

    def test_spec_bounds_follow(self):
        low = torch.arange(24.0).reshape(2, 3, 4)
        spec = PermuteTransform((-1, -3, -2), in_keys=["p"]).transform_observation_spec(Composite(p=Bounded(low, 100.0, (2, 3, 4))))
        torch.testing.assert_close(spec["p"].space.low, low.permute(2, 0, 1))


class TestPermuteActions(TransformContract):
    def make_env(self, batch_size=()):
        return MatrixActionEnv(batch_size=batch_size)

    def make_transform(self):
        return PermuteTransform((-1, -2), in_keys=["observation"], in_keys_inv=["action"])

    def replay_buffer_data(self):  # stored actions are in the outer (permuted) layout
        env = TransformedEnv(self.make_env(), self.make_transform())
        data = env.rollout(self.steps, break_when_any_done=False)
        flat = data.get("next").copy()
        flat.set("action", data.get("action"))
        return flat

    def test_inverse_in_env(self):
        env = TransformedEnv(MatrixActionEnv(), self.make_transform())
        assert env.full_action_spec["action"].shape == (3, 2)
        assert env.observation_spec["observation"].shape == (3, 2)
        action = torch.arange(6.0).reshape(3, 2) / 10  # outer layout; the env sees its transpose
        td = env.step(env.reset().set("action", action))
        torch.testing.assert_close(td["next", "reward"], (action.T * _W).sum().reshape(1))
        torch.testing.assert_close(td["next", "observation"], action)  # permuted back on the way out
        check_env_specs(env, seed=0)

    def test_inverse_round_trip(self):
        t = PermuteTransform((-2, -1, -3), in_keys=["x"], in_keys_inv=["a"])
        x = torch.randn(5, 2, 3, 4)
        y = t(TensorDict(x=x.clone(), batch_size=[5]))["x"]
        assert y.shape == (5, 3, 4, 2)
        torch.testing.assert_close(t.inv(TensorDict(a=y, batch_size=[5]))["a"], x)


def test_errors():
    for dims in [(0, 1, 2), (-1, -1, -2), (-3, -2, -4)]:
        with pytest.raises(ValueError, match="must be a reordering of the trailing dims"):
            PermuteTransform(dims, in_keys=["p"])
    with pytest.raises(ValueError, match=r"cannot permute the last 3 dims of an entry of shape \(4, 5\)"):
        PermuteTransform((-1, -3, -2), in_keys=["p"])(TensorDict(p=torch.zeros(4, 5)))
    with pytest.raises(KeyError, match="in_keys_inv"):
        TransformedEnv(MatrixActionEnv(), PermuteTransform((-1, -2), in_keys_inv=["nope"])).full_action_spec


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
