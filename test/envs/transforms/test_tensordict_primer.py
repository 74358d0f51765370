import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _tensordict_primer as tensordict_primer
from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer

from test.envs.transforms.contract import TransformContract


class CountEnv(EnvBase):
    """Sub-env ``i`` ends after ``lengths[i]`` steps; ``count`` is the number of steps since its reset."""

    def __init__(self, lengths=(2, 3, 4)):
        super().__init__(batch_size=(len(lengths),))
        shape = self.batch_size
        self.lengths = torch.tensor(lengths)
        self.observation_spec = Composite(count=Unbounded((*shape, 1)), shape=shape)
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.count = torch.zeros(shape, dtype=torch.int64)
        self.reset_inputs: list = []

    def _reset(self, td=None, **kwargs):
        self.reset_inputs.append(td.clone() if td is not None else None)
        mask = td.get("_reset", None) if td is not None else None
        if mask is None:
            self.count.zero_()
        else:
            self.count[mask.reshape(-1)] = 0
        return TensorDict(count=self.count.unsqueeze(-1).float(), batch_size=self.batch_size)

    def _step(self, td):
        self.count += 1
        done = (self.count >= self.lengths).unsqueeze(-1)
        return TensorDict(
            count=self.count.unsqueeze(-1).float(), reward=torch.zeros(*self.batch_size, 1), done=done, batch_size=self.batch_size
        )

    def _set_seed(self, seed):
        pass


