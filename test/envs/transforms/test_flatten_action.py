import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _flatten_action as fa_module
from torchrl.envs.transforms._flatten_action import FlattenAction

from test.envs.transforms.contract import TransformContract


class MatrixActionEnv(EnvBase):
    """Action of shape (2, 3) in [-1, 1]; observation = the action's row sums (2,); raises on a wrong shape."""

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(observation=Unbounded(shape=(*shape, 2)), shape=shape)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*shape, 2, 3))
        self.reward_spec = Unbounded(shape=(*shape, 1))

    def _reset(self, tensordict, **kwargs):
        return TensorDict(observation=torch.zeros((*self.batch_size, 2)), batch_size=self.batch_size)

    def _step(self, tensordict):
        action = tensordict["action"]
        if action.shape != (*self.batch_size, 2, 3):
            raise ValueError(f"MatrixActionEnv: expected an action of shape (2, 3), got {tuple(action.shape)}")
        obs = action.sum(-1)
        return TensorDict(
            observation=obs, reward=obs.sum(-1, keepdim=True),
            done=torch.zeros((*self.batch_size, 1), dtype=torch.bool), batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


class TestFlattenAction(TransformContract):
    def make_env(self, batch_size=()):
        return MatrixActionEnv(batch_size=batch_size)

    def make_transform(self):
        return FlattenAction(action_shape=(2, 3))

    def replay_buffer_data(self):
        # a buffer fed by the policy side holds flat actions: extend unflattens them, sample flattens again
        data = super().replay_buffer_data()
        return data.set("action", data["action"].flatten(-2, -1))

    def test_env_spec_and_step(self):
        env = TransformedEnv(MatrixActionEnv(batch_size=(4,)), FlattenAction())
        spec = env.action_spec
        assert isinstance(spec, Bounded) and spec.shape == (4, 6)
        assert spec.low.unique().tolist() == [-1.0] and spec.high.unique().tolist() == [1.0]
        check_env_specs(env)
        action = torch.arange(6.0).expand(4, 6) / 10
        out = env.step(env.reset().set("action", action))
        torch.testing.assert_close(out["next", "observation"], torch.tensor([[0.3, 1.2]]).expand(4, 2))
        assert env.rollout(3)["action"].shape == (4, 3, 6)

    def test_round_trip(self):
        t = FlattenAction(action_shape=(2, 3))
        a = torch.randn(5, 2, 3)
        flat = t(TensorDict(action=a, batch_size=[5]))["action"]
        assert flat.shape == (5, 6) and flat[0].tolist() == a[0].reshape(-1).tolist()
        back = t.inv(TensorDict(action=flat, batch_size=[5]))["action"]
        assert torch.equal(back, a)

    def test_inner_span(self):
        t = FlattenAction(first_dim=-3, last_dim=-2, action_shape=(2, 3))
        a = torch.arange(24.0).reshape(2, 3, 4)
        flat = t(TensorDict(action=a))["action"]
        assert flat.shape == (6, 4)
        assert torch.equal(t.inv(TensorDict(action=flat))["action"], a)
        spec = t.transform_action_spec(Unbounded(shape=(2, 3, 4)))
        assert isinstance(spec, Unbounded) and spec.shape == (6, 4)

    def test_positive_dims(self):
        t = FlattenAction(0, 1, allow_positive_dim=True, action_shape=(2, 3))
        assert t.first_dim == 0 and t.last_dim == 1
        assert t.inv(TensorDict(action=torch.arange(6.0)))["action"].shape == (2, 3)

    def test_errors(self):
        with pytest.raises(ValueError, match="must be negative"):
            FlattenAction(first_dim=0)
        with pytest.raises(ValueError, match="must be <= last_dim"):
            FlattenAction(first_dim=-1, last_dim=-2)
        with pytest.raises(RuntimeError, match="no stored unflatten shape"):
            FlattenAction().inv(TensorDict(action=torch.zeros(6)))
        with pytest.raises(RuntimeError, match="expected 6"):
            FlattenAction(action_shape=(2, 3)).inv(TensorDict(action=torch.zeros(5)))
        with pytest.raises(KeyError, match="not in the env's action spec"):  # (when the transform is attached)
            TransformedEnv(MatrixActionEnv(), FlattenAction(in_keys_inv=["other"]))

    def test_repr(self):
        assert repr(FlattenAction()) == (
            "FlattenAction(first_dim=-2, last_dim=-1, in_keys_inv=['action'], out_keys_inv=['action'])"
        )

    def test_doctest(self):
        assert doctest.testmod(fa_module, raise_on_error=True).attempted > 0
