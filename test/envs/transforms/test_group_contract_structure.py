"""Structural, key-editing and env-level transforms on a multi-agent group (``GroupContract``).

The env is ``AgentsEnv`` (group ``"agents"`` of batch ``(*batch, 3)``, per-agent observation (3,) ``=
tanh([x, 2x, 3x])``, action (1,), reward (1,) ``= -x^2``; root ``"observation"`` (2,) and root done flags)
and, where a transform needs other entries, small variants defined here.
"""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase, TransformedEnv, check_env_specs
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

from test.envs.transforms._group_env import AgentsEnv
from test.envs.transforms.contract import GroupContract

OBS, REW, ACT = ("agents", "observation"), ("agents", "reward"), ("agents", "action")


def _x(data):
    """Each agent's position after each step, read back from the untransformed per-agent reward ``-x^2``
    and observation ``tanh(x)`` (the sign)."""
    return data["next", *REW].neg().sqrt() * data["next", *OBS][..., :1].sign()


def _group_untouched(data, obs_key=OBS):
    """The group keeps its agent dim and AgentsEnv's relations: obs = tanh([x, 2x, 3x]), reward = -x^2."""
    obs, rew = data["next", *obs_key], data["next", *REW]
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
        assert data["next", *OBS].dtype == torch.float64 and data["next", *REW].dtype == torch.float32
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
        assert flat.shape == data["next", *REW].shape[:-1]  # (…, T, 3): one value per agent
        torch.testing.assert_close(flat, data["next", *REW][..., 0])

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
        torch.testing.assert_close(torch.atanh(out["next", *OBS][..., 0]), (x0 + 0.5).clamp(-3, 3), atol=1e-4, rtol=1e-4)


class TestExcludeGroup(GroupContract):
    def make_group_transform(self):
        return ExcludeTransform(OBS)  # a per-agent entry; the group keeps its reward and action

    def check_group(self, data):
        assert OBS not in data.keys(True) and ("next", *OBS) not in data.keys(True)
        assert data["next", *REW].shape[-2:] == (3, 1) and data["next", "observation"].shape[-1] == 2

    def test_group_spec_keeps_shape(self):
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), self.make_group_transform())
        assert OBS not in env.observation_spec.keys(True)
        assert env.full_reward_spec["agents"].shape == (2, 3) and env.full_action_spec["agents"].shape == (2, 3)

    def test_exclude_whole_group_output(self):
        # excluding the group key drops its outputs; the action (an input) stays, with its group shape
        env = TransformedEnv(AgentsEnv(batch_size=(2,)), ExcludeTransform("agents"))
        check_env_specs(env, seed=0)
        assert "agents" not in env.observation_spec.keys()
        assert env.full_action_spec["agents"].shape == (2, 3)


class TestSelectGroup(GroupContract):
    def make_group_transform(self):
        return SelectTransform(OBS)  # root "observation" goes; dones, rewards and actions are kept

    def check_group(self, data):
        assert "observation" not in data["next"].keys()
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
        torch.testing.assert_close(data["next", "team", "observation"], data["next", *OBS])


class TestTensorDictPrimerGroup(GroupContract):
    def make_group_transform(self):
        # a per-agent recurrent state (4,) under "agents": the primer's group has the agent dim as its shape
        spec = Composite(agents=Composite(hidden=Unbounded(shape=(3, 4)), shape=(3,)))
        return TensorDictPrimer(spec, default_value=1.5, expand_specs=True)

    def check_group(self, data):
        hidden = data["next", "agents", "hidden"]
        assert hidden.shape == (*data["next", *OBS].shape[:-1], 4)
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
