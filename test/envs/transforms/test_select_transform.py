import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _select_transform as select_transform
from torchrl.envs.transforms._select_transform import SelectTransform

from test.envs.transforms.contract import TransformContract


class NestedEnv(EnvBase):
    """Observations at the root and under ``"nested"``, a second reward, done after 4 steps."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(
            obs=Unbounded((*shape, 2)),
            nested=Composite(a=Unbounded((*shape, 1)), b=Unbounded((*shape, 3)), shape=shape),
            shape=shape,
        )
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Composite(reward=Unbounded((*shape, 1)), bonus=Unbounded((*shape, 1)), shape=shape)
        self.t = 0

    def _obs(self, value):
        shape = self.batch_size
        return {
            "obs": torch.full((*shape, 2), value),
            "nested": TensorDict(a=torch.full((*shape, 1), value), b=torch.full((*shape, 3), value), batch_size=shape),
        }

    def _reset(self, td=None, **kwargs):
        self.t = 0
        return TensorDict(self._obs(0.0), batch_size=self.batch_size)

    def _step(self, td):
        self.t += 1
        out = self._obs(float(self.t))
        out["reward"] = td["action"].clone()
        out["bonus"] = torch.ones_like(td["action"])
        out["done"] = torch.full((*self.batch_size, 1), self.t >= 4)
        return TensorDict(out, batch_size=self.batch_size)

    def _set_seed(self, seed):
        pass


class TestSelectTransform(TransformContract):
    def make_transform(self):
        return SelectTransform("observation")

    def test_keeps_selected_rewards_dones_and_state(self):
        env = TransformedEnv(NestedEnv(), SelectTransform("obs"))
        check_env_specs(env)
        assert set(env.observation_spec.keys(True, True)) == {"obs"}
        assert set(env.full_reward_spec.keys()) == {"reward", "bonus"}
        data = env.rollout(5)
        assert data.shape == (4,)
        assert set(data["next"].keys(True, True)) == {"obs", "reward", "bonus", "done", "terminated"}
        assert data["next", "obs"][:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]

    def test_state_entries_are_kept_so_the_env_runs(self):
        env = TransformedEnv(PendulumEnv(seed=0), SelectTransform("observation"))
        assert {"th", "thdot", "params", "observation"} == set(env.observation_spec.keys())
        ref = PendulumEnv(seed=0)
        actions = [torch.full((1,), 0.3)] * 3
        data = env.rollout(3, actions=actions)
        expected = ref.rollout(3, actions=actions)
        torch.testing.assert_close(data["next", "observation"], expected["next", "observation"])

    def test_drop_rewards_and_dones(self):
        env = TransformedEnv(NestedEnv(), SelectTransform("obs", "bonus", keep_rewards=False, keep_dones=False))
        assert set(env.full_reward_spec.keys()) == {"bonus"}
        assert set(env.full_done_spec.keys()) == set()
        td = env.rand_step(env.reset())
        assert set(td["next"].keys()) == {"obs", "bonus"}

    def test_nested_selection(self):
        env = TransformedEnv(NestedEnv(batch_size=(3,)), SelectTransform(("nested", "b")))
        check_env_specs(env)
        assert set(env.observation_spec.keys(True, True)) == {("nested", "b")}
        assert env.observation_spec["nested"].shape == (3,)
        data = env.rollout(2)
        assert data["next", "nested", "b"].shape == (3, 2, 3)
        assert ("nested", "a") not in data["next"].keys(True, True)

    def test_in_compose_after_step_counter(self):
        env = TransformedEnv(NestedEnv(), StepCounter(max_steps=2))
        env.append_transform(SelectTransform("obs", "step_count"))
        check_env_specs(env)
        data = env.rollout(5)
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2]
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, True]

    def test_forward_standalone(self):
        t = SelectTransform("a", keep_dones=False)
        td = TensorDict(a=torch.zeros(2), b=torch.zeros(2), reward=torch.ones(2), done=torch.zeros(2, dtype=torch.bool), batch_size=[2])
        assert set(t(td).keys()) == {"a", "reward"}

    def test_rejects_bad_keys(self):
        with pytest.raises(TypeError, match="SelectTransform: keys must be strings"):
            SelectTransform("a", 1)
        with pytest.raises(RuntimeError, match=r"SelectTransform: got the list \['a', 'b'\] as a key"):
            SelectTransform(["a", "b"])  # as TorchRL: a list is not a key


def test_doctests():
    result = doctest.testmod(select_transform, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
