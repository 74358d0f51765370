"""``EnvBase``: specs and their views, reset/step contract, done completion, partial resets, bad input."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Binary, Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase, PendulumEnv
from torchrl.testing import (
    ContinuousActionVecMockEnv,
    CountingEnv,
    CountingEnvCountPolicy,
    MultiKeyCountingEnv,
    NestedCountingEnv,
)

FAKE_TD_BUG = (
    "EnvBase.fake_tensordict (torchrl/envs/common.py) shares nested sub-TensorDicts between the root and 'next' "
    "(update() inserts them by reference), so root-only entries such as ('data', 'action') also appear under 'next'"
)


class DoneSignals(EnvBase):
    """Returns whichever of done/terminated/truncated ``self.returns`` names (all True), and a scalar reward."""

    def __init__(self, returns=("done",), **kwargs):
        super().__init__(**kwargs)
        batch = self.batch_size
        self.returns = returns
        self.observation_spec = Composite(obs=Unbounded((*batch, 2)), shape=batch)
        self.action_spec = Bounded(-1.0, 1.0, (*batch, 1))
        flag = Categorical(2, (*batch, 1), dtype=torch.bool)
        self.done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch)

    def _reset(self, tensordict, **kwargs):
        return TensorDict(obs=torch.zeros(*self.batch_size, 2), batch_size=self.batch_size)

    def _step(self, tensordict):
        batch = self.batch_size
        out = TensorDict(obs=torch.ones(*batch, 2), reward=torch.ones(batch), batch_size=batch)
        for name in self.returns:
            out[name] = torch.ones(*batch, 1, dtype=torch.bool)
        return out

    def _set_seed(self, seed):
        pass


class Minimal(EnvBase):
    """Sets only an observation and an action spec: reward and done specs are the defaults."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(obs=Unbounded((*self.batch_size, 3)), shape=self.batch_size)
        self.action_spec = Unbounded((*self.batch_size, 2))

    def _reset(self, tensordict, **kwargs):
        return TensorDict(obs=torch.zeros(*self.batch_size, 3), batch_size=self.batch_size)

    def _step(self, tensordict):
        return TensorDict(
            obs=torch.ones(*self.batch_size, 3),
            reward=torch.zeros(*self.batch_size, 1),
            done=torch.zeros(*self.batch_size, 1, dtype=torch.bool),
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


def _count_to(env: CountingEnv, value: int) -> TensorDict:
    td = env.reset()
    policy = CountingEnvCountPolicy(env.action_spec)
    for _ in range(value):
        td = env.step_mdp(env.step(policy(td)))
    return td


# ------------------------------------------------------------------------------------------------- specs
class TestSpecs:
    def test_input_and_output_spec_hold_the_full_specs(self):
        env = CountingEnv(batch_size=[2])
        assert set(env.input_spec.keys()) == {"full_action_spec", "full_state_spec"}
        assert set(env.output_spec.keys()) == {"full_observation_spec", "full_reward_spec", "full_done_spec"}
        assert env.output_spec["full_observation_spec"] == env.full_observation_spec
        assert env.input_spec["full_action_spec"] == env.full_action_spec
        assert env.input_spec.shape == env.output_spec.shape == (2,)

    def test_convenience_views(self):
        env = CountingEnv(batch_size=[2])
        assert isinstance(env.action_spec, Binary)
        assert env.action_spec == env.full_action_spec["action"]
        assert isinstance(env.reward_spec, Unbounded) and env.reward_spec.shape == (2, 1)
        assert isinstance(env.observation_spec, Composite)
        # two done leaves: the view is the full Composite
        assert isinstance(env.done_spec, Composite)
        assert set(env.done_spec.keys()) == {"done", "terminated"}
        assert isinstance(env.state_spec, Composite) and len(list(env.state_spec.keys())) == 0

    @pytest.mark.parametrize("action, leaf", [
        (Unbounded(2), True),
        (Composite(action=Unbounded(2)), True),
        (Composite(act=Unbounded(2)), False),  # one leaf, but not named "action"
        (Composite(agents=Composite(action=Unbounded((2, 1)), shape=(2,))), False),  # nested
        (Composite(action=Unbounded(2), other=Unbounded(1)), False),
    ])
    def test_action_spec_view_is_the_leaf_only_for_the_default_key(self, action, leaf):
        # TorchRL: action_spec/reward_spec give the leaf only when the only key is "action"/"reward"
        env = Minimal(spec_locked=False)
        env.action_spec = action
        assert isinstance(env.action_spec, Composite) is not leaf
        if leaf:
            assert env.action_spec is env.full_action_spec["action"]
        env.reward_spec = Composite(r=Unbounded(1))
        assert isinstance(env.reward_spec, Composite) and env.reward_keys == ["r"]

    def test_state_spec_of_pendulum(self):
        env = PendulumEnv()
        assert set(env.state_spec.keys()) == {"th", "thdot", "params"}
        assert env.state_keys[:2] == ["th", "thdot"]

    def test_keys(self):
        env = CountingEnv()
        assert env.action_keys == ["action"] and env.action_key == "action"
        assert env.reward_keys == ["reward"] and env.reward_key == "reward"
        assert env.observation_keys == ["observation"]
        assert env.done_keys == ["done", "terminated"]
        with pytest.raises(KeyError, match=r"the env has 2 done keys \(\['done', 'terminated'\]\)"):
            env.done_key  # as TorchRL: only an env with a single done key has a done_key
        assert env.reset_keys == ["_reset"]
        assert env.done_keys_groups == [["done", "terminated"]]

    def test_nested_keys(self):
        env = MultiKeyCountingEnv()
        assert env.done_keys_groups == [
            ["done", "terminated"],
            [("nested_1", "done"), ("nested_1", "terminated")],
            [("nested_2", "done"), ("nested_2", "terminated"), ("nested_2", "truncated")],
        ]
        with pytest.raises(KeyError, match=r"the env has 3 action keys .*use env.action_keys"):
            env.action_key

    def test_default_reward_and_done_specs(self):
        env = Minimal(batch_size=[4])
        assert env.reward_keys == ["reward"]
        assert env.reward_spec.shape == (4, 1) and env.reward_spec.dtype == torch.float32
        assert env.done_keys == ["done", "terminated"]
        assert env.full_done_spec["done"].dtype == torch.bool
        assert env.full_done_spec["terminated"].shape == (4, 1)

    def test_leaf_setters_wrap_under_default_names(self):
        env = Minimal(spec_locked=False)
        env.observation_spec = Unbounded((5,))
        env.action_spec = OneHot(4)
        env.reward_spec = Unbounded((2,))
        env.done_spec = Categorical(2, (1,), dtype=torch.bool)
        assert env.observation_keys == ["observation"]
        assert env.full_observation_spec["observation"].shape == (5,)
        assert env.action_keys == ["action"] and isinstance(env.action_spec, OneHot)
        assert env.reward_spec.shape == (2,)
        assert env.done_keys == ["done", "terminated"]

    def test_setting_specs_updates_derived_keys(self):
        env = Minimal(spec_locked=False)
        assert env.observation_keys == ["obs"]
        env.observation_spec = Composite(a=Unbounded((1,)), b=Composite(c=Unbounded((1,))))
        assert env.observation_keys == ["a", ("b", "c")]
        env.set_spec_lock_(True)
        assert env.is_spec_locked
        assert env.observation_keys == ["a", ("b", "c")]

    def test_specs_are_locked_after_init(self):
        # as TorchRL: a locked env refuses in-place edits of its specs; the setters unlock, set and lock again
        env = CountingEnv()
        assert env.is_spec_locked
        with pytest.raises(RuntimeError, match="locked"):
            env.observation_spec["x"] = Unbounded((1,))
        assert env.observation_keys == ["observation"]
        env.observation_spec = Composite(x=Unbounded((1,)))
        assert env.observation_keys == ["x"] and env.is_spec_locked and env.output_spec.is_locked
        env.set_spec_lock_(False)
        env.observation_spec["y"] = Unbounded((1,))
        assert env.observation_keys == ["x", "y"]

    def test_batch_size_setter_checks_the_specs(self):
        env = CountingEnv()
        with pytest.raises(ValueError, match=r"key 'observation' has shape torch.Size\(\[1\]\), which does not start"):
            env.batch_size = (2,)
        assert env.batch_size == () and env.is_spec_locked

    def test_repr(self):
        assert repr(CountingEnv()) == "CountingEnv()"  # nn.Module's, as TorchRL

    def test_spec_must_lead_with_batch_size(self):
        env = Minimal(batch_size=[3], spec_locked=False)
        with pytest.raises(ValueError, match=r"does not start with the env's batch_size torch.Size\(\[3\]\)"):
            env.observation_spec = Composite(obs=Unbounded((4, 3)), shape=(4,))
        assert env.observation_keys == ["obs"]


class TestAttributes:
    def test_batch_size(self):
        assert CountingEnv().batch_size == torch.Size([])
        assert CountingEnv(batch_size=3).batch_size == torch.Size([3])
        env = CountingEnv(batch_size=(2, 3))
        assert env.batch_size == torch.Size([2, 3]) and env.batch_dims == 2 and env.numel() == 6
        assert env.reset().batch_size == (2, 3)
        assert all(s.shape[:2] == (2, 3) for s in env.full_observation_spec.values(True, True))

    def test_device(self):
        assert CountingEnv().device is None
        env = CountingEnv(device="cpu")
        assert env.device == torch.device("cpu")
        assert env.full_observation_spec["observation"].device == torch.device("cpu")
        assert env.reset().device == torch.device("cpu")
        assert env.rand_step()["next"].device == torch.device("cpu")

    def test_to_device(self):
        env = CountingEnv(batch_size=[2])
        out = env.to("cpu")
        assert out is env
        assert env.device == torch.device("cpu")
        assert env.action_spec.device == torch.device("cpu")
        assert env.is_spec_locked
        assert env.rand_step()["next", "observation"].device == torch.device("cpu")

    def test_batch_locked(self):
        assert CountingEnv().batch_locked is True
        assert PendulumEnv().batch_locked is False
        env = CountingEnv()
        env.batch_locked = False
        assert env.batch_locked is False

    def test_close(self):
        env = CountingEnv()
        td = env.reset()
        env.close()
        assert env.is_closed
        with pytest.raises(RuntimeError, match="CountingEnv is closed"):
            env.reset()
        td["action"] = torch.ones(1, dtype=torch.int8)
        with pytest.raises(RuntimeError, match="CountingEnv is closed"):
            env.step(td)
        with pytest.raises(RuntimeError, match="already closed"):
            env.close()
        env.close(raise_if_closed=False)

    def test_not_callable_like_a_module(self):
        with pytest.raises(NotImplementedError, match=r"use env.reset\(\), env.step\(td\)"):
            CountingEnv()(TensorDict())


# ------------------------------------------------------------------------------------- reset / step
class TestResetStep:
    def test_reset_output(self):
        env = CountingEnv(batch_size=[2], start_val=1)
        td = env.reset()
        assert td["observation"].tolist() == [[1], [1]]
        assert not td["done"].any() and not td["terminated"].any()
        assert "next" not in td.keys() and "reward" not in td.keys()

    def test_reset_updates_the_input_in_place(self):
        # as TorchRL: reset(td) writes the outputs into td (masks removed, other entries kept) and returns it
        env = CountingEnv(batch_size=[2])
        td = env.rand_step(env.reset())
        td["hidden"] = torch.arange(2.0)
        td["_reset"] = torch.ones(2, 1, dtype=torch.bool)
        out = env.reset(td)
        assert out is td
        assert out["hidden"].tolist() == [0.0, 1.0]
        assert "next" in out.keys() and "_reset" not in out.keys()
        assert out["observation"].tolist() == [[0], [0]]

    def test_partial_reset_keeps_unmasked_rows_and_zeroes_unwritten_entries(self):
        # as TorchRL: the rows not reset keep the input's values; the reset rows of entries the reset does not
        # write (here the action and a hidden state) are zeroed
        env = CountingEnv(batch_size=[3])
        td = env.reset()
        td["observation"] = torch.tensor([[4], [5], [6]], dtype=td["observation"].dtype)
        td["action"] = torch.ones(3, 1, dtype=torch.int8)
        td["hidden"] = torch.full((3, 2), 7.0)
        td["_reset"] = torch.tensor([[False], [True], [False]])
        out = env.reset(td)
        assert out["observation"].squeeze(-1).tolist() == [4, 0, 6]
        assert out["action"].squeeze(-1).tolist() == [1, 0, 1]
        assert out["hidden"].tolist() == [[7.0, 7.0], [0.0, 0.0], [7.0, 7.0]]

    def test_step_writes_next_in_place(self):
        env = CountingEnv(batch_size=[2])
        td = env.reset()
        td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
        out = env.step(td)
        assert out is td
        assert set(out["next"].keys()) == {"observation", "reward", "done", "terminated"}
        assert out["next", "observation"].tolist() == [[1], [0]]
        assert out["observation"].tolist() == [[0], [0]]
        assert out["next"].batch_size == (2,)

    @pytest.mark.parametrize(
        "returns, expected",
        [
            (("done",), (True, True, False)),
            (("terminated",), (True, True, False)),
            (("truncated",), (True, False, True)),
            (("terminated", "truncated"), (True, True, True)),
            ((), (False, False, False)),  # nothing returned: every done entry is all-False, as in TorchRL
        ],
    )
    def test_done_terminated_truncated_completion(self, returns, expected):
        env = DoneSignals(returns)
        nxt = env.rand_step(env.reset())["next"]
        assert (nxt["done"].item(), nxt["terminated"].item(), nxt["truncated"].item()) == expected
        assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])

    def test_done_and_truncated_without_terminated_raises(self):
        # where both are set, terminated cannot be told (TorchRL raises RuntimeError too)
        env = DoneSignals(("done", "truncated"))
        with pytest.raises(RuntimeError, match="returned 'done' and 'truncated' but not 'terminated'"):
            env.rand_step(env.reset())

    def test_custom_done_names_are_kept_and_filled(self):
        # TorchRL pairs done/terminated only; a group without them keeps its names, missing entries are False
        from torchrl.data import Categorical, Composite

        class Custom(DoneSignals):
            def __init__(self):
                super().__init__(())
                self.done_spec = Composite(d=Categorical(2, (1,), dtype=torch.bool),
                                           g=Composite(truncated=Categorical(2, (1,), dtype=torch.bool)))

        env = Custom()
        assert env.done_keys == ["d", ("g", "truncated")]
        assert env.reset_keys == ["_reset", ("g", "_reset")]
        nxt = env.rand_step(env.reset())["next"]
        assert nxt["d"].tolist() == [False] and nxt["g", "truncated"].tolist() == [False]
        assert "done" not in nxt.keys()

    def test_truncated_step_is_done_not_terminated(self):
        env = ContinuousActionVecMockEnv(max_steps=2)
        data = env.rollout(5)
        assert data["next", "done"].squeeze(-1).tolist() == [False, True]
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, True]
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, False]

    def test_reward_without_trailing_dim_is_reshaped(self):
        env = DoneSignals(batch_size=[3])
        nxt = env.rand_step(env.reset())["next"]
        assert nxt["reward"].shape == (3, 1)

    def test_step_and_maybe_reset(self):
        env = CountingEnv(max_steps=1, batch_size=[2])
        td = env.reset()
        td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
        out, nxt = env.step_and_maybe_reset(td)
        # env 0 reached 2 > max_steps: its final observation stays in "next", the next input is reset
        assert out["next", "observation"].tolist() == [[2], [0]]
        assert out["next", "done"].tolist() == [[True], [False]]
        assert nxt["observation"].tolist() == [[0], [0]]
        assert nxt["done"].tolist() == [[False], [False]]
        # as TorchRL: the action stays at the root (the policy overwrites it), zeroed for the reset sub-env;
        # rewards and "next" do not
        assert "next" not in nxt.keys() and "reward" not in nxt.keys()
        assert nxt["action"].tolist() == [[0], [0]]
        assert env.count.tolist() == [[0], [0]]

    def test_step_mdp_takes_observations_and_dones_from_next(self):
        # as TorchRL: state-only and undeclared entries of "next" stay behind, the root's inputs are kept
        env = CountingEnv(batch_size=[2])
        env.state_spec = Composite(hidden=Unbounded((2, 3)), shape=(2,))
        td = env.reset()
        td["hidden"] = torch.zeros(2, 3)
        td["action"] = torch.ones(2, 1, dtype=torch.int8)
        out = env.step(td)
        out["next", "hidden"] = torch.ones(2, 3)
        out["next", "undeclared"] = torch.ones(2, 1)
        nxt = env.step_mdp(out)
        assert set(nxt.keys()) == {"observation", "done", "terminated", "action", "hidden"}
        assert nxt["hidden"].sum() == 0 and nxt["observation"].tolist() == [[1], [1]]
        # a reward that is also a state (e.g. a running sum) is taken from "next"
        env.set_spec_lock_(False)
        env.full_reward_spec["total"] = Unbounded((2, 1))
        env.full_state_spec["total"] = Unbounded((2, 1))
        out["next", "total"] = torch.full((2, 1), 5.0)
        out["total"] = torch.zeros(2, 1)
        nxt = env.step_mdp(out)
        assert nxt["total"].tolist() == [[5.0], [5.0]] and "reward" not in nxt.keys()

    def test_maybe_reset_is_in_place(self):
        env = CountingEnv(max_steps=0, batch_size=[2])
        td = env.reset()
        td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
        nxt = env.step_mdp(env.step(td))
        assert env.any_done(nxt)  # writes "_reset"
        out = env.maybe_reset(nxt)
        assert out is nxt and "_reset" not in nxt.keys()
        assert nxt["observation"].tolist() == [[0], [0]] and not env.any_done(nxt)

    def test_reset_fills_terminated_from_done(self):
        class ResetDone(CountingEnv):
            def _reset(self, td):
                out = super()._reset(td)
                out["done"] = torch.ones(1, dtype=torch.bool)
                out.pop("terminated", None)
                return out

        with pytest.raises(RuntimeError, match="True right after reset"):
            ResetDone().reset()
        td = ResetDone(allow_done_after_reset=True).reset()
        assert td["terminated"].tolist() == [True]  # as TorchRL: terminated copies the given done

    def test_step_and_maybe_reset_without_done_does_not_reset(self):
        env = CountingEnv(max_steps=10)
        td = CountingEnvCountPolicy(env.action_spec)(env.reset())
        out, nxt = env.step_and_maybe_reset(td)
        assert nxt["observation"].item() == 1 and env.count.item() == 1

    def test_rand_action_and_rand_step(self):
        torch.manual_seed(0)
        env = MultiKeyCountingEnv(batch_size=[4])
        td = env.rand_action(env.reset())
        assert env.full_action_spec.is_in(td.select(*env.action_keys))
        td = env.rand_step()  # as TorchRL: from an empty TensorDict (no reset)
        assert "next" in td.keys() and td["next", "nested_1", "observation"].shape == (4, 3, 1)
        assert set(td.keys()) == {"next", *[k if isinstance(k, str) else k[0] for k in env.action_keys]}
        actions = env.rand_action()
        assert set(actions.keys(True, True)) == set(env.action_keys)

    def test_rand_action_for_unlocked_env_with_larger_batch(self):
        env = PendulumEnv()
        td = env.rand_action(TensorDict(batch_size=[5]))
        assert td["action"].shape == (5, 1)
        assert ((td["action"] >= -2) & (td["action"] <= 2)).all()

    def test_fake_tensordict(self):
        env = CountingEnv(batch_size=[3])
        fake = env.fake_tensordict()
        assert fake.batch_size == (3,)
        assert set(fake.keys()) == {"observation", "action", "done", "terminated", "next"}
        assert set(fake["next"].keys()) == {"observation", "reward", "done", "terminated"}
        assert fake["observation"].dtype == torch.int32 and fake["action"].dtype == torch.int8
        assert (fake["next", "reward"] == 0).all()
        real = env.rand_step(env.reset())
        for key in fake.keys(True, True):
            assert fake[key].shape == real[key].shape, key

    def test_fake_tensordict_nested_groups(self):
        fake = NestedCountingEnv().fake_tensordict()
        assert set(fake["next"].keys(True, True)) == {("data", "states"), ("data", "reward"), ("data", "done"), ("data", "terminated")}


