"""Action, reward-signal and control-flow transforms on a multi-agent group (``GroupContract``).

Action transforms act through their inverse on ``("agents", "action")`` (agent dim kept); the env variants
below record the action each agent received, so the inverse is checked against the policy's action. The
reset-driven transforms run on a batched group env whose rows finish at different steps (partial resets).
"""
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Binary, Bounded, Composite, MultiCategorical, OneHot, Unbounded
from torchrl.envs import SerialEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import (
    ActionDiscretizer,
    ActionMask,
    ActionScaling,
    DiscreteActionProjection,
    FlattenAction,
    MeanActionSelector,
    MultiAction,
    SuccessReward,
    TargetReturn,
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
    The agents also report ``("agents", "success")`` (``x > 0.5``). ``stagger=True``: row ``i`` of a batch
    is done after ``2 + i`` steps (partial resets)."""

    def __init__(self, batch_size=(), *, action="box", stagger=False, seed=0):
        super().__init__(batch_size=batch_size, seed=seed)
        group = (*self.batch_size, self.n_agents)
        self.kind = action
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
        if action == "onehot":
            obs["agents", "action_mask"] = Binary(4, shape=(*group, 4), dtype=torch.bool)
        self.observation_spec = obs
        self._limits = (2 + torch.arange(self.batch_size.numel())).reshape(self._count.shape) if stagger else None

    def _extras(self, out, received):
        group = (*self.batch_size, self.n_agents)
        out.set(RECEIVED, received)
        out.set(("agents", "success"), self._x > 0.5)
        if self.kind == "onehot":
            out.set(("agents", "action_mask"), ~torch.eye(self.n_agents, 4, dtype=torch.bool).expand(*group, 4))
        return out

    def _reset(self, tensordict, **kwargs):
        out = super()._reset(tensordict, **kwargs)
        return self._extras(out, torch.zeros(self.observation_spec[RECEIVED].shape))

    def _step(self, tensordict):
        action = tensordict.get(ACT)
        group = (*self.batch_size, self.n_agents)
        if self.kind == "onehot":
            received = action.long().argmax(-1, keepdim=True).float()
            move = (received - 1.5) * 0.25
        else:
            received = action.clone()
            move = action.reshape(*group, -1).mean(-1, keepdim=True)
        out = super()._step(tensordict.clone(False).set(ACT, move))
        if self._limits is not None:
            done = self._count >= self._limits
            out.set("done", done)
            out.set("terminated", done.clone())
        return self._extras(out, received)


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


class TestActionMaskGroup(RecordingGroupContract):
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
    def make_group_transform(self):
        return gSDENoise(state_dim=3, action_dim=1)

    def check_group(self, data):
        eps = data["_eps_gSDE"]
        assert eps.shape[-2:] == (1, 3) and eps.shape[:-2] == data.batch_size
        torch.testing.assert_close(eps, eps[..., :1, :, :].expand_as(eps))  # one matrix per 4-step episode
        torch.testing.assert_close(data["next", *RECEIVED], data[ACT])  # the group is untouched
