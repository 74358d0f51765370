"""Action, reward-signal and control-flow transforms on a multi-agent group (``GroupContract``).

Action transforms act through their inverse on ``("agents", "action")`` (agent dim kept); the env variants
below record the action each agent received, so the inverse is checked against the policy's action. The
reset-driven transforms run on a batched group env whose rows finish at different steps (partial resets).
"""
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Binary, Bounded, Categorical, Composite, MultiCategorical, OneHot, Unbounded
from torchrl.envs import AutoResetEnv, ParallelEnv, SerialEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import (
    ActionChunkTransform,
    ActionDiscretizer,
    ActionMask,
    ActionScaling,
    AutoResetTransform,
    ConditionalPolicySwitch,
    ConditionalSkip,
    DiscreteActionProjection,
    EndOfLifeTransform,
    FlattenAction,
    FrameSkipTransform,
    MeanActionSelector,
    MultiAction,
    NoopResetEnv,
    PolicyAgeFilter,
    SuccessReward,
    TargetReturn,
    TerminateTransform,
    VecGymEnvTransform,
    gSDENoise,
)

from test.envs.transforms._group_env import AgentsEnv
from test.envs.transforms.contract import GroupContract

OBS, REW, ACT = ("agents", "observation"), ("agents", "reward"), ("agents", "action")
RECEIVED = ("agents", "received")


