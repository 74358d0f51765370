"""RewardSum: what TorchRL 0.14.1 does with reset_keys, in_keys and reward_spec; stored trajectories."""
import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import PendulumEnv, RewardSum, TransformedEnv


def test_reset_keys_need_an_env_or_an_argument():
    with pytest.raises(TypeError, match="no reset_keys were given and the transform has no parent env"):
        RewardSum().reset_keys
    assert RewardSum(reset_keys=["_reset"]).reset_keys == ["_reset"]
    t = RewardSum()
    TransformedEnv(PendulumEnv(), t)
    assert t.reset_keys == ["_reset"]


def test_in_keys_must_be_rewards():
    with pytest.raises(ValueError, match=r"in_keys \['th'\] are not reward entries of the env"):  # (when the transform is attached)
        TransformedEnv(PendulumEnv(), RewardSum(in_keys=["th"]))


def test_reward_spec_true_declares_a_reward():
    env = TransformedEnv(PendulumEnv(), RewardSum(reward_spec=True))
    assert "episode_reward" in env.full_reward_spec.keys()
    assert "episode_reward" not in env.observation_spec.keys()


def test_running_return_of_a_stored_trajectory():
    td = TensorDict(
        reward=torch.arange(1.0, 6.0).unsqueeze(-1),
        done=torch.tensor([0, 0, 1, 0, 0], dtype=torch.bool).unsqueeze(-1),
        batch_size=[5],
        names=["time"],
    )
    out = RewardSum()(td)  # root rewards: the sums go to the root
    assert out["episode_reward"].squeeze(-1).tolist() == [1.0, 3.0, 6.0, 4.0, 9.0]
    batch = torch.stack([td.exclude("episode_reward")] * 2, 0)
    batch.names = [None, "time"]
    assert RewardSum()(batch)["episode_reward"][1].squeeze(-1).tolist() == [1.0, 3.0, 6.0, 4.0, 9.0]
    with pytest.raises(ValueError, match="has no batch dim"):
        RewardSum()(TensorDict(reward=torch.ones(1), done=torch.zeros(1, dtype=torch.bool)))
