import doctest

import torch
from tensordict import TensorDict

from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, TransformedEnv, check_env_specs
from torchrl.envs.transforms import RemoveEmptySpecs
from torchrl.envs.transforms import _remove_empty_specs as module

from test.envs.transforms.contract import TransformContract


class EmptyEntriesEnv(EnvBase):
    """Declares empty composites among its observations, rewards and state; records the step inputs."""

    _batch_locked = True

    def __init__(self, batch_size=(), seed=0):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(
            observation=Unbounded((*shape, 3)),
            other=Composite(another_other=Composite(shape=shape), shape=shape),
            shape=shape,
        )
        self.action_spec = Unbounded((*shape, 3))
        self.done_spec = Categorical(2, (*shape, 1), dtype=torch.bool)
        self.reward_spec = Composite(
            reward=Unbounded((*shape, 1)), other_reward=Composite(shape=shape), shape=shape
        )
        self.state_spec = Composite(hidden=Composite(shape=shape), shape=shape)
        self.seen_step: list[set] = []
        self.gen = torch.Generator().manual_seed(seed)

    def _reset(self, td=None, **kwargs):
        out = self.observation_spec.zero().update(self.full_done_spec.zero())
        out["observation"] = torch.rand(out["observation"].shape, generator=self.gen)
        return out

    def _step(self, td):
        self.seen_step.append(set(td.keys(True)))
        out = self.observation_spec.zero().update(self.full_done_spec.zero()).update(self.full_reward_spec.zero())
        out["observation"] = td["action"] * 2
        return out

    def _set_seed(self, seed):
        self.gen.manual_seed(seed)


class TestRemoveEmptySpecs(TransformContract):
    def make_transform(self):
        return RemoveEmptySpecs()

    def make_env(self, batch_size=()):
        return EmptyEntriesEnv(batch_size=batch_size)

    def test_specs_cleaned(self):
        env = TransformedEnv(EmptyEntriesEnv(), RemoveEmptySpecs())
        assert set(env.observation_spec.keys()) == {"observation"}
        assert set(env.full_reward_spec.keys()) == {"reward"}
        assert "hidden" not in env.full_state_spec.keys()
        assert set(env.full_done_spec.keys()) == {"done", "terminated"}

    def test_rollout_has_no_empty_entries(self):
        base = EmptyEntriesEnv()
        env = TransformedEnv(base, RemoveEmptySpecs())
        data = env.rollout(3)
        assert "other" not in data["next"].keys() and "other_reward" not in data["next"].keys()
        assert "other" not in data.keys()
        assert data["next", "observation"].shape == (3, 3)
        # the base env still receives the empty state entry it declares
        assert all("hidden" in seen for seen in base.seen_step)

    def test_inverse_restores_on_a_copy(self):
        env = TransformedEnv(EmptyEntriesEnv(), RemoveEmptySpecs())
        env.input_spec  # the removed input entries are known once the specs are built
        td = TensorDict(action=torch.zeros(3))
        out = env.transform.inv(td)
        assert "hidden" in out.keys() and "hidden" not in td.keys()
        t = RemoveEmptySpecs()
        assert t.inv(td) is td  # nothing removed: no copy

    def test_data_only(self):
        td = TensorDict(
            a=torch.zeros(2, 1), b=TensorDict(c=TensorDict(batch_size=[2]), d=torch.ones(2), batch_size=[2]),
            e=TensorDict(batch_size=[2]), batch_size=[2],
        )
        out = RemoveEmptySpecs()(td)
        assert set(out.keys(True, True)) == {"a", ("b", "d")}

    def test_output_spec_nested(self):
        spec = Composite(
            full_observation_spec=Composite(a=Unbounded(2), b=Composite(c=Composite()), e=Composite()),
            full_reward_spec=Composite(r=Composite()), full_done_spec=Composite(),
        )
        out = RemoveEmptySpecs().transform_output_spec(spec)
        assert set(out["full_observation_spec"].keys(True)) == {"a"}
        assert set(out["full_reward_spec"].keys()) == set()

    def test_check_env_specs(self):
        check_env_specs(TransformedEnv(EmptyEntriesEnv(batch_size=(2,)), RemoveEmptySpecs()), seed=0)


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