class RecordingAgentsEnv(AgentsEnv):
    """``AgentsEnv`` whose per-agent action is ``"box"`` (1,), ``"matrix"`` (2, 2) or ``"onehot"`` (4,), and
    which writes the action each agent received at ``("agents", "received")`` (the one-hot as its index). The
    one-hot variant also writes ``("agents", "action_mask")``: agent ``j`` may not take action ``j``.
    Also: ``("agents", "success")`` (``x > 0.5``), the root step ``"count"`` of the episode, ``lives()``
    (``3 - count // 2``), and a ``"_step"`` mask is honoured (rows outside it keep their state).
    ``stagger=True``: row ``i`` of a batch is done after ``2 + i`` steps (partial resets).
    ``autoreset="auto"``: done rows restart inside the step (the output is the next episode's start) and a
    masked reset is a no-op; ``"vec"``: the same, with the last observations under ``"final"`` (a gym
    vector env)."""

    def __init__(self, batch_size=(), *, action="box", stagger=False, autoreset=None, seed=0):
        super().__init__(batch_size=batch_size, seed=seed)
        group = (*self.batch_size, self.n_agents)
        self.kind, self.autoreset = action, autoreset
        if action == "box":
            leaf, rec = Bounded(-1.0, 1.0, shape=(*group, 1)), Unbounded(shape=(*group, 1))
        elif action == "matrix":
            leaf, rec = Bounded(-1.0, 1.0, shape=(*group, 2, 2)), Unbounded(shape=(*group, 2, 2))
        else:
            leaf, rec = OneHot(4, shape=(*group, 4)), Unbounded(shape=(*group, 1))
        self.full_action_spec = Composite(agents=Composite(action=leaf, shape=group), shape=self.batch_size)
        obs = self.observation_spec.clone()
        obs["agents", "received"] = rec
        obs["agents", "success"] = Binary(1, shape=(*group, 1), dtype=torch.bool)
        obs["count"] = Unbounded(shape=(*self.batch_size, 1), dtype=torch.int64)
        if autoreset == "vec":
            obs["final"] = obs.clone()
        if action == "onehot":
            obs["agents", "action_mask"] = Binary(4, shape=(*group, 4), dtype=torch.bool)
        self.observation_spec = obs
        limits = (2 + torch.arange(self.batch_size.numel())) if stagger else torch.full((self.batch_size.numel(),), 4)
        self._limits = limits.reshape(self._count.shape)

    def lives(self):
        return (3 - self._count.squeeze(-1) // 2).clamp_min(0)

    def _extras(self, out, received):
        group = (*self.batch_size, self.n_agents)
        out.set(RECEIVED, received)
        out.set(("agents", "success"), self._x > 0.5)
        out.set("count", self._count.clone())
        if self.kind == "onehot":
            out.set(("agents", "action_mask"), ~torch.eye(self.n_agents, 4, dtype=torch.bool).expand(*group, 4))
        return out

    def _reset(self, tensordict, **kwargs):
        if self.autoreset and tensordict is not None and "_reset" in tensordict.keys():
            out = self._obs()  # the rows restarted inside the step already
            out.set("done", torch.zeros(*self.batch_size, 1, dtype=torch.bool))
            out.set("terminated", torch.zeros(*self.batch_size, 1, dtype=torch.bool))
        else:
            out = super()._reset(tensordict, **kwargs)
        out = self._extras(out, torch.zeros(self.observation_spec[RECEIVED].shape))
        if self.autoreset == "vec":
            out.set("final", out.clone())
        return out

    def _step(self, tensordict):
        action = tensordict.get(ACT)
        group = (*self.batch_size, self.n_agents)
        if self.kind == "onehot":
            received = action.long().argmax(-1, keepdim=True).float()
            move = (received - 1.5) * 0.25
        else:
            received = action.clone()
            move = action.reshape(*group, -1).mean(-1, keepdim=True)
        x, count = self._x, self._count
        out = super()._step(tensordict.clone(False).set(ACT, move))
        stepping = tensordict.get("_step", None)
        if stepping is not None:  # skipped rows keep their state
            rows = stepping.reshape(self._count.shape)
            self._x = torch.where(rows.unsqueeze(-1), self._x, x)
            self._count = torch.where(rows, self._count, count)
            out = self._obs().set(("agents", "reward"), -(self._x * self._x) * rows.unsqueeze(-1))  # zero if skipped
        done = self._count >= self._limits
        out.set("done", done)
        out.set("terminated", done.clone())
        if self.autoreset and done.any():
            if self.autoreset == "vec":  # every observation of the episode's last step
                out.set("final", self._extras(self._obs(), received).exclude(("agents", "action_mask")))
            fresh = torch.rand(self._x.shape, generator=self._gen) * 2 - 1
            self._x = torch.where(done.unsqueeze(-1), fresh, self._x)
            self._count = torch.where(done, 0, self._count)
            restarted = self._obs()
            out.update(restarted)
        out = self._extras(out, received)
        if self.autoreset == "vec" and "final" not in out.keys():
            out.set("final", out.clone())
        return out


def make_env(batch_size=(), **kwargs):
    return RecordingAgentsEnv(batch_size=batch_size, **kwargs)


class RecordingGroupContract(GroupContract):
    """``GroupContract`` on ``RecordingAgentsEnv`` (``env_kwargs``) instead of ``AgentsEnv``."""

    env_kwargs: dict = {}

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_env(self, batch_size):
        env = TransformedEnv(make_env(batch_size, **self.env_kwargs), self.make_group_transform())
        check_env_specs(env, seed=0)
        data = env.rollout(4, break_when_any_done=False)
        assert data.batch_size == (*batch_size, 4)
        assert data.get("agents").batch_size == (*batch_size, 4, 3)
        self.check_group(data)

    def test_group_serial_env(self):
        env = TransformedEnv(SerialEnv(2, lambda: make_env(**self.env_kwargs)), self.make_group_transform())
        try:
            check_env_specs(env, seed=0)
            self.check_group(env.rollout(4, break_when_any_done=False))
        finally:
            env.close(raise_if_closed=False)


# ---------------------------------------------------------------------------------------------- actions
class TestActionScalingGroup(RecordingGroupContract):
    def make_group_transform(self):
        return ActionScaling(in_keys_inv=[ACT], loc=0.5, scale=2.0)

    def check_group(self, data):
        action = data[ACT]
        assert action.shape[-2:] == (3, 1)
        assert (action >= -0.75).all() and (action <= 0.25).all()  # [-1, 1] mapped back: (a - 0.5) / 2
        torch.testing.assert_close(data["next", *RECEIVED], action * 2.0 + 0.5)

    def test_spec(self):
        spec = TransformedEnv(make_env((2,)), self.make_group_transform()).full_action_spec[ACT]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 1)
        torch.testing.assert_close(spec.space.low, torch.full((2, 3, 1), -0.75))
        torch.testing.assert_close(spec.space.high, torch.full((2, 3, 1), 0.25))


    def test_per_agent_bounds(self):
        # loc/scale derived from a spec whose bounds differ per agent: [-1, 1], [-2, 2], [-3, 3]
        base = make_env((2,))
        high = torch.tensor([1.0, 2.0, 3.0]).reshape(3, 1).expand(2, 3, 1)
        base.full_action_spec = Composite(agents=Composite(action=Bounded(-high, high, shape=(2, 3, 1)), shape=(2, 3)), shape=(2,))
        env = TransformedEnv(base, ActionScaling(in_keys_inv=[ACT]))
        check_env_specs(env, seed=0)
        assert (env.full_action_spec[ACT].space.high == 1).all()
        out = env.step(env.reset().set(ACT, torch.full((2, 3, 1), 0.5)))
        assert out["next", *RECEIVED][0].flatten().tolist() == [0.5, 1.0, 1.5]  # as TorchRL 0.14.1


class TestActionDiscretizerGroup(RecordingGroupContract):
    def make_group_transform(self):
        return ActionDiscretizer(5, action_key=ACT)

    def check_group(self, data):
        index = data[ACT]
        assert index.shape[-2:] == (3, 1) and index.dtype == torch.int64
        # MEDIAN: interval k of 5 over [-1, 1] -> -1 + 0.4 * (k + 0.5)
        torch.testing.assert_close(data["next", *RECEIVED], -1 + 0.4 * (index.float() + 0.5))

    def test_spec(self):
        spec = TransformedEnv(make_env((2,)), self.make_group_transform()).full_action_spec[ACT]
        # as TorchRL 0.14.1: a MultiCategorical of 5 per agent and action element
        assert isinstance(spec, MultiCategorical) and spec.shape == (2, 3, 1)
        assert torch.equal(spec.nvec, torch.full((2, 3, 1), 5))

    def test_inverse_matches_torchrl(self):
        env = TransformedEnv(make_env((2,)), self.make_group_transform())
        td = env.reset().set(ACT, torch.tensor([0, 1, 4]).reshape(1, 3, 1).expand(2, 3, 1))
        # TorchRL 0.14.1 on the same input: [-0.8, -0.4, 0.8] per row
        torch.testing.assert_close(env.transform.inv(td)[ACT][0].flatten(), torch.tensor([-0.8, -0.4, 0.8]))