class TwoGroupEnv(EnvBase):
    """A root done group and an ``"agents"`` done group: two reset keys."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded((1,)))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))
        self.full_done_spec = Composite(
            done=Categorical(2, (1,), dtype=torch.bool),
            agents=Composite(done=Categorical(2, (2, 1), dtype=torch.bool)),
        )

    def _reset(self, td=None, **kwargs):
        return TensorDict(obs=torch.zeros(1))

    def _step(self, td):
        return TensorDict(
            obs=torch.zeros(1), reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool),
            agents=TensorDict(done=torch.zeros(2, 1, dtype=torch.bool)),
        )

    def _set_seed(self, seed):
        pass


def increment_h(td):
    td["h"] = td["h"] + 1
    td["action"] = torch.zeros(*td.batch_size, 1)
    return td


class TestTensorDictPrimer(TransformContract):
    def make_transform(self):
        return TensorDictPrimer(hidden=Unbounded((4,)))

    def test_specs_and_reset_values(self):
        env = TransformedEnv(PendulumEnv(batch_size=[3], seed=0), TensorDictPrimer(hidden=Unbounded((2, 4)), default_value=1.5))
        assert env.observation_spec["hidden"].shape == (3, 2, 4)
        assert env.state_spec["hidden"].shape == (3, 2, 4)
        td = env.reset()
        assert td["hidden"].shape == (3, 2, 4)
        assert (td["hidden"] == 1.5).all()

    def test_only_reset_sub_envs_are_reprimed(self):
        env = TransformedEnv(CountEnv((2, 3, 4)), TensorDictPrimer(h=Unbounded((1,))))
        check_env_specs(env)
        data = env.rollout(6, increment_h, break_when_any_done=False)
        assert data["h"].squeeze(-1).tolist() == [
            [1, 2, 1, 2, 1, 2],
            [1, 2, 3, 1, 2, 3],
            [1, 2, 3, 4, 1, 2],
        ]
        torch.testing.assert_close(data["next", "h"], data["h"])

    def test_value_written_by_policy_under_next_wins(self):
        env = TransformedEnv(PendulumEnv(seed=0), TensorDictPrimer(h=Unbounded((1,))))

        def policy(td):
            td["action"] = torch.zeros(1)
            td["next", "h"] = td["h"] + 10
            return td

        data = env.rollout(3, policy)
        assert data["next", "h"].squeeze(-1).tolist() == [10.0, 20.0, 30.0]
        assert data["h"].squeeze(-1).tolist() == [0.0, 10.0, 20.0]

    def test_random_values_follow_the_spec(self):
        torch.manual_seed(0)
        env = TransformedEnv(PendulumEnv(batch_size=[50]), TensorDictPrimer(x=Bounded(2.0, 3.0, (1,)), random=True))
        x = env.reset()["x"]
        assert ((x >= 2.0) & (x <= 3.0)).all()
        assert x.std() > 0.1

    def test_callable_and_per_key_defaults(self):
        primer = TensorDictPrimer(
            {"a": Unbounded((2,)), ("n", "b"): Unbounded((1,), dtype=torch.int64)},
            default_value={"a": lambda: torch.tensor([1.0, 2.0]), ("n", "b"): 7},
        )
        env = TransformedEnv(PendulumEnv(batch_size=[2]), primer)
        check_env_specs(env, seed=0)
        td = env.reset()
        assert td["a"].tolist() == [[1.0, 2.0], [1.0, 2.0]]
        assert td["n", "b"].tolist() == [[7], [7]] and td["n", "b"].dtype == torch.int64

    def test_single_default_value(self):
        calls = []

        def make():
            calls.append(1)
            return TensorDict(a=torch.ones(1), b=torch.full((2,), 3.0))

        env = TransformedEnv(
            PendulumEnv(), TensorDictPrimer(a=Unbounded((1,)), b=Unbounded((2,)), default_value=make, single_default_value=True)
        )
        td = env.reset()
        assert len(calls) == 1
        assert td["b"].tolist() == [3.0, 3.0]

    def test_expand_specs(self):
        batched = Composite(h=Unbounded((3, 2)), shape=(3,))
        env = TransformedEnv(PendulumEnv(batch_size=[3]), TensorDictPrimer(batched, expand_specs=False))
        assert env.observation_spec["h"].shape == (3, 2)
        env = TransformedEnv(PendulumEnv(batch_size=[3]), TensorDictPrimer(h=Unbounded((3, 2)), expand_specs=False))
        assert env.observation_spec["h"].shape == (3, 2)
        with pytest.raises(ValueError, match=r"primer 'h' has shape \(2,\), which does not start with the env's batch size"):
            TransformedEnv(PendulumEnv(batch_size=[3]), TensorDictPrimer(h=Unbounded((2,)), expand_specs=False))
        # A per-sub-env spec whose shape happens to equal the batch size is still expanded by default.
        for expand in (None, True):
            env = TransformedEnv(PendulumEnv(batch_size=[3]), TensorDictPrimer(h=Unbounded((3,)), expand_specs=expand))
            assert env.observation_spec["h"].shape == (3, 3)
        wrong = Composite(h=Unbounded((2, 2)), shape=(2,))
        with pytest.raises(ValueError, match=r"primers Composite has batch shape \(2,\) but the env's batch size is \(3,\)"):
            TransformedEnv(PendulumEnv(batch_size=[3]), TensorDictPrimer(wrong))

    def test_nested_primer_and_nested_reset_key(self):
        with pytest.raises(ValueError, match="several reset keys .*pass reset_key="):
            TransformedEnv(TwoGroupEnv(), TensorDictPrimer(h=Unbounded((1,))))
        env = TransformedEnv(TwoGroupEnv(), TensorDictPrimer({("agents", "h"): Unbounded((2, 3))}, reset_key=("agents", "_reset")))
        check_env_specs(env)
        td = env.reset()
        td["agents", "h"] = torch.ones(2, 3)
        td["agents", "_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert out["agents", "h"].tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]

    def test_call_before_env_reset(self):
        base = CountEnv((5, 5, 5))
        env = TransformedEnv(base, TensorDictPrimer(h=Unbounded((1,)), default_value=4.0, call_before_env_reset=True))
        td = env.reset()
        assert base.reset_inputs[-1]["h"].tolist() == [[4.0]] * 3
        assert td["h"].tolist() == [[4.0]] * 3

    def test_with_step_counter(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=2))
        env.append_transform(TensorDictPrimer(h=Unbounded((1,))))
        data = env.rollout(5, increment_h, break_when_any_done=False)
        assert data["h"].squeeze(-1).tolist() == [1.0, 2.0, 1.0, 2.0, 1.0]

    def test_forward_fills_missing_entries(self):
        t = TensorDictPrimer(a=Unbounded((2,)), b=Unbounded((1,)), default_value=2.0)
        td = TensorDict(a=torch.ones(5, 2), batch_size=[5])
        out = t(td)
        assert out["a"].tolist() == [[1.0, 1.0]] * 5
        assert out["b"].shape == (5, 1) and (out["b"] == 2.0).all()

    def test_argument_errors(self):
        with pytest.raises(ValueError, match="random=True and default_value are mutually exclusive"):
            TensorDictPrimer(a=Unbounded(()), random=True, default_value=1.0)
        with pytest.raises(ValueError, match="default_value dict must have exactly the primer keys"):
            TensorDictPrimer({"a": Unbounded(()), "b": Unbounded(())}, default_value={"a": 1.0})
        with pytest.raises(ValueError, match="either as `primers` or as keyword arguments"):
            TensorDictPrimer({"a": Unbounded(())}, b=Unbounded(()))
        with pytest.raises(TypeError, match="primers must be a dict or a Composite"):
            TensorDictPrimer([Unbounded(())])
        with pytest.raises(ValueError, match="single_default_value=True needs a callable"):
            TensorDictPrimer(a=Unbounded(()), single_default_value=True)

    def test_callable_with_wrong_shape(self):
        env = TransformedEnv(PendulumEnv(), TensorDictPrimer(a=Unbounded((2,)), default_value=lambda: torch.ones(3)))
        with pytest.raises(ValueError, match=r"default_value for 'a' returned shape \(3,\)"):
            env.reset()


def test_doctests():
    result = doctest.testmod(tensordict_primer, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed


def test_attributes_as_torchrl():
    t = TensorDictPrimer(mem=Unbounded((3,)))
    assert t.in_keys == [] and t.out_keys == []  # the primed keys are not out_keys
    assert t.random is None and t.default_value == {"mem": 0.0}
    assert TensorDictPrimer(mem=Unbounded((3,)), default_value=2.0).default_value == {"mem": 2.0}
    assert TensorDictPrimer(mem=Unbounded((3,)), random=True).random is True