class TestSeeding:
    def test_set_seed_returns_the_next_seed(self):
        env = CountingEnv()
        nxt = env.set_seed(0)
        assert isinstance(nxt, int) and nxt != 0
        assert env.set_seed(0) == nxt
        assert env.set_seed(1) != nxt
        assert env.set_seed(5, static_seed=True) == 5
        assert env.set_seed(None) is None

    def test_seeded_random_rollouts_are_reproducible(self):
        env = CountingEnv(max_steps=100, batch_size=[3])
        env.set_seed(7)
        a = env.rollout(10)
        env.set_seed(7)
        b = env.rollout(10)
        env.set_seed(8)
        c = env.rollout(10)
        assert torch.equal(a["action"], b["action"])
        assert not torch.equal(a["action"], c["action"])

    def test_env_with_own_generator(self):
        env = PendulumEnv()
        env.set_seed(3)
        first = env.reset()["th"]
        env.set_seed(3)
        assert torch.equal(env.reset()["th"], first)
        env.set_seed(4)
        assert not torch.equal(env.reset()["th"], first)


class TestSubclassContract:
    def test_missing_methods_raise_not_implemented(self):
        class NoStep(EnvBase):
            def __init__(self):
                super().__init__()
                self.action_spec = Unbounded((1,))

            def _reset(self, tensordict, **kwargs):
                return TensorDict()

        env = NoStep()
        td = env.reset()
        td["action"] = torch.zeros(1)
        with pytest.raises(NotImplementedError, match=r"NoStep must implement _step\(tensordict\)"):
            env.step(td)
        with pytest.raises(NotImplementedError, match=r"NoStep must implement _set_seed\(seed\)"):
            env.set_seed(0)

    def test_step_must_return_a_tensordict(self):
        class ReturnsDict(Minimal):
            def _step(self, tensordict):
                return {"obs": torch.zeros(3)}

        env = ReturnsDict()
        with pytest.raises(TypeError, match="ReturnsDict._step must return a TensorDict, got dict"):
            env.rand_step(env.reset())

    def test_reset_must_return_a_tensordict(self):
        class ResetNone(Minimal):
            def _reset(self, tensordict, **kwargs):
                return None

        with pytest.raises(TypeError, match="ResetNone._reset must return a TensorDict, got NoneType"):
            ResetNone().reset()

    def test_reset_receives_the_input_and_kwargs(self):
        seen = {}

        class Spy(Minimal):
            def _reset(self, tensordict, **kwargs):
                seen["td"], seen["kwargs"] = tensordict, kwargs
                return super()._reset(tensordict)

        env = Spy()
        env.reset()
        assert seen["td"] is None
        td = TensorDict(hint=torch.ones(1))
        env.reset(td, level=3)
        assert seen["td"]["hint"].tolist() == [1.0] and seen["kwargs"] == {"level": 3}

    def test_missing_done_is_filled_with_false_after_reset(self):
        env = Minimal(batch_size=[2])
        td = env.reset()
        assert td["done"].tolist() == [[False], [False]]
        assert td["terminated"].tolist() == [[False], [False]]


