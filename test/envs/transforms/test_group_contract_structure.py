"""Structural, key-editing and env-level transforms on a multi-agent group (``GroupContract``).

The env is ``AgentsEnv`` (group ``"agents"`` of batch ``(*batch, 3)``, per-agent observation (3,) ``=
tanh([x, 2x, 3x])``, action (1,), reward (1,) ``= -x^2``; root ``"observation"`` (2,) and root done flags)
and, where a transform needs other entries, small variants defined here.
"""
from __future__ import annotations

import functools

import pytest
import torch
from tensordict.nn import TensorDictModule

from test.envs.transforms._group_env import AgentsEnv
from test.envs.transforms._group_structure_envs import (
    AgentDoneEnv,
    EmptyInfoAgentsEnv,
    PixelAgentsEnv,
    SplitAgentsEnv,
    SplitDoneEnv,
)
from test.envs.transforms.contract import GroupContract
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv, check_env_specs
from torchrl.envs.transforms import (
    BatchSizeTransform,
    Compose,
    DeviceCastTransform,
    DTypeCastTransform,
    ExcludeTransform,
    FiniteTensorDictCheck,
    FlattenObservation,
    InitTracker,
    ModuleTransform,
    NextObservationDelta,
    NextStateReconstructor,
    PermuteTransform,
    PinMemoryTransform,
    RemoveEmptySpecs,
    RenameTransform,
    RNDTransform,
    SelectTransform,
    SqueezeTransform,
    Stack,
    TensorDictPrimer,
    Timer,
    TrajCounter,
)

OBS, REW, ACT = ("agents", "observation"), ("agents", "reward"), ("agents", "action")


def _group_untouched(data, obs_key=OBS):
    """The group keeps its agent dim and AgentsEnv's relations: obs = tanh([x, 2x, 3x]), reward = -x^2."""
    obs, rew = data[("next", *obs_key)], data[("next", *REW)]
    assert obs.shape[-2:] == (3, 3) and rew.shape[-2:] == (3, 1)
    x = torch.atanh(obs[..., :1].double().clamp(-0.999999, 0.999999))
    torch.testing.assert_close(rew.double(), -(x * x), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(obs[..., 1:2].double(), torch.tanh(2 * x), atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------------------------------------------
# key editing on the group
# --------------------------------------------------------------------------------------------------------
class TestDTypeCastGroup(GroupContract):
    def make_group_transform(self):
        return DTypeCastTransform(torch.float32, torch.float64, in_keys=[OBS], in_keys_inv=[ACT])

    def check_group(self, data):
        assert data[("next", *OBS)].dtype == torch.float64 and data[("next", *REW)].dtype == torch.float32
        assert data[ACT].dtype == torch.float64  # the policy sees (and writes) float64 actions
        _group_untouched(data)

    def test_group_specs(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert env.observation_spec[OBS].dtype == torch.float64
        assert env.full_action_spec[ACT].dtype == torch.float64 and env.full_action_spec[ACT].shape == (2, 3, 1)
        assert env.observation_spec["agents"].shape == (2, 3)


class TestSqueezeGroup(GroupContract):
    def make_group_transform(self):
        return SqueezeTransform(-1, in_keys=[REW], out_keys=[("agents", "flat_reward")])

    def check_group(self, data):
        flat = data["next", "agents", "flat_reward"]
        assert flat.shape == data[("next", *REW)].shape[:-1]  # (…, T, 3): one value per agent
        torch.testing.assert_close(flat, data[("next", *REW)][..., 0])

    def test_group_inverse_on_action(self):
        # squeezed outside: the policy writes one scalar per agent, the base env gets (…, 3, 1)
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), SqueezeTransform(-1, in_keys_inv=[ACT]))
        assert env.full_action_spec[ACT].shape == (2, 3)
        check_env_specs(env, seed=0)
        td = env.reset()
        td[ACT] = torch.full((2, 3), 0.5)
        out = env.step(td)
        assert out[ACT].shape == (2, 3)
        # x moved by +0.5 from its reset value for every agent
        x0 = torch.atanh(td[OBS][..., 0])
        torch.testing.assert_close(torch.atanh(out[("next", *OBS)][..., 0]), (x0 + 0.5).clamp(-3, 3), atol=1e-4, rtol=1e-4)


class TestExcludeGroup(GroupContract):
    def make_group_transform(self):
        return ExcludeTransform(OBS)  # a per-agent entry; the group keeps its reward and action

    def check_group(self, data):
        assert OBS not in data.keys(True) and ("next", *OBS) not in data.keys(True)
        assert data[("next", *REW)].shape[-2:] == (3, 1) and data["next", "observation"].shape[-1] == 2

    def test_group_spec_keeps_shape(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert OBS not in env.observation_spec.keys(True)
        assert env.full_reward_spec["agents"].shape == (2, 3) and env.full_action_spec["agents"].shape == (2, 3)

    def test_exclude_whole_group_output(self):
        # excluding the group key drops its outputs; the action (an input) stays, with its group shape
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), ExcludeTransform("agents"))
        check_env_specs(env, seed=0)
        assert "agents" not in env.observation_spec
        assert env.full_action_spec["agents"].shape == (2, 3)


