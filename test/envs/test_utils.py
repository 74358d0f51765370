"""Environment utilities: ``step_mdp``, ``check_env_specs``, ``make_composite_from_td``,
``terminated_or_truncated``, exploration type, ``RandomPolicy``.

(``EnvMetaData`` and ``EnvCreator`` are not implemented yet and are not covered here.)
"""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Categorical, Composite, NonTensor, OneHot, Unbounded
from torchrl.envs import (
    EnvBase,
    ExplorationType,
    PendulumEnv,
    RandomPolicy,
    check_env_specs,
    exploration_type,
    make_composite_from_td,
    set_exploration_type,
    step_mdp,
    terminated_or_truncated,
)
from torchrl.testing import CountingEnv, MultiKeyCountingEnv

CHECK_STACK_BUG = (
    "check_env_specs (torchrl/envs/_check_env.py, _check_once) stacks a 3-step rollout before comparing with the "
    "specs, so data that disagrees with the specs fails inside tensordict's stack with a RuntimeError that does "
    "not say spec vs data; expected an AssertionError naming the key"
)


def _transition(**extra):
    return TensorDict(
        {
            "obs": torch.zeros(2),
            "action": torch.ones(1),
            "hidden": torch.full((3,), 7.0),
            "next": {
                "obs": torch.ones(2),
                "reward": torch.ones(1),
                "done": torch.zeros(1, dtype=torch.bool),
                "terminated": torch.zeros(1, dtype=torch.bool),
                "truncated": torch.zeros(1, dtype=torch.bool),
            },
            **extra,
        },
        [],
    )


class TestStepMDP:
    def test_defaults(self):
        out = step_mdp(_transition())
        assert set(out.keys()) == {"obs", "hidden", "done", "terminated", "truncated"}
        assert out["obs"].tolist() == [1.0, 1.0]
        assert out["hidden"].tolist() == [7.0] * 3

    def test_keep_other_false(self):
        assert set(step_mdp(_transition(), keep_other=False).keys()) == {"obs", "done", "terminated", "truncated"}

    def test_exclude_flags(self):
        td = _transition()
        assert "reward" in step_mdp(td, exclude_reward=False).keys()
        # as TorchRL: exclude_done drops the done_keys named ("done"), not their terminated/truncated siblings
        assert set(step_mdp(td, exclude_done=True).keys()) == {"obs", "hidden", "terminated", "truncated"}
        kept = step_mdp(td, exclude_done=True, done_keys=["done", "terminated", "truncated"]).keys()
        assert set(kept) == {"obs", "hidden"}
        assert step_mdp(td, exclude_action=False)["action"].tolist() == [1.0]

    def test_custom_keys(self):
        td = TensorDict(
            {
                "a": torch.zeros(1),
                "next": {"r": torch.ones(1), "d": torch.zeros(1, dtype=torch.bool), "o": torch.ones(1)},
            },
            [],
        )
        out = step_mdp(td, reward_keys="r", done_keys="d", action_keys="a")
        assert set(out.keys()) == {"d", "o"}

    def test_nested_keys(self):
        td = TensorDict(
            {
                "agents": {"obs": torch.zeros(2), "action": torch.zeros(2), "memory": torch.ones(2)},
                "next": {"agents": {"obs": torch.ones(2), "reward": torch.ones(2), "done": torch.zeros(2, dtype=torch.bool)}},
            },
            [],
        )
        out = step_mdp(td, reward_keys=("agents", "reward"), done_keys=("agents", "done"), action_keys=("agents", "action"))
        assert set(out.keys(True, True)) == {("agents", "obs"), ("agents", "done"), ("agents", "memory")}
        assert out["agents", "obs"].tolist() == [1.0, 1.0]

    def test_writes_into_next_tensordict(self):
        target = TensorDict({}, [])
        out = step_mdp(_transition(), next_tensordict=target)
        assert out is target
        assert target["obs"].tolist() == [1.0, 1.0]

    def test_shares_tensors(self):
        td = _transition()
        assert step_mdp(td)["obs"].data_ptr() == td["next", "obs"].data_ptr()

    def test_needs_next(self):
        with pytest.raises(KeyError, match=r"no 'next' entry \(keys: \['a'\]\); call env.step\(tensordict\) first"):
            step_mdp(TensorDict(a=torch.zeros(1)))

    def test_env_step_mdp_agrees_with_the_function(self):
        # as TorchRL, env.step_mdp keeps the action and takes from "next" only what the specs declare
        env = CountingEnv(batch_size=[2])
        td = env.rand_step(env.reset())
        td["hidden"] = torch.ones(2, 1)
        td["next", "undeclared"] = torch.ones(2, 1)
        a, b = env.step_mdp(td), step_mdp(td, exclude_action=False).exclude("undeclared")
        assert set(a.keys()) == set(b.keys()) == {"observation", "done", "terminated", "action", "hidden"}
        assert all(torch.equal(a[k], b[k]) for k in a.keys())


