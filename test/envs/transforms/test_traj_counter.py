import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import Compose, EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _traj_counter as traj_counter
from torchrl.envs.transforms._traj_counter import TrajCounter

from test.envs.transforms.contract import TransformContract


class CountEnv(EnvBase):
    """Sub-env ``i`` ends after ``lengths[i]`` steps (stateful, batch-locked)."""

    def __init__(self, lengths=(2, 3)):
        super().__init__(batch_size=(len(lengths),))
        shape = self.batch_size
        self.lengths = torch.tensor(lengths)
        self.observation_spec = Composite(count=Unbounded((*shape, 1)), shape=shape)
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.count = torch.zeros(shape, dtype=torch.int64)

    def _reset(self, td=None, **kwargs):
        mask = td.get("_reset", None) if td is not None else None
        if mask is None:
            self.count.zero_()
        else:
            self.count[mask.reshape(-1)] = 0
        return TensorDict(count=self.count.unsqueeze(-1).float(), batch_size=self.batch_size)

    def _step(self, td):
        self.count += 1
        return TensorDict(
            count=self.count.unsqueeze(-1).float(), reward=torch.zeros(*self.batch_size, 1),
            done=(self.count >= self.lengths).unsqueeze(-1), batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


class AgentsEnv(EnvBase):
    """A root done group and an ``"agents"`` done group of shape ``(2, 1)``; the agents finish every 2 steps."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded((1,)))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))
        self.full_done_spec = Composite(
            done=Categorical(2, (1,), dtype=torch.bool), agents=Composite(done=Categorical(2, (2, 1), dtype=torch.bool))
        )
        self.t = 0

    def _reset(self, td=None, **kwargs):
        self.t = 0
        return TensorDict(obs=torch.zeros(1))

    def _step(self, td):
        self.t += 1
        return TensorDict(
            obs=torch.zeros(1), reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool),
            agents=TensorDict(done=torch.tensor([[self.t % 2 == 0], [False]])),
        )

    def _set_seed(self, seed):
        pass


class TestTrajCounter(TransformContract):
    env_only = True

    def make_transform(self):
        return TrajCounter()

    def test_documented_example(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(6)).append_transform(TrajCounter())
        data = env.rollout(18, break_when_any_done=False)
        assert data["next", "traj_count"].squeeze(-1).tolist() == [0] * 6 + [1] * 6 + [2] * 6
        assert data["traj_count"].shape == (18, 1)

    def test_partial_resets_take_new_ids_in_order(self):
        check_env_specs(TransformedEnv(CountEnv((2, 3)), TrajCounter()))
        env = TransformedEnv(CountEnv((2, 3)), TrajCounter())
        data = env.rollout(6, break_when_any_done=False)
        # Reset gives [0, 1]; sub-env 0 restarts after steps 2, 4, 6; sub-env 1 after steps 3 and 6.
        assert data["traj_count"].squeeze(-1).tolist() == [[0, 0, 2, 2, 4, 4], [1, 1, 1, 3, 3, 3]]
        assert data["next", "traj_count"].squeeze(-1).tolist() == data["traj_count"].squeeze(-1).tolist()

    def test_repeats(self):
        env = TransformedEnv(CountEnv((2, 2, 2, 2)), TrajCounter(repeats=2))
        data = env.rollout(4, break_when_any_done=False)
        assert data["traj_count"][:, 0].squeeze(-1).tolist() == [0, 0, 1, 1]
        assert data["traj_count"][:, 2].squeeze(-1).tolist() == [2, 2, 3, 3]

    def test_nested_done_group(self):
        check_env_specs(TransformedEnv(AgentsEnv(), TrajCounter(("agents", "traj_count"))))
        env = TransformedEnv(AgentsEnv(), TrajCounter(("agents", "traj_count")))
        assert env.observation_spec["agents", "traj_count"].shape == (2, 1)
        data = env.rollout(4, break_when_any_done=False)
        assert data["agents", "traj_count"].squeeze(-1).tolist() == [[0, 1], [0, 1], [2, 1], [2, 1]]

    def test_state_dict_round_trip(self):
        env = TransformedEnv(PendulumEnv(), Compose(StepCounter(2), TrajCounter()))
        env.rollout(6, break_when_any_done=False)  # resets before steps 1, 3, 5 and after step 6
        state = env.state_dict()
        assert state["transform.transforms.1.traj_count"].item() == 4
        other = TransformedEnv(PendulumEnv(), Compose(StepCounter(2), TrajCounter()))
        other.load_state_dict(state)
        assert other.reset()["traj_count"].item() == 4
        t = TrajCounter()
        with pytest.raises(RuntimeError, match="Missing key"):
            t.load_state_dict({})

    def test_clones_share_the_counter(self):
        t = TrajCounter()
        env_a = TransformedEnv(PendulumEnv(), t)
        env_b = TransformedEnv(PendulumEnv(), t.clone())
        assert [env_a.reset()["traj_count"].item(), env_b.reset()["traj_count"].item(), env_a.reset()["traj_count"].item()] == [0, 1, 2]

    def test_errors(self):
        with pytest.raises(ValueError, match="repeats must be a positive integer"):
            TrajCounter(repeats=0)
        with pytest.raises(KeyError, match="must sit in a done group"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(), TrajCounter(("group", "traj_count")))
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            TrajCounter()(TensorDict())


def test_doctests():
    result = doctest.testmod(traj_counter, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed


def test_spec_and_repeats_as_torchrl():
    t = TrajCounter()
    assert t.repeats == 0 and TrajCounter(repeats=2).repeats == 2
    env = TransformedEnv(PendulumEnv(), t)
    spec = env.observation_spec["traj_count"]
    assert spec.space.low.tolist() == [0] and spec.space.high.tolist() == [torch.iinfo(torch.int64).max]