class TestSelectGroup(GroupContract):
    def make_group_transform(self):
        return SelectTransform(OBS)  # root "observation" goes; dones, rewards and actions are kept

    def check_group(self, data):
        assert "observation" not in data["next"]
        assert set(data["next", "agents"].keys()) == {"observation", "reward"}
        _group_untouched(data)

    def test_group_spec_keeps_shape(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert list(env.observation_spec.keys(True, True)) == [OBS]
        assert env.observation_spec["agents"].shape == (2, 3) and env.observation_spec[OBS].shape == (2, 3, 3)


class TestRenameGroup(GroupContract):
    def make_group_transform(self):
        return RenameTransform(
            in_keys=[OBS, REW],
            out_keys=[("agents", "obs"), ("agents", "rew")],
            in_keys_inv=[ACT],
            out_keys_inv=[("agents", "act")],
        )

    def check_group(self, data):
        assert OBS not in data.keys(True) and ("next", *REW) not in data.keys(True)
        assert data["agents", "act"].shape[-2:] == (3, 1)
        obs, rew = data["next", "agents", "obs"], data["next", "agents", "rew"]
        x = torch.atanh(obs[..., :1])
        torch.testing.assert_close(rew, -(x * x), atol=1e-4, rtol=1e-4)

    def test_group_spec_keeps_shape(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert env.observation_spec["agents"].shape == (2, 3) and env.observation_spec["agents", "obs"].shape == (2, 3, 3)
        assert env.full_reward_spec["agents", "rew"].shape == (2, 3, 1)
        assert env.full_action_spec["agents", "act"].shape == (2, 3, 1) and ACT not in env.full_action_spec.keys(True)
        assert env.reward_keys == [("agents", "rew")] and env.action_keys == [("agents", "act")]

    def test_rename_group_key(self):
        # the whole group key renamed: its leaves are copied with their agent dim. As in TorchRL 0.14.1, the
        # renamed observation spec holds only the observation: the copied reward/action leaves are not
        # declared (check_env_specs fails the same way there), so rename group leaves, not a group spanning
        # observation, reward and action specs.
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), RenameTransform(["agents"], ["team"], create_copy=True))
        assert env.observation_spec["team"].shape == (2, 3) and env.observation_spec["team", "observation"].shape == (2, 3, 3)
        data = env.rollout(2)
        assert data["next", "team"].batch_size == (2, 2, 3)
        torch.testing.assert_close(data["next", "team", "observation"], data[("next", *OBS)])