class TestActionDiscretizerOneHotGroup(RecordingGroupContract):
    def make_group_transform(self):
        return ActionDiscretizer(5, action_key=ACT, categorical=False)

    def check_group(self, data):
        action = data[ACT]
        assert action.shape[-2:] == (3, 5) and (action.sum(-1) == 1).all()
        index = action.long().argmax(-1, keepdim=True)
        torch.testing.assert_close(data["next", *RECEIVED], -1 + 0.4 * (index.float() + 0.5))

    def test_matches_torchrl(self):
        env = TransformedEnv(make_env((2,)), self.make_group_transform())
        spec = env.full_action_spec[ACT]
        assert type(spec).__name__ == "MultiOneHot" and spec.shape == (2, 3, 5)  # as TorchRL 0.14.1
        one_hot = torch.nn.functional.one_hot(torch.tensor([0, 2, 4]), 5).bool().reshape(1, 3, 5).expand(2, 3, 5)
        out = env.transform.inv(env.reset().set(ACT, one_hot))[ACT]
        torch.testing.assert_close(out[0].flatten(), torch.tensor([-0.8, 0.0, 0.8]))  # TorchRL's numbers


class TestFlattenActionGroup(RecordingGroupContract):
    env_kwargs = {"action": "matrix"}

    def make_group_transform(self):
        return FlattenAction(-2, -1, in_keys_inv=[ACT])

    def check_group(self, data):
        flat = data[ACT]
        assert flat.shape[-2:] == (3, 4)  # per agent, the (2, 2) action flattened
        torch.testing.assert_close(data["next", *RECEIVED], flat.unflatten(-1, (2, 2)))

    def test_spec(self):
        spec = TransformedEnv(make_env((2,), action="matrix"), self.make_group_transform()).full_action_spec[ACT]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 4)


