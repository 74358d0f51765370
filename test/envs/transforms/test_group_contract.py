"""Transforms on a multi-agent group (``GroupContract``): keys under ``"agents"`` with an agent dimension."""
import torch

from torchrl.envs.transforms import (
    BinarizeReward,
    CatTensors,
    ClipTransform,
    DoubleToFloat,
    ObservationNorm,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SignTransform,
    StepCounter,
    UnsqueezeTransform,
    VecNorm,
)

from test.envs.transforms.contract import GroupContract

OBS, REW, ACT = ("agents", "observation"), ("agents", "reward"), ("agents", "action")


class TestObservationNormGroup(GroupContract):
    def make_group_transform(self):
        return ObservationNorm(loc=0.5, scale=2.0, in_keys=[OBS], out_keys=[("agents", "normed")])

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "normed"], data["next", *OBS] * 2.0 + 0.5)


class TestRewardScalingGroup(GroupContract):
    def make_group_transform(self):
        return RewardScaling(loc=1.0, scale=3.0, in_keys=[REW], out_keys=[("agents", "scaled")])

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "scaled"], data["next", *REW] * 3.0 + 1.0)


class TestRewardSumGroup(GroupContract):
    def make_group_transform(self):
        return RewardSum(in_keys=[REW], out_keys=[("agents", "episode_reward")])

    def check_group(self, data):
        # the root done flags reset every agent's sum; in these 4-step episodes, a running sum over time
        rew = data["next", *REW]
        expected = rew.cumsum(-3)  # time dim of (…, T, n_agents, 1)
        torch.testing.assert_close(data["next", "agents", "episode_reward"], expected)


class TestClipGroup(GroupContract):
    def make_group_transform(self):
        return ClipTransform(in_keys=[OBS], out_keys=[("agents", "clipped")], low=-0.5, high=0.5)

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "clipped"], data["next", *OBS].clamp(-0.5, 0.5))


class TestRewardClippingGroup(GroupContract):
    def make_group_transform(self):
        return RewardClipping(-0.25, 0.0, in_keys=[REW])

    def check_group(self, data):
        assert (data["next", *REW] >= -0.25).all()


class TestSignGroup(GroupContract):
    def make_group_transform(self):
        return SignTransform(in_keys=[REW], out_keys=[("agents", "sign")])

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "sign"], data["next", *REW].sign())


class TestBinarizeRewardGroup(GroupContract):
    def make_group_transform(self):
        return BinarizeReward(in_keys=[REW], out_keys=[("agents", "binary")])

    def check_group(self, data):
        assert torch.equal(data["next", "agents", "binary"], (data["next", *REW] > 0).to(data["next", "agents", "binary"].dtype))


class TestCatTensorsGroup(GroupContract):
    def make_group_transform(self):
        return CatTensors(in_keys=[OBS, ("agents", "observation")], out_key=("agents", "both"), del_keys=False)

    def check_group(self, data):
        obs = data["next", *OBS]
        torch.testing.assert_close(data["next", "agents", "both"], torch.cat([obs, obs], -1))


class TestUnsqueezeGroup(GroupContract):
    def make_group_transform(self):
        return UnsqueezeTransform(-1, in_keys=[OBS], out_keys=[("agents", "unsq")])

    def check_group(self, data):
        assert data["next", "agents", "unsq"].shape[-2:] == (3, 1)


class TestVecNormGroup(GroupContract):
    def make_group_transform(self):
        return VecNorm(in_keys=[OBS], decay=1.0)

    def check_group(self, data):
        assert torch.isfinite(data["next", *OBS]).all()


class TestStepCounterGroup(GroupContract):
    def make_group_transform(self):
        return StepCounter()

    def check_group(self, data):
        assert data["next", "step_count"].squeeze(-1).tolist()[-4:] in ([1, 2, 3, 4], [[1, 2, 3, 4]] * 2)


class TestDoubleToFloatGroup(GroupContract):
    def make_group_transform(self):
        return DoubleToFloat()  # nothing is float64 here: a no-op on a group env

    def check_group(self, data):
        assert data["next", *OBS].dtype == torch.float32


class TestCatFramesGroup(GroupContract):
    def make_group_transform(self):
        from torchrl.envs.transforms import CatFrames

        return CatFrames(N=3, dim=-1, in_keys=[OBS], out_keys=[("agents", "stack")])

    def check_group(self, data):
        stack, obs = data["next", "agents", "stack"], data["next", *OBS]
        assert stack.shape[-2:] == (3, 9)  # per agent: 3 frames of 3 features
        torch.testing.assert_close(stack[..., 6:], obs)  # the newest frame last
        torch.testing.assert_close(stack[..., 1:, :, 3:6], obs[..., :-1, :, :])  # rolled by one step


class TestTimeMaxPoolGroup(GroupContract):
    def make_group_transform(self):
        from torchrl.envs.transforms import TimeMaxPool

        return TimeMaxPool(in_keys=[OBS], out_keys=[("agents", "pooled")], T=2)

    def check_group(self, data):
        pooled, obs = data["next", "agents", "pooled"], data["next", *OBS]
        torch.testing.assert_close(pooled[..., 1:, :, :], torch.maximum(obs[..., 1:, :, :], obs[..., :-1, :, :]))


class TestLineariseRewardsGroup(GroupContract):
    def make_group_transform(self):
        from torchrl.envs.transforms import LineariseRewards

        return LineariseRewards(in_keys=[REW], out_keys=[("agents", "linear")], weights=[2.0])

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "linear"], data["next", *REW] * 2.0)


class TestUnaryGroup(GroupContract):
    def make_group_transform(self):
        from torchrl.envs.transforms import UnaryTransform

        return UnaryTransform(in_keys=[OBS], out_keys=[("agents", "neg")], fn=lambda x: -x)

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "neg"], -data["next", *OBS])


class TestHashGroup(GroupContract):
    def make_group_transform(self):
        from torchrl.envs.transforms import Hash

        return Hash(in_keys=[OBS], out_keys=[("agents", "hash")])

    def check_group(self, data):
        h = data["next", "agents", "hash"]
        assert h.shape[:-1] == data["next", *OBS].shape[:-1]  # one hash per agent and step


class TestExpandAsGroup(GroupContract):
    def make_group_transform(self):
        from torchrl.envs.transforms import ExpandAs

        return ExpandAs(REW, OBS, out_key=("agents", "wide_reward"))

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "wide_reward"], data["next", *REW].expand_as(data["next", *OBS]))