class BadSpecEnv(EnvBase):
    """Declares ``obs`` (3 floats); ``mode`` decides how the data disagrees."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        specs = {"obs": Bounded(0.0, 1.0, (3,))}
        if mode == "missing":
            specs["spare"] = Unbounded((2,))
        self.observation_spec = Composite(specs)
        self.action_spec = Unbounded((1,))

    def _reset(self, tensordict, **kwargs):
        return TensorDict(obs=torch.zeros(3))

    def _step(self, tensordict):
        obs = {
            "shape": torch.zeros(4),
            "dtype": torch.zeros(3, dtype=torch.float64),
            "range": torch.full((3,), 2.0),
        }.get(self.mode, torch.zeros(3))
        out = TensorDict(obs=obs, reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))
        if self.mode == "extra":
            out["surprise"] = torch.zeros(1)
        return out

    def _set_seed(self, seed):
        pass


class TestCheckEnvSpecs:
    @pytest.mark.parametrize(
        "make",
        [lambda: CountingEnv(), lambda: CountingEnv(batch_size=[2, 3]), lambda: PendulumEnv(), lambda: PendulumEnv(batch_size=[4])],
    )
    def test_consistent_envs_pass(self, make):
        check_env_specs(make())

    def test_dtype_mismatch_names_the_key(self):
        with pytest.raises(AssertionError, match=r"check_env_specs\(BadSpecEnv\): key \('next', 'obs'\): spec dtype torch.float32, data dtype torch.float64 \(step 0\)"):
            check_env_specs(BadSpecEnv("dtype"))

    def test_check_dtype_false_ignores_dtypes(self):
        check_env_specs(BadSpecEnv("dtype"), check_dtype=False)

    def test_value_outside_spec_names_the_key(self):
        with pytest.raises(AssertionError, match=r"key 'obs' at step 1 is outside its spec BoundedContinuous.*min=2.0, max=2.0"):
            check_env_specs(BadSpecEnv("range"))

    def test_declared_key_not_returned(self):
        with pytest.raises(AssertionError, match=r"its specs declare \['spare', \('next', 'spare'\)\] which the env did not return"):
            check_env_specs(BadSpecEnv("missing"))

    def test_returned_key_not_declared(self):
        with pytest.raises(AssertionError, match="surprise"):
            check_env_specs(BadSpecEnv("extra"))

    def test_shape_mismatch_names_the_key(self):
        with pytest.raises(AssertionError, match=r"'obs'.*\(3,\).*\(4,\)"):
            check_env_specs(BadSpecEnv("shape"))

    def test_seed_restores_the_global_rng(self):
        torch.manual_seed(0)
        expected = torch.rand(3)
        torch.manual_seed(0)
        check_env_specs(CountingEnv(), seed=1)
        assert torch.equal(torch.rand(3), expected)

    def test_both_break_modes_and_initial_tensordict(self):
        env = CountingEnv(max_steps=1)
        check_env_specs(env, break_when_any_done="both")
        check_env_specs(env, tensordict=env.reset())

    def test_method_form(self):
        with pytest.raises(AssertionError, match="key 'obs'"):
            BadSpecEnv("range").check_env_specs()


class TestMakeCompositeFromTd:
    def test_structure_shapes_and_dtypes(self):
        td = TensorDict(
            {"obs": torch.zeros(3, 4), "idx": torch.zeros(3, dtype=torch.long), "sub": {"x": torch.zeros(3, 2, dtype=torch.float64)}},
            [3],
        )
        spec = make_composite_from_td(td)
        assert spec.shape == (3,)
        assert isinstance(spec["obs"], Unbounded) and spec["obs"].shape == (3, 4)
        assert spec["idx"].shape == (3,) and spec["idx"].dtype == torch.long  # only 0-dim leaves are unsqueezed
        assert make_composite_from_td(TensorDict({"s": torch.tensor(1.0)}, []))["s"].shape == (1,)
        assert make_composite_from_td(td, dynamic_shape=True)["obs"].shape == (3, -1)
        assert isinstance(spec["sub"], Composite) and spec["sub", "x"].dtype == torch.float64
        assert spec["sub"].shape == (3,)

    def test_without_unsqueezing_scalars(self):
        spec = make_composite_from_td(TensorDict(idx=torch.zeros(3), batch_size=[3]), unsqueeze_null_shapes=False)
        assert spec["idx"].shape == (3,)

    def test_round_trip(self):
        td = TensorDict({"a": torch.randn(2, 5), "b": {"c": torch.randint(3, (2, 1))}}, [2])
        spec = make_composite_from_td(td)
        assert spec.is_in(td)
        zero = spec.zero()
        assert set(zero.keys(True, True)) == set(td.keys(True, True))
        assert all(zero[k].shape == td[k].shape and zero[k].dtype == td[k].dtype for k in td.keys(True, True))

    def test_non_tensor_entries(self):
        td = TensorDict(a=torch.zeros(1))
        td.set_non_tensor("text", "hello")
        spec = make_composite_from_td(td)
        assert isinstance(spec["text"], NonTensor)


class TestTerminatedOrTruncated:
    def test_root_group(self):
        td = TensorDict({"done": torch.tensor([[True], [False]]), "terminated": torch.tensor([[True], [False]])}, [2])
        assert terminated_or_truncated(td) is True
        assert td["_reset"].squeeze(-1).tolist() == [True, False]

    def test_groups_are_aggregated_separately(self):
        td = TensorDict(
            {
                "done": torch.tensor([[False], [False]]),
                "agents": {"terminated": torch.tensor([[False], [False]]), "truncated": torch.tensor([[False], [True]])},
            },
            [2],
        )
        assert terminated_or_truncated(td) is True
        assert td["agents", "_reset"].squeeze(-1).tolist() == [False, True]
        # as TorchRL: once any group is done, every group's mask is written
        assert td["_reset"].squeeze(-1).tolist() == [False, False]

    def test_all_false_writes_nothing_unless_asked(self):
        td = TensorDict({"done": torch.zeros(2, 1, dtype=torch.bool)}, [2])
        assert terminated_or_truncated(td) is False
        assert "_reset" not in td.keys()
        assert terminated_or_truncated(td, write_full_false=True) is False
        assert td["_reset"].tolist() == [[False], [False]]

    def test_custom_key_and_no_key(self):
        td = TensorDict({"done": torch.tensor([[True], [False]])}, [2])
        assert terminated_or_truncated(td, key=None) is True
        assert set(td.keys()) == {"done"}
        terminated_or_truncated(td, key="finished")
        assert td["finished"].squeeze(-1).tolist() == [True, False]

    def test_with_a_done_spec(self):
        env = MultiKeyCountingEnv(batch_size=[2])
        td = env.fake_tensordict()["next"]
        td["nested_2", "truncated"][0, 1] = True
        assert terminated_or_truncated(td, full_done_spec=env.full_done_spec) is True
        assert td["nested_2", "_reset"].squeeze(-1).tolist() == [[False, True], [False, False]]
        assert not td["nested_1", "_reset"].any()  # written too, all False (as TorchRL)


class TestExplorationType:
    def test_members(self):
        names = {t.name for t in ExplorationType}
        assert {"RANDOM", "DETERMINISTIC", "MODE", "MEAN"} <= names

    def test_context_manager_sets_and_restores(self):
        before = exploration_type()
        with set_exploration_type(ExplorationType.RANDOM):
            assert exploration_type() is ExplorationType.RANDOM
            with set_exploration_type(ExplorationType.MEAN):
                assert exploration_type() is ExplorationType.MEAN
            assert exploration_type() is ExplorationType.RANDOM
        assert exploration_type() == before

    def test_string_form(self):
        with set_exploration_type("deterministic"):
            assert exploration_type() is ExplorationType.DETERMINISTIC

    def test_decorator(self):
        @set_exploration_type(ExplorationType.MODE)
        def inside():
            return exploration_type()

        assert inside() is ExplorationType.MODE


class TestRandomPolicy:
    def test_leaf_spec(self):
        torch.manual_seed(0)
        policy = RandomPolicy(Bounded(-1.0, 1.0, shape=(2,)))
        actions = torch.stack([policy(TensorDict())["action"] for _ in range(50)])
        assert actions.shape == (50, 2)
        assert ((actions >= -1) & (actions <= 1)).all() and actions.std() > 0.3

    def test_custom_action_key(self):
        out = RandomPolicy(OneHot(3), action_key=("agent", "act"))(TensorDict())
        assert out["agent", "act"].shape == (3,) and out["agent", "act"].sum() == 1

    def test_composite_spec(self):
        env = MultiKeyCountingEnv(batch_size=[2])
        out = RandomPolicy(env.full_action_spec)(TensorDict(batch_size=[2]))
        assert set(out.keys(True, True)) == set(env.action_keys)
        assert env.full_action_spec.is_in(out)

    def test_from_env(self):
        env = CountingEnv()
        policy = RandomPolicy()
        with pytest.raises(RuntimeError, match="RandomPolicy: no action_spec"):
            policy(TensorDict())
        policy.set_action_spec_from_env(env)
        data = env.rollout(5, policy)
        assert data["action"].dtype == torch.int8

    def test_drives_a_rollout(self):
        torch.manual_seed(0)
        env = PendulumEnv()
        data = env.rollout(20, RandomPolicy(env.action_spec))
        assert data.shape == (20,)
        assert ((data["action"] >= -2) & (data["action"] <= 2)).all()


class _StateWriter(EnvBase):
    def __init__(self, extra: bool = False):
        super().__init__(batch_size=[])
        self.observation_spec = Composite(o=Unbounded((1,)))
        self.state_spec = Composite(s=Unbounded((1,)))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))
        self.extra = extra

    def _reset(self, td):
        return TensorDict(o=torch.zeros(1), s=torch.zeros(1))

    def _step(self, td):
        out = TensorDict(o=td["o"] + 1, s=td["s"] + 1, reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))
        if self.extra:
            out["u"] = torch.zeros(1)
        return out

    def _set_seed(self, seed):
        return seed


def test_check_env_specs_accepts_state_entries_under_next():
    # as TorchRL: a step may write the env's state entries under "next"; other undeclared entries still fail
    check_env_specs(_StateWriter())
    with pytest.raises(AssertionError, match="'u'"):
        check_env_specs(_StateWriter(extra=True))