class TestTensorDictPrimerGroup(GroupContract):
    def make_group_transform(self):
        # a per-agent recurrent state (4,) under "agents": the primer's group has the agent dim as its shape
        spec = Composite(agents=Composite(hidden=Unbounded(shape=(3, 4)), shape=(3,)))
        return TensorDictPrimer(spec, default_value=1.5, expand_specs=True)

    def check_group(self, data):
        hidden = data["next", "agents", "hidden"]
        assert hidden.shape == (*data[("next", *OBS)].shape[:-1], 4)
        assert (hidden == 1.5).all() and (data["agents", "hidden"] == 1.5).all()

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_specs(self, batch_size):
        # TorchRL 0.14.1: observation and state specs both hold "agents" with shape (*batch, 3)
        env = TransformedEnv(AgentsEnv(batch_size=batch_size), self.make_group_transform())
        for spec in (env.observation_spec, env.state_spec):
            assert spec["agents"].shape == (*batch_size, 3) and spec["agents", "hidden"].shape == (*batch_size, 3, 4)

    def test_partial_reset_under_group(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        td = env.reset()
        td["agents", "hidden"] = torch.full((2, 3, 4), 7.0)
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert out["agents", "hidden"][0].unique().tolist() == [1.5]  # every agent of env 0 reset
        assert out["agents", "hidden"][1].unique().tolist() == [7.0]  # env 1 keeps its agents' states


# --------------------------------------------------------------------------------------------------------
# device, shapes, stacking
# --------------------------------------------------------------------------------------------------------
class TestDeviceCastGroup(GroupContract):
    def make_group_transform(self):
        return DeviceCastTransform("cpu")  # env-level: every entry (the group's included) on the cast device

    def check_group(self, data):
        assert data.device == torch.device("cpu") and data["next", "agents"].device == torch.device("cpu")
        _group_untouched(data)

    def test_group_spec_device(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert env.device == torch.device("cpu")
        assert env.observation_spec["agents"].shape == (2, 3) and env.observation_spec[OBS].device == torch.device("cpu")
        assert env.full_action_spec[ACT].device == torch.device("cpu")

    def test_group_keys_only(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), DeviceCastTransform("cpu", in_keys=[OBS], in_keys_inv=[ACT]))
        check_env_specs(env, seed=0)
        assert env.observation_spec[OBS].device == torch.device("cpu") and env.observation_spec[OBS].shape == (2, 3, 3)


class TestFlattenObservationGroup(GroupContract):
    def make_group_transform(self):
        # the agents' observations flattened into one root vector (a centralised critic's input)
        return FlattenObservation(-2, -1, in_keys=[OBS], out_keys=["all_agents"])

    def check_group(self, data):
        obs = data[("next", *OBS)]
        torch.testing.assert_close(data["next", "all_agents"], obs.reshape(*obs.shape[:-2], 9))
        _group_untouched(data)

    @pytest.mark.parametrize("out_key", [OBS, ("agents", "flat")])
    def test_flatten_into_group_refused(self, out_key):
        # flattening (agent, feature) into a group entry cannot keep the group's (*batch, 3) shape. TorchRL
        # 0.14.1 refuses it too, when the specs are read (ValueError, spec (2, 9) vs Composite (2, 3)); here
        # when the env is built, naming the key and the group
        with pytest.raises(ValueError, match=r"FlattenObservation: flattening the last 2 dims of \('agents', "
                           r"'observation'\) \(shape \(2, 3, 3\)\) would reach into the batch dims \(2, 3\) of the "
                           r"group 'agents'"):
            TransformedEnv(AgentsEnv(batch_size=(2,)), FlattenObservation(-2, -1, in_keys=[OBS], out_keys=[out_key]))


class TestPermuteGroup(GroupContract):
    def make_group_transform(self):
        return PermuteTransform((-1, -2), in_keys=[("agents", "pixels")], out_keys=[("agents", "pixels_t")])

    def check_group(self, data):
        t = data["next", "agents", "pixels_t"]
        assert t.shape[-3:] == (3, 4, 2)
        torch.testing.assert_close(t, data["next", "agents", "pixels"].transpose(-1, -2))
        x = torch.atanh(data[("next", *OBS)][..., 0])  # pixels_t[..., j, i] = x * (4 i + j)
        torch.testing.assert_close(t[..., 3, 1], x * 7.0, atol=1e-3, rtol=1e-3)

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_env(self, batch_size):
        env = TransformedEnv(PixelAgentsEnv(batch_size=batch_size), self.make_group_transform())
        check_env_specs(env, seed=0)
        assert env.observation_spec["agents", "pixels_t"].shape == (*batch_size, 3, 4, 2)
        data = env.rollout(4, break_when_any_done=False)
        assert data.get("agents").batch_size == (*batch_size, 4, 3)
        self.check_group(data)

    @pytest.mark.parametrize(
        "transform, key",
        [
            (lambda: PermuteTransform((-1, -2), in_keys=[OBS]), r"\('agents', 'observation'\) \(shape \(2, 3, 3\)\)"),
            (lambda: PermuteTransform((-1, -2), in_keys_inv=[ACT]), r"\('agents', 'action'\) \(shape \(2, 3, 1\)\)"),
        ],
    )
    def test_agent_dim_permutation_refused(self, transform, key):
        # swapping the agent dim with a feature dim inside the group: TorchRL 0.14.1 accepts it silently (the
        # (3, 3) shapes still fit); here a ValueError when the env is built
        with pytest.raises(ValueError, match=r"PermuteTransform: permuting the last 2 dims of " + key
                           + r" would reach into the batch dims \(2, 3\) of the group 'agents'"):
            TransformedEnv(AgentsEnv(batch_size=(2,)), transform())

    def test_agent_dim_permuted_into_root(self):
        # the same permutation written outside the group is fine: a root (features, agents) entry
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), PermuteTransform((-1, -2), in_keys=[OBS], out_keys=["by_feature"]))
        check_env_specs(env, seed=0)
        data = env.rollout(2)
        torch.testing.assert_close(data["next", "by_feature"], data[("next", *OBS)].transpose(-1, -2))

    def test_group_serial_env(self):
        from torchrl.envs import SerialEnv

        env = TransformedEnv(SerialEnv(2, PixelAgentsEnv), self.make_group_transform())
        try:
            check_env_specs(env, seed=0)
            self.check_group(env.rollout(4, break_when_any_done=False))
        finally:
            env.close(raise_if_closed=False)


NAMES = ["agent_0", "agent_1", "agent_2"]