class TestMeanActionSelectorGroup(RecordingGroupContract):
    def make_group_transform(self):
        return MeanActionSelector(observation_key=OBS, action_key=ACT)

    def check_group(self, data):
        belief = data["next", *OBS]
        assert belief.batch_size[-1] == 3  # one belief per agent
        mean, var = belief["mean"], belief["var"]
        assert mean.shape[-2:] == (3, 3) and var.shape[-3:] == (3, 3, 3) and not var.any()
        # the mean is the agent's observation tanh(x): its atanh, averaged over agents, is the root's mean x
        x = mean[..., 0].atanh().mean(-1, keepdim=True)
        torch.testing.assert_close(x, data["next", "observation"][..., :1], atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(data["next", *RECEIVED], data[ACT])  # flat random actions pass through

    def test_inverse_takes_the_mean(self):
        env = TransformedEnv(make_env((2,)), self.make_group_transform())
        td = env.reset()
        mean = torch.tensor([-0.5, 0.0, 0.5]).reshape(1, 3, 1).expand(2, 3, 1)
        # the sub-tensordict carries the action's full shape (EnvBase.step checks it before the inverse runs)
        td.set(ACT, TensorDict(mean=mean, batch_size=(2, 3, 1)))
        out = env.step(td)
        torch.testing.assert_close(out["next", *RECEIVED], mean)

    def test_spec(self):
        spec = TransformedEnv(make_env((2,)), self.make_group_transform()).observation_spec[OBS]
        assert isinstance(spec, Composite) and spec.shape == (2, 3)
        assert spec["mean"].shape == (2, 3, 3) and spec["var"].shape == (2, 3, 3, 3)


class TestDiscreteActionProjectionGroup(RecordingGroupContract):
    env_kwargs = {"action": "onehot"}

    def make_group_transform(self):
        return DiscreteActionProjection(4, 6, action_key=ACT)

    def check_group(self, data):
        action = data[ACT]
        assert action.shape[-2:] == (3, 6) and (action.sum(-1) == 1).all()
        index, received = action.long().argmax(-1, keepdim=True), data["next", *RECEIVED]
        valid = index < 4
        torch.testing.assert_close(received[valid], index[valid].float())  # valid indices go through
        assert ((received >= 0) & (received < 4)).all()  # the others become some valid index

    def test_inverse_per_agent(self):
        t = TransformedEnv(make_env((2,), action="onehot"), self.make_group_transform()).transform
        index = torch.tensor([[0, 5, 3], [4, 1, 2]])
        td = TensorDict(agents=TensorDict(action=torch.nn.functional.one_hot(index, 6), batch_size=(2, 3)), batch_size=(2,))
        out = t.inv(td)[ACT]
        assert out.shape == (2, 3, 4)
        got = out.long().argmax(-1)
        assert got[0, 0] == 0 and got[0, 2] == 3 and got[1, 1] == 1 and got[1, 2] == 2
        assert (got < 4).all()

    def test_spec(self):
        spec = TransformedEnv(make_env((2,), action="onehot"), self.make_group_transform()).full_action_spec[ACT]
        assert isinstance(spec, OneHot) and spec.shape == (2, 3, 6)

    def test_forward_pads_per_agent(self):
        index = torch.tensor([[1, 3, 0]])
        td = TensorDict(agents=TensorDict(action=torch.nn.functional.one_hot(index, 4), batch_size=(1, 3)), batch_size=(1,))
        out = self.make_group_transform()(td)[ACT]
        assert out.shape == (1, 3, 6) and out.argmax(-1).tolist() == [[1, 3, 0]]  # as TorchRL 0.14.1


class TestActionMaskGroup(RecordingGroupContract):
    """(TorchRL 0.14.1 on the same env: no agent ever takes its masked action either.)"""

    env_kwargs = {"action": "onehot"}

    def make_group_transform(self):
        return ActionMask(action_key=ACT, mask_key=("agents", "action_mask"))

    def check_group(self, data):
        action = data[ACT]
        assert action.shape[-2:] == (3, 4)
        for agent in range(3):  # agent j may not take action j: the masked spec never draws it
            assert not action[..., agent, agent].any(), f"agent {agent} took its masked action"
        torch.testing.assert_close(data["next", *RECEIVED], action.long().argmax(-1, keepdim=True).float())

    def test_mask_is_per_agent(self):
        env = TransformedEnv(make_env((2,), action="onehot"), self.make_group_transform())
        env.reset()
        mask = env.full_action_spec[ACT].mask
        assert mask.shape == (2, 3, 4)
        assert torch.equal(mask[1], ~torch.eye(3, 4, dtype=torch.bool))
        draws = torch.stack([env.full_action_spec[ACT].rand() for _ in range(50)])
        assert not (draws.long().argmax(-1) == torch.arange(3)).any()


# ------------------------------------------------------------------------------------------- rewards
class TestTargetReturnGroup(RecordingGroupContract):
    def make_group_transform(self):
        return TargetReturn(10.0, in_keys=[REW], out_keys=[("agents", "target_return")])

    def check_group(self, data):
        target, reward = data["next", "agents", "target_return"], data["next", *REW]
        assert target.shape == reward.shape  # one target per agent
        # 4-step episodes: a running subtraction over time, per agent
        torch.testing.assert_close(target, 10.0 - reward.cumsum(-3))
        torch.testing.assert_close(data["agents", "target_return"][..., 0, :, :], torch.full_like(target[..., 0, :, :], 10.0))


class TestTargetReturnConstantGroup(RecordingGroupContract):
    def make_group_transform(self):
        return TargetReturn(10.0, mode="constant", in_keys=[REW], out_keys=[("agents", "target_return")])

    def check_group(self, data):
        target = data["next", "agents", "target_return"]
        assert target.shape[-2:] == (3, 1)
        torch.testing.assert_close(target, torch.full_like(target, 10.0))


class TestSuccessRewardGroup(RecordingGroupContract):
    def make_group_transform(self):
        return SuccessReward(("agents", "success"), REW, scale=2.0)

    def check_group(self, data):
        success, reward = data["next", "agents", "success"], data["next", *REW]
        assert reward.shape[-2:] == (3, 1)
        torch.testing.assert_close(reward, torch.where(success, 2.0, 0.0))

    def test_spec(self):
        spec = TransformedEnv(make_env((2,)), self.make_group_transform()).full_reward_spec[REW]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 1)
        assert spec.space.low.max() == 0.0 and spec.space.high.min() == 2.0


class TestMultiActionGroup:
    """A sequence of group actions would need a stacking dim inside the group ``(*batch, 3)``: refused when
    the env is built (TorchRL 0.14.1 fails there too, with a spec shape mismatch)."""

    @pytest.mark.parametrize("action_key", [ACT, None])
    def test_group_action_refused(self, action_key):
        with pytest.raises(ValueError, match=r"MultiAction: action \('agents', 'action'\) lies in the group \('agents',\)"):
            TransformedEnv(make_env((2,)), MultiAction(action_key=action_key, stack_rewards=False))

    def test_group_reward_refused(self):
        # per-agent rewards cannot be stacked either (refused first: output specs are built before inputs)
        with pytest.raises(ValueError, match=r"reward \('agents', 'reward'\).*stack_rewards=False"):
            TransformedEnv(make_env((2,)), MultiAction(action_key=ACT))
        with pytest.raises(ValueError, match=r"observation \('agents', 'observation'\).*stack_observations=False"):
            MultiAction(stack_observations=True, stack_rewards=False).transform_output_spec(make_env().output_spec.clone())


# ------------------------------------------------------------------------------- env level (root keys)
class TestGSDENoiseGroup(RecordingGroupContract):
    """Root-level: the primer is expanded to the env's batch (TorchRL 0.14.1 asks for expand_specs on a
    batched env)."""

    def make_group_transform(self):
        return gSDENoise(state_dim=3, action_dim=1)

    def check_group(self, data):
        eps = data["_eps_gSDE"]
        assert eps.shape[-2:] == (1, 3) and eps.shape[:-2] == data.batch_size
        torch.testing.assert_close(eps, eps[..., :1, :, :].expand_as(eps))  # one matrix per 4-step episode
        torch.testing.assert_close(data["next", *RECEIVED], data[ACT])  # the group is untouched