# --------------------------------------------------------------------------------------- partial resets
class TestPartialResets:
    def test_only_masked_sub_envs_reset(self):
        env = CountingEnv(max_steps=100, batch_size=[2, 2])
        td = _count_to(env, 3)
        td["_reset"] = torch.tensor([[True, False], [False, True]]).unsqueeze(-1)
        out = env.reset(td)
        assert out["observation"].squeeze(-1).tolist() == [[0, 3], [3, 0]]

    def test_mask_without_trailing_dim_is_accepted(self):
        env = CountingEnv(max_steps=100, batch_size=[3])
        td = _count_to(env, 2)
        td["_reset"] = torch.tensor([False, True, False])
        assert env.reset(td)["observation"].squeeze(-1).tolist() == [2, 0, 2]

    def test_done_sub_envs_not_in_the_mask_may_stay_done(self):
        env = CountingEnv(max_steps=1, batch_size=[2])
        td = env.reset()
        td["action"] = torch.tensor([[1], [1]], dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        td["action"] = torch.tensor([[1], [1]], dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        assert td["done"].all()
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert out["done"].squeeze(-1).tolist() == [False, True]

    def test_any_done_writes_masks_and_maybe_reset_uses_them(self):
        env = CountingEnv(max_steps=1, batch_size=[3])
        td = env.reset()
        td["action"] = torch.tensor([[1], [1], [0]], dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        td["action"] = torch.tensor([[1], [0], [0]], dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        assert env.any_done(td)
        assert td["_reset"].squeeze(-1).tolist() == [True, False, False]
        out = env.maybe_reset(td)
        assert out["observation"].squeeze(-1).tolist() == [0, 1, 0]

    def test_nested_group_masks(self):
        env = MultiKeyCountingEnv(max_steps=100, batch_size=[2])
        td = env.reset()
        env.count_nested_2.fill_(5)
        td["nested_2", "observation"] = torch.full_like(td["nested_2", "observation"], 5.0)
        td["nested_1", "observation"] = torch.full_like(td["nested_1", "observation"], 3.0)
        td["nested_2", "_reset"] = torch.tensor([[True, False], [False, False]]).unsqueeze(-1)
        out = env.reset(td)
        # the group without a mask is reset whole, the other keeps the input's values outside its mask
        assert out["nested_1", "observation"].unique().tolist() == [0.0]
        assert out["nested_2", "observation"].squeeze(-1).tolist() == [[0.0, 5.0], [5.0, 5.0]]


# ------------------------------------------------------------------------------------------- bad input
class TestBadInput:
    def test_missing_action_lists_present_keys(self):
        env = CountingEnv(batch_size=[2])
        td = env.reset()
        with pytest.raises(KeyError, match=r"action key 'action' not found .*keys present: \['done', 'observation', 'terminated'\]"):
            env.step(td)
        assert env.rand_step(td)["next", "observation"].shape == (2, 1)

    def test_missing_nested_action(self):
        env = MultiKeyCountingEnv()
        td = env.rand_action(env.reset())
        del td["nested_2", "azione"]
        with pytest.raises(KeyError) as err:
            env.step(td)
        message = err.value.args[0]
        assert "MultiKeyCountingEnv.step: action key ('nested_2', 'azione') not found in the tensordict" in message
        assert "('nested_1', 'action')" in message

    def test_action_of_wrong_shape(self):
        env = CountingEnv(batch_size=[2])
        td = env.reset()
        td["action"] = torch.ones(2, 2, dtype=torch.int8)
        with pytest.raises(ValueError, match=r"action 'action' has shape \(2, 2\), expected \(2, 1\)"):
            env.step(td)
        td["action"] = torch.ones(2, 1, dtype=torch.int8)
        assert env.step(td)["next", "observation"].tolist() == [[1], [1]]


    def test_batched_states_on_unbatched_env_keep_their_checks(self):
        # the gen_params pattern: an unbatched env stepping a batch of states, checked from a per-batch memo
        env = PendulumEnv(seed=0)
        td = env.rand_action(env.reset(env.gen_params(batch_size=[4])))
        assert env.step(td)["next", "reward"].shape == (4, 1)
        td["action"] = torch.zeros(4, 2)
        with pytest.raises(ValueError, match=r"action 'action' has shape \(4, 2\), expected \(4, 1\)"):
            env.step(td)
        del td["action"]
        with pytest.raises(KeyError, match="action key 'action' not found"):
            env.step(td)
        other = env.rand_action(env.reset(env.gen_params(batch_size=[3, 2])))
        assert env.step(other)["next", "reward"].shape == (3, 2, 1)
    def test_action_of_wrong_dtype_in_checking_mode(self):
        env = CountingEnv(run_type_checks=True)
        td = env.reset()
        td["action"] = torch.ones(1, dtype=torch.float32)
        with pytest.raises(ValueError, match=r"CountingEnv.step: action 'action' has dtype torch.float32, expected torch.int8"):
            env.step(td)
        td["action"] = torch.ones(1, dtype=torch.int8)
        assert env.step(td)["next", "observation"].tolist() == [1]

    def test_action_outside_spec_in_checking_mode(self):
        env = CountingEnv(run_type_checks=True)
        td = env.reset()
        td["action"] = torch.full((1,), 3, dtype=torch.int8)
        with pytest.raises(ValueError, match=r"CountingEnv.step: action 'action' is not binary \(0 or 1\). Value 3 at index \(0,\) is neither 0 nor 1"):
            env.step(td)
        assert env.count.item() == 0

    def test_outside_spec_not_checked_by_default(self):
        env = CountingEnv()
        td = env.reset()
        td["action"] = torch.full((1,), 3, dtype=torch.int8)
        assert env.step(td)["next", "observation"].item() == 3

    def test_observation_outside_spec_in_checking_mode(self):
        class Escapes(EnvBase):
            def __init__(self):
                super().__init__(run_type_checks=True)
                self.observation_spec = Composite(pos=Bounded(0.0, 1.0, (1,)))
                self.action_spec = Unbounded((1,))

            def _reset(self, tensordict, **kwargs):
                return TensorDict(pos=torch.zeros(1))

            def _step(self, tensordict):
                return TensorDict(pos=torch.full((1,), 4.0), reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))

            def _set_seed(self, seed):
                pass

        env = Escapes()
        with pytest.raises(ValueError, match=r"Escapes.step: 'pos' is out of bounds \[0.0, 1.0\]: got max 4.0"):
            env.rand_step(env.reset())

    def test_batch_size_mismatch(self):
        env = CountingEnv(batch_size=[2])
        td = TensorDict(action=torch.ones(3, 1, dtype=torch.int8), batch_size=[3])
        with pytest.raises(RuntimeError, match=r"batch_size torch.Size\(\[3\]\) but the env's batch_size is torch.Size\(\[2\]\)"):
            env.step(td)
        with pytest.raises(RuntimeError, match=r"CountingEnv.reset: the tensordict has batch_size torch.Size\(\[3\]\)"):
            env.reset(TensorDict(batch_size=[3]))
        assert env.rand_step()["next"].batch_size == (2,)

    def test_reset_mask_of_wrong_shape(self):
        env = CountingEnv(batch_size=[2])
        with pytest.raises(RuntimeError, match=r"reset mask '_reset' has shape \(2, 3\); expected \(2, 1\)"):
            env.reset(TensorDict(_reset=torch.ones(2, 3, dtype=torch.bool), batch_size=[2]))
        nested = NestedCountingEnv(nested_dim=3, batch_size=[2])
        with pytest.raises(RuntimeError, match=r"reset mask \('data', '_reset'\) has shape \(2, 2, 1\); expected \(2, 3, 1\)"):
            nested.reset(TensorDict({("data", "_reset"): torch.ones(2, 2, 1, dtype=torch.bool)}, batch_size=[2]))
        assert env.reset()["observation"].shape == (2, 1)

    def test_reset_mask_of_wrong_dtype(self):
        env = CountingEnv(batch_size=[2])
        with pytest.raises(RuntimeError, match="reset mask '_reset' must be bool, got torch.int64"):
            env.reset(TensorDict(_reset=torch.ones(2, 1, dtype=torch.int64), batch_size=[2]))

    def test_step_returning_reward_of_wrong_size(self):
        class BadReward(Minimal):
            def _step(self, tensordict):
                out = super()._step(tensordict)
                out["reward"] = torch.zeros(3)
                return out

        env = BadReward()
        with pytest.raises(ValueError, match=r"BadReward._step returned 'reward' with shape \(3,\); the spec expects \(1,\)"):
            env.rand_step(env.reset())


def test_step_keeps_next_entries_written_by_the_policy():
    import torch

    from torchrl.envs import PendulumEnv

    env = PendulumEnv(seed=0)
    td = env.rand_action(env.reset())
    td["next", "h"] = torch.ones(1)
    env.step(td)
    assert td["next", "h"].tolist() == [1.0]
    assert "observation" in td["next"].keys()


class _NestedReset(EnvBase):
    """Resets write ``("sub", "y")``; the input may carry other ``"sub"`` entries."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(sub=Composite(y=Unbounded((2,)), shape=()), shape=())
        self.action_spec = Bounded(-1.0, 1.0, (1,))

    def _reset(self, tensordict, **kwargs):
        return TensorDict({"sub": TensorDict({"y": torch.ones(2)}, [])}, [])

    def _step(self, tensordict):
        return TensorDict({"sub": TensorDict({"y": torch.ones(2)}, []), "reward": torch.zeros(1), "done": torch.zeros(1, dtype=torch.bool)}, [])

    def _set_seed(self, seed):
        pass


def test_reset_merges_nested_outputs_into_the_input():
    env = _NestedReset()
    z = torch.full((2,), 7.0)
    given = TensorDict(
        {"sub": TensorDict({"y": torch.zeros(2), "z": z}, []), "other": torch.zeros(3),
         "_reset": torch.ones(1, dtype=torch.bool), "next": TensorDict({}, [])},
        [], device="cpu",
    )
    other = given["other"]
    out = env.reset(given)
    assert out is given  # as TorchRL: the input is updated in place
    assert out["sub", "y"].tolist() == [1.0, 1.0]  # the reset output wins
    assert out["sub", "z"] is z and out["other"] is other  # the input's other entries, not copied
    assert "_reset" not in out.keys() and "next" in out.keys()
    assert out.device == given.device


def test_reset_with_nested_reset_keys_updates_the_input():
    # nested done groups: the masks are removed from the input, which takes the reset's outputs
    env = NestedCountingEnv(nest_done=True, nest_reward=True, nested_dim=2)
    td = env.rand_step(env.reset())
    nxt = env.step_mdp(td)
    data_before = set(nxt["data"].keys())
    nxt["data", "_reset"] = torch.ones_like(nxt["data", "done"])
    out = env.reset(nxt)
    assert out is nxt
    assert ("data", "_reset") not in out.keys(True)
    assert set(out["data"].keys()) == data_before
    assert not out["data", "done"].any()


# ------------------------------------------------------------------------------------ key lists and groups
class _Groups(EnvBase):
    """Three agents in an ``"agents"`` group; root done entries when ``root_done``."""

    def __init__(self, root_done=False):
        super().__init__(batch_size=[2])
        flag = lambda *s: Categorical(2, s, dtype=torch.bool)  # noqa: E731
        self.observation_spec = Composite(agents=Composite(o=Unbounded((2, 3, 1)), shape=(2, 3)), g=Unbounded((2, 1)), shape=(2,))
        self.action_spec = Composite(agents=Composite(a=Unbounded((2, 3, 1)), shape=(2, 3)), shape=(2,))
        self.reward_spec = Composite(agents=Composite(reward=Unbounded((2, 3, 1)), shape=(2, 3)), shape=(2,))
        done = Composite(agents=Composite(terminated=flag(2, 3, 1), done=flag(2, 3, 1), shape=(2, 3)), shape=(2,))
        if root_done:
            done["done"], done["terminated"] = flag(2, 1), flag(2, 1)
        self.done_spec = done

    def _reset(self, td):
        agents = TensorDict({"o": torch.full((2, 3, 1), 100.0)}, [2, 3])
        return TensorDict({"agents": agents, "g": torch.full((2, 1), 100.0)}, [2])

    def _step(self, td):
        raise AssertionError("not stepped")

    def _set_seed(self, seed):
        return seed


def _group_input(env, masks):
    td = env.reset()
    td["agents", "o"] = torch.ones(2, 3, 1)
    td["agents", "h"] = torch.ones(2, 3)
    td["g"] = torch.ones(2, 1)
    for key, mask in masks.items():
        td[key] = mask
    return td


def test_key_lists_are_sorted_as_torchrl():
    env = _Groups(root_done=True)
    assert env.done_keys == ["done", "terminated", ("agents", "done"), ("agents", "terminated")]
    assert env.reset_keys == ["_reset", ("agents", "_reset")]
    assert env.done_keys_groups == [["done", "terminated"], [("agents", "terminated"), ("agents", "done")]]
    assert env.observation_keys == ["g", ("agents", "o")]


def test_group_mask_without_root_done_keeps_the_root_entries():
    env = _Groups()
    mask = torch.tensor([[True, False, False], [False, False, False]]).unsqueeze(-1)
    out = env.reset(_group_input(env, {("agents", "_reset"): mask}))
    assert out["agents", "o"].squeeze(-1).tolist() == [[100.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    assert out["agents", "h"].tolist() == [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    assert out["g"].squeeze(-1).tolist() == [1.0, 1.0]


def test_root_mask_covers_groups_without_their_own():
    env = _Groups(root_done=True)
    out = env.reset(_group_input(env, {"_reset": torch.tensor([[True], [False]])}))
    assert out["agents", "o"].squeeze(-1).tolist() == [[100.0] * 3, [1.0] * 3]
    assert out["g"].squeeze(-1).tolist() == [100.0, 1.0]


def test_group_mask_applies_to_its_group_beside_the_root_mask():
    env = _Groups(root_done=True)
    agents = torch.tensor([[True, False, False], [False, False, True]]).unsqueeze(-1)
    out = env.reset(_group_input(env, {"_reset": torch.tensor([[True], [False]]), ("agents", "_reset"): agents}))
    assert out["agents", "o"].squeeze(-1).tolist() == [[100.0, 1.0, 1.0], [1.0, 1.0, 100.0]]
    assert out["g"].squeeze(-1).tolist() == [100.0, 1.0]