class TestStackGroup(GroupContract):
    """TorchRL's documented use: per-agent groups ``"agent_i"`` stacked into one group ``"agents"`` (and the
    stacked action split back), so that the stacked env looks like AgentsEnv."""

    def make_group_transform(self):
        return Stack(in_keys=NAMES, out_key="agents", in_key_inv="agents", out_keys_inv=NAMES)

    def check_group(self, data):
        assert not any(n in data or n in data["next"] for n in NAMES)
        assert data["agents", "action"].shape[-2:] == (3, 1)
        _group_untouched(data)

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_env(self, batch_size):
        env = TransformedEnv(SplitAgentsEnv(batch_size=batch_size), self.make_group_transform())
        check_env_specs(env, seed=0)
        # the same structure as TorchRL 0.14.1 on this env: one group of shape (*batch, 3) in every spec
        for spec in (env.observation_spec, env.full_action_spec, env.full_reward_spec):
            assert spec["agents"].shape == (*batch_size, 3)
        assert env.action_keys == [ACT] and env.reward_keys == [REW]
        data = env.rollout(4, break_when_any_done=False)
        assert data.get("agents").batch_size == (*batch_size, 4, 3)
        self.check_group(data)

    def test_group_serial_env(self):
        from torchrl.envs import SerialEnv

        env = TransformedEnv(SerialEnv(2, SplitAgentsEnv), self.make_group_transform())
        try:
            check_env_specs(env, seed=0)
            self.check_group(env.rollout(4, break_when_any_done=False))
        finally:
            env.close(raise_if_closed=False)

    def test_stacked_action_reaches_each_agent(self):
        env = TransformedEnv(SplitAgentsEnv(batch_size=(2,)), self.make_group_transform())
        td = env.reset()
        x0 = torch.atanh(td[OBS][..., 0])
        td[ACT] = torch.tensor([0.1, -0.2, 0.3]).view(1, 3, 1).expand(2, 3, 1)
        out = env.step(td)
        # agent i moved by its own slice of the stacked action
        expected = (x0 + torch.tensor([0.1, -0.2, 0.3])).clamp(-3, 3)
        torch.testing.assert_close(-out[("next", *REW)][..., 0], expected**2, atol=1e-5, rtol=1e-5)

    def test_stack_done_groups(self):
        # per-agent done groups stacked too: one done group "agents" of shape (2, 3), its reset key
        # ("agents", "_reset"); TorchRL 0.14.1 gives the same keys and flags on this env
        env = TransformedEnv(SplitDoneEnv(batch_size=(2,)), self.make_group_transform())
        check_env_specs(env, seed=0)
        assert env.done_keys == ["done", "terminated", ("agents", "done"), ("agents", "terminated")]
        assert env.reset_keys == ["_reset", ("agents", "_reset")] and env.full_done_spec["agents"].shape == (2, 3)
        data = env.rollout(6, break_when_any_done=False)
        assert data[("next", "agents", "done")].squeeze(-1)[0].int().tolist() == [[0] * 3] * 3 + [[1] * 3] + [[0] * 3] * 2

    @pytest.mark.parametrize("out_key", ["all_obs", ("team", "observation")])
    def test_stack_leaves(self, out_key):
        # leaves of the per-agent groups stacked along a new agent dim (-2) at the root or under a new key;
        # the stacked action is split back per agent. TorchRL 0.14.1 builds the same observation entry but
        # keeps the per-agent action specs (its inverse specs skip leaf keys); here the specs show the stacked
        # action ("team", "action") instead, as for whole groups.
        t = Stack([(n, "observation") for n in NAMES], out_key, in_key_inv=("team", "action"),
                  out_keys_inv=[(n, "action") for n in NAMES], dim=-2)
        env = TransformedEnv(SplitAgentsEnv(batch_size=(2,)), t)
        check_env_specs(env, seed=0)
        assert env.observation_spec[out_key].shape == (2, 3, 3) and env.full_action_spec["team", "action"].shape == (2, 3, 1)
        data = env.rollout(3, break_when_any_done=False)
        obs = data["next", out_key]
        rew = torch.stack([data["next", n, "reward"] for n in NAMES], -2)  # -x^2 per agent
        torch.testing.assert_close(obs[..., :1] ** 2, torch.tanh(rew.neg().sqrt()) ** 2, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------------------
# cleaning, checking, compressing, modules
# --------------------------------------------------------------------------------------------------------
class TestRemoveEmptySpecsGroup(GroupContract):
    def make_group_transform(self):
        return RemoveEmptySpecs()  # on AgentsEnv nothing is empty: the group passes untouched

    def check_group(self, data):
        _group_untouched(data)

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_empty_group_entries_removed(self, batch_size):
        # TorchRL 0.14.1 gives the same keys: the empty per-agent "info" and empty group "team" go, the
        # "agents" group (not empty) keeps its shape
        env = TransformedEnv(EmptyInfoAgentsEnv(batch_size=batch_size), RemoveEmptySpecs())
        check_env_specs(env, seed=0)
        assert set(env.observation_spec.keys(True)) == {OBS, "agents", "observation"}
        assert env.observation_spec["agents"].shape == (*batch_size, 3)
        data = env.rollout(3)
        assert ("agents", "info") not in data["next"].keys(True) and "team" not in data["next"]
        assert data["next", "agents"].batch_size == (*batch_size, 3, 3)


class TestFiniteTensorDictCheckGroup(GroupContract):
    def make_group_transform(self):
        return FiniteTensorDictCheck()

    def check_group(self, data):
        _group_untouched(data)

    def test_nan_in_group_named(self):
        class NanAgentsEnv(AgentsEnv):
            def _step(self, tensordict):
                out = super()._step(tensordict)
                out["agents", "reward"][..., 1, :] = float("nan")  # agent 1's reward
                return out

        env = TransformedEnv(NanAgentsEnv(batch_size=(2,)), self.make_group_transform())
        td = env.reset()
        with pytest.raises(ValueError, match=r"Encountered a non-finite tensor.*\('agents', 'reward'\).* 2 NaN"):
            env.step(env.rand_action(td))


class TestNextObservationDeltaGroup(GroupContract):
    def make_group_transform(self):
        return NextObservationDelta([OBS, "observation"])

    def check_group(self, data):
        delta = data[("next", "delta", *OBS)]
        assert delta.dtype == torch.float16 and data["next", "delta", "agents"].batch_size == data["next", "agents"].batch_size
        torch.testing.assert_close(delta, (data[("next", *OBS)] - data[OBS]).half())
        torch.testing.assert_close(data["next", "delta", "observation"], (data["next", "observation"] - data["observation"]).half())

    def test_rebuild_group_from_buffer(self):
        # the buffer side rebuilds ("next", "agents", "observation") from the root one plus the delta,
        # within float16's precision, agent dim included (also when the whole ("next", "agents") is gone)
        t = self.make_group_transform()
        data = TransformedEnv(AgentsEnv(batch_size=(2,)), t).rollout(4, break_when_any_done=False)
        rebuilt = t(data.exclude(("next", "agents"), ("next", "observation")))
        assert rebuilt["next", "agents"].batch_size == (2, 4, 3) and "delta" not in rebuilt["next"]
        torch.testing.assert_close(rebuilt[("next", *OBS)], data[("next", *OBS)], atol=2e-3, rtol=0)


class TestNextStateReconstructorGroup(GroupContract):
    def make_group_transform(self):
        return NextStateReconstructor([OBS], traj_key=None)  # in an env it does nothing

    def check_group(self, data):
        _group_untouched(data)

    def test_rebuild_group_on_flat_batch(self):
        data = AgentsEnv().rollout(8, break_when_any_done=False)  # two 4-step episodes
        flat = data.exclude(("next", *OBS))
        out = NextStateReconstructor([OBS], traj_key=None)(flat)
        rebuilt, obs = out[("next", *OBS)], data[OBS]
        assert rebuilt.shape == (8, 3, 3)
        # row i gets row i+1's agents' observations, except at episode ends (done) and the last row
        for i in (0, 1, 2, 4, 5, 6):
            torch.testing.assert_close(rebuilt[i], obs[i + 1])
        assert rebuilt[[3, 7]].isnan().all()


class TestModuleTransformGroup(GroupContract):
    @staticmethod
    def _linear():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)

    def make_group_transform(self):
        module = TensorDictModule(self._linear(), in_keys=[OBS], out_keys=[("agents", "feature")])
        return ModuleTransform(module=module, no_grad=True)

    def check_group(self, data):
        linear = self._linear()
        with torch.no_grad():
            torch.testing.assert_close(data["next", "agents", "feature"], linear(data[("next", *OBS)]))

    def test_group_spec_inferred(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert env.observation_spec["agents"].shape == (2, 3) and env.observation_spec["agents", "feature"].shape == (2, 3, 2)


class TestRNDGroup(GroupContract):
    @staticmethod
    def _nets():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 4), torch.nn.Linear(3, 4)

    def make_group_transform(self):
        target, predictor = self._nets()
        return RNDTransform(target, predictor, in_keys=[OBS], out_keys=[("agents", "intrinsic_reward")],
                            normalize_obs=False, normalize_reward=False)

    def check_group(self, data):
        target, predictor = self._nets()
        obs = data[("next", *OBS)]
        with torch.no_grad():
            expected = (target(obs) - predictor(obs)).pow(2).mean(-1, keepdim=True)  # one bonus per agent
        torch.testing.assert_close(data["next", "agents", "intrinsic_reward"], expected)

    def test_normalized_per_agent(self):
        target, predictor = self._nets()
        t = RNDTransform(target, predictor, in_keys=[OBS], out_keys=[("agents", "intrinsic_reward")])
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), t)
        data = env.rollout(3, break_when_any_done=False)
        assert data["next", "agents", "intrinsic_reward"].shape == (2, 3, 3, 1)
        assert t.obs_rms.mean.shape == (3,)  # statistics of an agent's observation, shared by the agents
        assert env.full_reward_spec["agents", "intrinsic_reward"].shape == (2, 3, 1)

    def test_bonus_at_root_keeps_agent_dim(self):
        # out_key at the root: still one bonus per agent, the root entry has the agent dim (TorchRL 0.14.1:
        # spec (2, 3, 1), data (2, T, 3, 1))
        target, predictor = self._nets()
        t = RNDTransform(target, predictor, in_keys=[OBS], out_keys=["bonus"], normalize_obs=False,
                         normalize_reward=False)
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), t)
        assert env.full_reward_spec["bonus"].shape == (2, 3, 1)
        check_env_specs(env, seed=0)
        data = env.rollout(3, break_when_any_done=False)
        obs = data[("next", *OBS)]
        with torch.no_grad():
            expected = (target(obs) - predictor(obs)).pow(2).mean(-1, keepdim=True)
        torch.testing.assert_close(data["next", "bonus"], expected)