# ----------------------------------------------------------------------- reset-driven, on partial resets
def staggered_rollout(transform, steps=6, policy=None, **kwargs):
    """A rollout of a batch of 2 group envs whose rows finish after 2 and 3 steps (partial resets)."""
    env = TransformedEnv(make_env((2,), stagger=True, **kwargs), transform)
    check_env_specs(env, seed=0)
    env.set_seed(0)
    torch.manual_seed(0)
    data = env.rollout(steps, policy, break_when_any_done=False)
    assert data.batch_size == (2, steps) and data.get("agents").batch_size == (2, steps, 3)
    assert data.get(("next", "agents")).batch_size == (2, steps, 3)
    return data


def assert_moves(data):
    """Each agent's next position is its position plus the action it received (clamped), row by row."""
    x, nx = data[OBS][..., 0].atanh(), data["next", *OBS][..., 0].atanh()
    torch.testing.assert_close(nx, (x + data["next", *RECEIVED][..., 0]).clamp(-3, 3), atol=2e-3, rtol=1e-3)


class TestTargetReturnPartialResets:
    def test_targets_restart_per_row(self):
        # (TorchRL 0.14.1 fails here: its root reset mask (2, 1) is not broadcast over the agent dim)
        data = staggered_rollout(TargetReturn(10.0, in_keys=[REW], out_keys=[("agents", "target_return")]))
        reward, target = data["next", *REW], data["next", "agents", "target_return"]
        count = data["next", "count"]  # 1, 2, 1, 2, ... for row 0; 1, 2, 3, 1, ... for row 1
        assert count[:, :, 0].tolist() == [[1, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]
        expected = torch.empty_like(target)
        for row in range(2):
            left = torch.full((3, 1), 10.0)
            for t in range(6):
                if count[row, t, 0] == 1:
                    left = torch.full((3, 1), 10.0)  # the row was reset: every agent starts again
                left = left - reward[row, t]
                expected[row, t] = left
        torch.testing.assert_close(target, expected)


class TestTerminateGroup(RecordingGroupContract):
    def make_group_transform(self):
        # stop when any agent is at x > 0.5 (per row: reduced over the agent dim)
        return TerminateTransform(lambda td: td["agents", "success"].any(-2))

    def check_group(self, data):
        stop = data["next", "agents", "success"].any(-2)
        env_done = data["next", "count"] >= 4
        assert torch.equal(data["next", "terminated"], stop | env_done)
        assert torch.equal(data["next", "done"], stop | env_done)

    def test_partial_resets(self):
        data = staggered_rollout(self.make_group_transform(), steps=8)
        stop = data["next", "agents", "success"].any(-2)
        env_done = data["next", "count"] >= torch.tensor([2, 3]).reshape(2, 1, 1)
        done = stop | env_done
        assert torch.equal(data["next", "done"], done)
        # a terminated row restarts (count 0), the other goes on
        assert torch.equal(data["count"][:, 1:], torch.where(done[:, :-1], 0, data["next", "count"][:, :-1]))
        assert_moves(data)


class TestConditionalSkipGroup(RecordingGroupContract):
    def make_group_transform(self):
        return ConditionalSkip(lambda td: td[ACT][..., 0, 0] > 0.3)  # agent 0's action decides, per row

    def check_group(self, data, skip=None):
        skip = data[ACT][..., 0, 0] > 0.3 if skip is None else skip
        obs, nobs = data[OBS], data["next", *OBS]
        assert torch.equal(nobs[skip], obs[skip])  # skipped rows: the group repeats its input
        assert not data["next", *REW][skip].any()  # with zero rewards
        assert torch.equal(data["next", "count"][skip], data["count"][skip])
        assert torch.equal(data["next", "count"][~skip], data["count"][~skip] + 1)

    def test_group_serial_env(self):
        # every row skips or steps together (row 0's agent 0 decides): see the partial case below
        cond = lambda td: (td[ACT][:1, 0, 0] > 0.3).expand(td.batch_size)  # noqa: E731
        env = TransformedEnv(SerialEnv(2, make_env), ConditionalSkip(cond))
        try:
            check_env_specs(env, seed=0)
            torch.manual_seed(1)
            data = env.rollout(4, break_when_any_done=False)
            assert data.get("agents").batch_size == (2, 4, 3)
            skip = (data[ACT][:1, :, 0, 0] > 0.3).expand(2, 4)
            self.check_group(data, skip)
            assert skip.any() and not skip.all()  # some steps were skipped
        finally:
            env.close(raise_if_closed=False)

    @pytest.mark.parametrize("batched", ["serial", "parallel", "parallel-unbuffered"])
    def test_batched_env_partial_skip(self, batched):
        # SerialEnv and ParallelEnv step only the sub-envs the "_step" mask selects
        if batched == "serial":
            make = SerialEnv
        else:
            buffers = batched == "parallel"
            make = lambda n, fn: ParallelEnv(n, fn, mp_start_method="fork", use_buffers=buffers)  # noqa: E731
        env = TransformedEnv(make(2, make_env), self.make_group_transform())
        try:
            env.set_seed(0)
            torch.manual_seed(1)
            data = env.rollout(4, break_when_any_done=False)
            # TorchRL 0.14.1, same env and seed: row 0 skips steps 0, 2 and 3, row 1 only step 0
            assert data["next", "count"].squeeze(-1).tolist() == [[0, 1, 1, 1], [0, 1, 2, 3]]
        finally:
            env.close(raise_if_closed=False)

    def test_matches_torchrl(self):
        env = TransformedEnv(make_env((2,)), self.make_group_transform())
        torch.manual_seed(1)
        data = env.rollout(4, break_when_any_done=False)
        # TorchRL 0.14.1, same env and seed: the steps taken per row
        assert data["count"].squeeze(-1).tolist() == [[0, 0, 1, 1], [0, 0, 1, 2]]
        assert data["next", "count"].squeeze(-1).tolist() == [[0, 1, 1, 1], [0, 1, 2, 3]]
        self.check_group(data)

    def test_partial_resets(self):
        data = staggered_rollout(self.make_group_transform(), steps=8)
        self.check_group(data)
        done = data["next", "done"]
        assert done.any() and not done.all()
        assert torch.equal(data["count"][:, 1:], torch.where(done[:, :-1], 0, data["next", "count"][:, :-1]))


class TestNoopResetGroup(RecordingGroupContract):
    def make_group_transform(self):
        return NoopResetEnv(1, random=False)

    def check_group(self, data):
        count = data["count"][..., 0, 0]
        assert (count == 1).all()  # the reset played one no-op step

    def test_batched_full_resets(self):
        env = TransformedEnv(make_env((2,)), NoopResetEnv(2, random=False))
        td = env.reset()
        assert td["count"].flatten().tolist() == [2, 2] and td["agents"].batch_size == (2, 3)
        received = td[RECEIVED]  # the last no-op: a random action per agent (as TorchRL's rand_step)
        assert received.shape == (2, 3, 1) and received.abs().max() <= 1 and received.any()

    def test_partial_resets_refused(self):
        # the no-op steps of a partial reset would also step the rows that are not reset (TorchRL refuses
        # NoopResetEnv on any batched env, with a ValueError at reset)
        with pytest.raises(RuntimeError, match=r"NoopResetEnv: partial reset of a batch-locked env \(RecordingAgentsEnv"):
            staggered_rollout(NoopResetEnv(1, random=False), steps=8)


class TestEndOfLifeGroup(RecordingGroupContract):
    def make_group_transform(self):
        return EndOfLifeTransform(eol_attribute="lives")

    def check_group(self, data):
        lives = data["next", "lives"]
        count = data["next", "count"].squeeze(-1)
        assert torch.equal(lives, 3 - count // 2)
        # a life is lost on every even count (3 - count // 2 drops), and the episode end counts too
        assert torch.equal(data["next", "end-of-life"].squeeze(-1), (count % 2 == 0) | data["next", "done"].squeeze(-1))
        assert data["next", "end-of-life"].shape == data["next", "done"].shape  # root flag, no agent dim

    def test_partial_resets(self):
        data = staggered_rollout(self.make_group_transform(), steps=6)
        count, done = data["next", "count"].squeeze(-1), data["next", "done"].squeeze(-1)
        # TorchRL 0.14.1 on the same env: these counts and flags
        assert count.tolist() == [[1, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]
        f, t = False, True
        assert data["next", "end-of-life"].squeeze(-1).tolist() == [[f, t, f, t, f, t], [f, t, t, f, t, t]]
        assert torch.equal(data["next", "lives"], 3 - count // 2)
        assert torch.equal(data["next", "end-of-life"].squeeze(-1), (count % 2 == 0) | done)
        assert torch.equal(data["lives"], 3 - data["count"].squeeze(-1) // 2)  # reset rows start again at 3


class TestAutoResetGroup:
    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_auto_reset(self, batch_size):
        # a 0 fill for floats (NaN is outside the Bounded observation spec that check_env_specs checks)
        env = AutoResetEnv(make_env(batch_size, stagger=bool(batch_size), autoreset="auto"), AutoResetTransform(fill_float=0.0))
        check_env_specs(env, seed=0)
        torch.manual_seed(0)
        data = env.rollout(8, break_when_any_done=False)
        assert data.get("agents").batch_size == (*batch_size, 8, 3)
        done = data["next", "done"].squeeze(-1)
        assert done.any() and not done.all()
        # done steps: the env's outputs belong to the next episode, so the transform fills them, per agent
        assert not data["next", *OBS][done].any() and (data["next", "count"][done] == -1).all()
        assert not data["next", "agents", "success"][done].any()
        # the next step starts from the stored first observation of the new episode
        after = torch.cat([torch.zeros_like(done[..., :1]), done[..., :-1]], -1)
        assert (data["count"][after] == 0).all() and data[OBS][after].isfinite().all()
        live = ~done
        x, nx = data[OBS][..., 0].atanh(), data["next", *OBS][..., 0].atanh()
        moved = (x + data["next", *RECEIVED][..., 0]).clamp(-3, 3)
        torch.testing.assert_close(nx[live], moved[live], atol=2e-3, rtol=1e-3)


class TestVecGymGroup:
    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_final_observations(self, batch_size):
        env = TransformedEnv(make_env(batch_size, stagger=bool(batch_size), autoreset="vec"), VecGymEnvTransform())
        assert "final" not in env.observation_spec.keys()
        check_env_specs(env, seed=0)
        torch.manual_seed(0)
        data = env.rollout(8, break_when_any_done=False)
        assert "final" not in data["next"].keys() and data.get("agents").batch_size == (*batch_size, 8, 3)
        done = data["next", "done"].squeeze(-1)
        assert done.any() and not done.all()
        # every step, done ones included, ends where the agents moved: the final observations are put back
        assert_moves(data)
        assert (data["next", "count"][done] == data["count"][done] + 1).all()
        # and the next episode starts from the observations the env returned at the done step
        after = torch.cat([torch.zeros_like(done[..., :1]), done[..., :-1]], -1)
        assert (data["count"][after] == 0).all()


class TestFrameSkipGroup(RecordingGroupContract):
    def make_group_transform(self):
        return FrameSkipTransform(2)

    def check_group(self, data):
        count = data["next", "count"]
        assert ((count == 2) | (count == 4)).all()  # two env steps per step
        torch.testing.assert_close(data["next", *RECEIVED], data[ACT])  # the same action repeated
        x0 = data[OBS][..., 0:1].atanh()
        x1 = (x0 + data[ACT]).clamp(-3, 3)
        x2 = (x1 + data[ACT]).clamp(-3, 3)
        torch.testing.assert_close(data["next", *REW], -(x1 * x1) - (x2 * x2), atol=2e-2, rtol=1e-2)  # summed per agent

    def test_partial_resets(self):
        data = staggered_rollout(FrameSkipTransform(2), steps=5)
        done = data["next", "done"]
        assert torch.equal(data["count"][:, 1:], torch.where(done[:, :-1], 0, data["next", "count"][:, :-1]))
        # the repeats stop as soon as any row is done (documented; TorchRL 0.14.1 steps every row twice, done
        # or not: next counts [[2, 2, 2, 2, 2], [2, 4, 2, 4, 2]])
        assert data["next", "count"].squeeze(-1).tolist() == [[2, 1, 2, 2, 2], [2, 3, 1, 3, 2]]
        assert data.get(("next", "agents")).batch_size == (2, 5, 3)


class TestConditionalPolicySwitchGroup(RecordingGroupContract):
    def make_group_transform(self):
        # the opponent (zero actions for every agent) plays whenever the step count is odd
        opponent = lambda td: td.set(ACT, torch.zeros(td.get(ACT).shape))  # noqa: E731
        return ConditionalPolicySwitch(policy=opponent, condition=lambda td: td["count"] % 2 == 1)

    def check_group(self, data):
        count = data["next", "count"].squeeze(-1)
        assert (count == torch.tensor([2, 4, 2, 4])).all()  # each outer step: our move, then the opponent's
        assert not data["next", *RECEIVED].any()  # the last action the agents received: the opponent's
        x, nx = data[OBS][..., 0].atanh(), data["next", *OBS][..., 0].atanh()
        torch.testing.assert_close(nx, (x + data[ACT][..., 0]).clamp(-3, 3), atol=2e-3, rtol=1e-3)


    def test_rows_that_differ_refused(self):
        # staggered rows: the opponent's turn comes on some rows only; a batch-locked env cannot step those
        # alone (TorchRL 0.14.1: RuntimeError "Cannot run partial steps in a batched locked environment")
        opponent = lambda td: td.set(ACT, torch.zeros(td.get(ACT).shape))  # noqa: E731
        t = ConditionalPolicySwitch(policy=opponent, condition=lambda td: td["count"] % 2 == 1)
        env = TransformedEnv(make_env((2,), stagger=True), t)
        with pytest.raises(RuntimeError, match="ConditionalPolicySwitch: the condition selects only some rows.*batch-locked"):
            env.rollout(6, break_when_any_done=False)


class TestPolicyAgeFilterGroup(RecordingGroupContract):
    def make_group_transform(self):
        return PolicyAgeFilter(5, 1, policy_version_key=("agents", "policy_version"))

    def check_group(self, data):
        assert "policy_version" not in data["agents"].keys()  # a no-op in an env
        assert_moves(data)

    def test_filters_group_data(self):
        data = make_env((2,)).rollout(4, break_when_any_done=False)
        version = torch.full((2, 4, 3), 5)
        version[1, 2, 1] = 3  # one agent of row 1 acted with a policy 2 versions old
        data.set(("agents", "policy_version"), version)
        kept = self.make_group_transform()(data.clone())
        assert kept.batch_size == (1, 4) and kept.get("agents").batch_size == (1, 4, 3)
        assert torch.equal(kept[OBS], data[OBS][:1])
        assert self.make_group_transform().inv(data.clone()).batch_size == (1, 4)  # on extend too


class TestActionChunkGroup(RecordingGroupContract):
    def make_group_transform(self):
        return ActionChunkTransform(2, action_key=ACT, chunk_key=("agents", "chunk"), pad_key=("agents", "pad"))

    def check_group(self, data):
        assert "chunk" not in data["agents"].keys()  # appended to an env it changes nothing
        assert_moves(data)

    @pytest.mark.parametrize("time_dim", [-3, -2])
    def test_group_actions_refused(self, time_dim):
        # a group action (..., T, n_agents, 1) has the agent dim between time and action: refused as TorchRL
        data = make_env((2,)).rollout(4, break_when_any_done=False)
        t = ActionChunkTransform(2, action_key=ACT, chunk_key=("agents", "chunk"), pad_key=("agents", "pad"),
                                 time_dim=time_dim, done_key=None)
        if time_dim == -3:
            with pytest.raises(ValueError, match=r"action dim to follow the time dim.*\('agents', 'action'\) of shape \(2, 4, 3, 1\)"):
                t(data)
        else:  # time_dim=-2 is the agent dim: chunks would run over agents, not time
            out = t(data)
            assert out["agents", "chunk"].shape == (2, 4, 3, 2, 1)


# ------------------------------------------------------------------------------ per-agent done flags
class PerAgentDoneEnv(RecordingAgentsEnv):
    """``RecordingAgentsEnv`` with done flags per agent too (``("agents", "done")``, all agents of a row
    together): resets come with an ``("agents", "_reset")`` mask of shape ``(*batch, 3, 1)``."""

    def __init__(self, batch_size=(), **kwargs):
        super().__init__(batch_size, **kwargs)
        group = (*self.batch_size, self.n_agents)
        flag = lambda shape: Categorical(2, shape=shape, dtype=torch.bool)  # noqa: E731
        self.full_done_spec = Composite(
            done=flag((*self.batch_size, 1)), terminated=flag((*self.batch_size, 1)),
            agents=Composite(done=flag((*group, 1)), terminated=flag((*group, 1)), shape=group), shape=self.batch_size,
        )

    def _with_agents(self, out):
        done = out.get("done").unsqueeze(-2).expand(*self.batch_size, self.n_agents, 1)
        return out.set(("agents", "done"), done.clone()).set(("agents", "terminated"), done.clone())

    def _reset(self, tensordict, **kwargs):
        if tensordict is not None and ("agents", "_reset") in tensordict.keys(True):
            tensordict = tensordict.clone(False).set("_reset", tensordict.get(("agents", "_reset")).any(-2))
        return self._with_agents(super()._reset(tensordict, **kwargs))

    def _step(self, tensordict):
        return self._with_agents(super()._step(tensordict))


def per_agent_done_rollout(transform, steps=6):
    env = TransformedEnv(PerAgentDoneEnv((2,), stagger=True), transform)
    check_env_specs(env, seed=0)
    torch.manual_seed(0)
    data = env.rollout(steps, break_when_any_done=False)
    assert data.get("agents").batch_size == (2, steps, 3) and data.get(("next", "agents")).batch_size == (2, steps, 3)
    return data


class TestPerAgentDones:
    def test_target_return_restarts_on_the_agents_reset(self):
        # the rewards' done group is "agents": its ("agents", "_reset") (2, 3, 1) restarts the targets (TorchRL
        # asks for reset_key here: "Got more than one reset key")
        data = per_agent_done_rollout(TargetReturn(10.0, in_keys=[REW], out_keys=[("agents", "target_return")]))
        reward, target, count = data["next", *REW], data["next", "agents", "target_return"], data["next", "count"]
        for row in range(2):
            left = torch.full((3, 1), 10.0)
            for t in range(6):
                left = torch.full((3, 1), 10.0) if count[row, t, 0] == 1 else left
                left = left - reward[row, t]
                torch.testing.assert_close(target[row, t], left)

    def test_terminate_writes_every_agent(self):
        data = per_agent_done_rollout(TerminateTransform(lambda td: td["agents", "success"].any(-2)))
        stop = data["next", "agents", "success"].any(-2)
        done = stop | (data["next", "count"] >= torch.tensor([2, 3]).reshape(2, 1, 1))
        assert torch.equal(data["next", "done"], done)
        assert torch.equal(data["next", "agents", "done"], done.unsqueeze(-2).expand(2, 6, 3, 1))  # the agent dim
        assert torch.equal(data["count"][:, 1:], torch.where(done[:, :-1], 0, data["next", "count"][:, :-1]))

    def test_terminate_per_agent_flag_refused(self):
        # a per-agent flag cannot be OR-ed into the root done (TorchRL fails in expand)
        env = TransformedEnv(PerAgentDoneEnv((2,)), TerminateTransform(lambda td: td["agents", "success"]))
        with pytest.raises(RuntimeError, match=r"flag of shape \(2, 3, 1\).*done entry 'done' of shape \(2, 1\)"):
            env.rollout(2)

    def test_conditional_skip_repeats_agent_dones(self):
        data = per_agent_done_rollout(ConditionalSkip(lambda td: td[ACT][..., 0, 0] > 0.3))
        skip = data[ACT][..., 0, 0] > 0.3
        assert skip.any()
        assert torch.equal(data["next", "agents", "done"][skip], data["agents", "done"][skip])
        assert torch.equal(data["next", *OBS][skip], data[OBS][skip])

    def test_end_of_life_per_agent(self):
        data = per_agent_done_rollout(EndOfLifeTransform(eol_attribute="lives", done_key=("agents", "done")))
        eol, count = data["next", "end-of-life"], data["next", "count"]
        assert eol.shape == (2, 6, 3, 1)  # shaped like its done entry, as TorchRL
        lost = (count % 2 == 0).unsqueeze(-2)
        assert torch.equal(eol, lost.expand_as(eol) | data["next", "agents", "done"])