# --------------------------------------------------------------------------------------------------------
# env-level transforms on an env that has a group
# --------------------------------------------------------------------------------------------------------
def _episode_starts(data):
    """``True`` where a step starts an episode (AgentsEnv: every ``max_steps = 4`` steps)."""
    t = torch.arange(data.batch_size[-1])
    return (t % 4 == 0).expand(data.batch_size)


class TestInitTrackerGroup(GroupContract):
    def make_group_transform(self):
        return InitTracker()  # AgentsEnv has root done flags only: one root "is_init"

    def check_group(self, data):
        assert torch.equal(data["is_init"].squeeze(-1), _episode_starts(data))
        assert "is_init" not in data["agents"]  # no done group under "agents"
        _group_untouched(data)

    def test_per_agent_done_group(self):
        # with per-agent done flags, an init flag in every done group (TorchRL's documented "leaf replacement
        # for each _reset flag"; TorchRL 0.14.1 itself writes only the root one): per env and per agent
        env = TransformedEnv(AgentDoneEnv(batch_size=(2,)), InitTracker())
        check_env_specs(env, seed=0)
        assert env.observation_spec["agents", "is_init"].shape == (2, 3, 1)
        data = env.rollout(6, break_when_any_done=False)
        starts = _episode_starts(data)
        assert torch.equal(data["is_init"].squeeze(-1), starts)
        assert torch.equal(data["agents", "is_init"].squeeze(-1), starts.unsqueeze(-1).expand(2, 6, 3))

    def test_nested_init_key_refused(self):
        # TorchRL 0.14.1 refuses it too (ValueError: init_key can only be of type str)
        with pytest.raises(ValueError, match=r"init_key must be a string.*every done group.*\('agents', 'is_init'\)"):
            InitTracker(init_key=("agents", "is_init"))


class TestTrajCounterGroup(GroupContract):
    def make_group_transform(self):
        return TrajCounter()

    def check_group(self, data):
        ids = data["next", "traj_count"].squeeze(-1)
        # the 4 steps are one episode: one id per env, the same for all its steps, distinct across envs
        assert (ids == ids[..., :1]).all() and ids[..., 0].unique().numel() == ids[..., 0].numel()
        _group_untouched(data)

    def test_numbers_as_torchrl(self):
        # TorchRL 0.14.1 on this env: [[0, 0, 0, 0, 2, 2, 2, 2, 4], [1, 1, 1, 1, 3, 3, 3, 3, 5]]
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), TrajCounter())
        data = env.rollout(9, break_when_any_done=False)
        assert data["traj_count"].squeeze(-1).tolist() == [[0, 0, 0, 0, 2, 2, 2, 2, 4], [1, 1, 1, 1, 3, 3, 3, 3, 5]]
        assert data["agents"].batch_size == (2, 9, 3)

    def test_per_agent_ids(self):
        # out_key in the per-agent done group: one id per agent and episode (TorchRL 0.14.1 on the same env,
        # without check_env_specs first: [6, 7, 8] for env 0 after the 6 root/agent ids it gave earlier)
        env = TransformedEnv(AgentDoneEnv(batch_size=(2,)), TrajCounter(out_key=("agents", "traj_count")))
        assert env.observation_spec["agents", "traj_count"].shape == (2, 3, 1)
        data = env.rollout(6, break_when_any_done=False)
        ids = data["agents", "traj_count"].squeeze(-1)
        assert ids[:, 0].tolist() == [[0, 1, 2], [3, 4, 5]] and ids[:, 4].tolist() == [[6, 7, 8], [9, 10, 11]]
        assert (ids[:, :4] == ids[:, :1]).all()

    def test_group_without_done_refused(self):
        # TorchRL 0.14.1 fails too, with an opaque AttributeError from the spec; here at construction
        with pytest.raises(KeyError, match=r"out_key \('agents', 'traj_count'\) must sit in a done group"):
            TransformedEnv(AgentsEnv(batch_size=(2,)), TrajCounter(out_key=("agents", "traj_count")))


def _staggered_serial():
    """Two AgentDoneEnvs in a SerialEnv, with 2- and 3-step episodes: partial resets of whole groups."""
    from torchrl.envs import SerialEnv

    return SerialEnv(2, [functools.partial(AgentDoneEnv, max_steps=2), functools.partial(AgentDoneEnv, max_steps=3)])


class TestPartialResetsOfGroups:
    """InitTracker and TrajCounter over partial resets of a SerialEnv whose sub-envs have per-agent dones."""

    def test_init_tracker(self):
        env = TransformedEnv(_staggered_serial(), InitTracker())
        try:
            data = env.rollout(7, break_when_any_done=False)
        finally:
            env.close(raise_if_closed=False)
        expected = [[1, 0, 1, 0, 1, 0, 1], [1, 0, 0, 1, 0, 0, 1]]  # TorchRL 0.14.1's root "is_init"
        assert data["is_init"].squeeze(-1).int().tolist() == expected
        # each agent's flag follows its env's resets (the reset mask broadcast over the agent dim)
        assert data["agents", "is_init"].squeeze(-1).int().tolist() == [[[v] * 3 for v in row] for row in expected]

    def test_traj_counter(self):
        env = TransformedEnv(_staggered_serial(), TrajCounter())
        try:
            data = env.rollout(7, break_when_any_done=False)
        finally:
            env.close(raise_if_closed=False)
        # TorchRL 0.14.1 gives the same root ids
        assert data["traj_count"].squeeze(-1).tolist() == [[0, 0, 2, 2, 4, 4, 5], [1, 1, 1, 3, 3, 3, 6]]

    def test_traj_counter_per_agent(self):
        env = TransformedEnv(_staggered_serial(), TrajCounter(out_key=("agents", "traj_count")))
        try:
            data = env.rollout(7, break_when_any_done=False)
        finally:
            env.close(raise_if_closed=False)
        ids = data["agents", "traj_count"].squeeze(-1)
        # one new id per agent of each reset env, in order: env 1's second episode (step 3) gets 9, 10, 11.
        # TorchRL 0.14.1 gives it 15, 16, 17 (it skips the ids of the agents that were not reset)
        assert ids[:, 0].tolist() == [[0, 1, 2], [3, 4, 5]] and ids[:, 3].tolist() == [[6, 7, 8], [9, 10, 11]]
        assert ids[..., 0].tolist() == [[0, 0, 6, 6, 12, 12, 15], [3, 3, 3, 9, 9, 9, 18]]


class TestTimerGroup(GroupContract):
    def make_group_transform(self):
        return Timer()

    def check_group(self, data):
        for key in ("time_step", "time_policy", "time_reset"):
            assert data["next", key].shape == data.batch_size and (data["next", key] >= 0).all()
        assert (data["next", "time_step"] > 0).all()
        _group_untouched(data)


class TestPinMemoryGroup(GroupContract):
    def make_group_transform(self):
        return PinMemoryTransform()

    def check_group(self, data):
        # pins where an accelerator exists (not on this CPU machine); the group passes unchanged either way
        _group_untouched(data)

    def test_group_entries_pinned_when_pinning(self):
        t = PinMemoryTransform()
        data = TransformedEnv(AgentsEnv(batch_size=(2,)), t).reset()
        assert bool(data[OBS].is_pinned()) == t.pins and data["agents"].batch_size == (2, 3)


class TestBatchSizeGroup:
    """BatchSizeTransform reshapes the env's batch; the group keeps its agent dim after the new batch."""

    @pytest.mark.parametrize(
        "base, fn, new",
        [((2,), lambda td: td.unsqueeze(-1), (2, 1)), ((2, 2), lambda td: td.reshape(-1), (4,)), ((4,), lambda td: td.reshape(2, 2), (2, 2))],
    )
    def test_reshape(self, base, fn, new):
        # TorchRL 0.14.1 gives the same shapes for (2,) -> (2, 1) and (4,) -> (2, 2); (2, 2) -> (4,) fails there
        # inside its Bounded spec
        env = TransformedEnv(AgentsEnv(batch_size=base), BatchSizeTransform(reshape_fn=fn))
        assert env.batch_size == new
        assert env.observation_spec["agents"].shape == (*new, 3) and env.full_action_spec[ACT].shape == (*new, 3, 1)
        check_env_specs(env, seed=0)
        data = env.rollout(4, break_when_any_done=False)
        assert data["next", "agents"].batch_size == (*new, 4, 3)
        _group_untouched(data)

    def test_batch_size_on_unbatched(self):
        env = TransformedEnv(AgentsEnv(), BatchSizeTransform(batch_size=[1]))
        assert env.observation_spec["agents"].shape == (1, 3) and env.full_reward_spec[REW].shape == (1, 3, 1)


class TestComposeGroup(GroupContract):
    def make_group_transform(self):
        return Compose(
            DTypeCastTransform(torch.float32, torch.float64, in_keys=[OBS], in_keys_inv=[ACT]),
            SqueezeTransform(-1, in_keys=[REW], out_keys=[("agents", "flat_reward")], in_keys_inv=[ACT]),
        )

    def check_group(self, data):
        assert data[("next", *OBS)].dtype == torch.float64
        torch.testing.assert_close(data["next", "agents", "flat_reward"], data[("next", *REW)][..., 0])
        assert data[ACT].dtype == torch.float64 and data[ACT].shape[-1] == 3  # squeezed and cast outside
        _group_untouched(data)

    def test_inverse_chain_on_group_action(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert env.full_action_spec[ACT].shape == (2, 3) and env.full_action_spec[ACT].dtype == torch.float64
        td = env.reset()
        x0 = torch.atanh(td[OBS][..., 0])
        td[ACT] = torch.tensor([[0.5, -0.5, 0.25]], dtype=torch.float64).expand(2, 3)
        out = env.step(td)
        expected = (x0 + td[ACT]).clamp(-3, 3)
        torch.testing.assert_close(torch.atanh(out[("next", *OBS)][..., 0]), expected, atol=1e-4, rtol=1e-4)


class TestGroupVariants:
    """Other configurations on the group, run the same way on TorchRL 0.14.1 (same keys, shapes, dtypes)."""

    def _rollout(self, transform):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), transform)
        check_env_specs(env, seed=0)
        return env, env.rollout(3, break_when_any_done=False)

    def test_dtype_cast_every_float_entry(self):
        env, data = self._rollout(DTypeCastTransform(torch.float32, torch.float64))
        for key in (OBS, REW, "observation"):
            assert data[("next", key)].dtype == torch.float64
        assert env.full_action_spec[ACT].dtype == torch.float64 and env.observation_spec["agents"].shape == (2, 3)
        _group_untouched(data)

    def test_select_without_rewards(self):
        env, data = self._rollout(SelectTransform(OBS, keep_rewards=False))
        assert env.reward_keys == [] and env.action_keys == [ACT]
        assert set(data["next"].keys(True, True)) == {OBS, "done", "terminated"}

    def test_squeeze_group_reward_in_place(self):
        env, data = self._rollout(SqueezeTransform(-1, in_keys=[REW]))
        assert env.full_reward_spec[REW].shape == (2, 3) and data[("next", *REW)].shape == (2, 3, 3)
        x = torch.atanh(data[("next", *OBS)][..., 0])
        torch.testing.assert_close(data[("next", *REW)], -(x * x), atol=1e-4, rtol=1e-4)

    def test_primer_with_nested_key(self):
        # a flat {("agents", "h"): spec} primer goes into the existing group with its agent dim (TorchRL 0.14.1
        # fails on it: "Attempting to broadcast a dimension of length 3")
        env, data = self._rollout(TensorDictPrimer({("agents", "h"): Unbounded(shape=(3, 4))}, expand_specs=True))
        assert env.state_spec["agents", "h"].shape == (2, 3, 4) and env.state_spec["agents"].shape == (2, 3)
        assert data["agents", "h"].shape == (2, 3, 3, 4) and (data["agents", "h"] == 0).all()

    def test_module_transform_inverse_on_group_action(self):
        # the outside writes ("agents", "raw") in [-2, 2]; the module halves it into the env's action
        def action_spec(spec):
            spec = spec.clone()
            spec["agents", "raw"] = Bounded(-2.0, 2.0, shape=spec[ACT].shape)
            del spec[ACT]
            return spec

        module = TensorDictModule(lambda raw: raw * 0.5, in_keys=[("agents", "raw")], out_keys=[ACT])
        env, _ = self._rollout(ModuleTransform(module=module, inverse=True, action_spec_transform=action_spec))
        assert env.action_keys == [("agents", "raw")] and env.full_action_spec["agents"].shape == (2, 3)
        td = env.reset()
        x0 = torch.atanh(td[OBS][..., 0])
        td["agents", "raw"] = torch.tensor([1.0, -2.0, 0.5]).view(1, 3, 1).expand(2, 3, 1)
        out = env.step(td)
        expected = (x0 + torch.tensor([0.5, -1.0, 0.25])).clamp(-3, 3)
        torch.testing.assert_close(torch.atanh(out[("next", *OBS)][..., 0]), expected, atol=1e-4, rtol=1e-4)

    def test_exclude_every_group_output(self):
        # the group's outputs all excluded: TorchRL 0.14.1 keeps the emptied "agents" Composite in the
        # observation and reward specs; so does this implementation (RemoveEmptySpecs drops them)
        env, _ = self._rollout(ExcludeTransform(OBS, REW))
        assert list(env.observation_spec.keys(True)) == ["agents", "observation"]
        assert env.observation_spec["agents"].shape == (2, 3) and env.full_action_spec["agents"].shape == (2, 3)
        env2 = TransformedEnv(AgentsEnv(batch_size=(2,)), Compose(ExcludeTransform(OBS, REW), RemoveEmptySpecs()))
        check_env_specs(env2, seed=0)
        assert list(env2.observation_spec.keys(True)) == ["observation"] and env2.full_action_spec[ACT].shape == (2, 3, 1)
