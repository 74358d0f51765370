"""TimeMaxPool: element-wise maximum over the last T env steps, restarted per row on partial resets.

Expected values marked "TorchRL" were produced by TorchRL 0.14.1 on the same inputs.
"""
import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.envs import PendulumEnv, TimeMaxPool, TransformedEnv
from torchrl.testing import CountingEnv


class _Pattern:
    """Plays ``pattern[row][t % len]`` in each row of a batched CountingEnv."""

    def __init__(self, pattern):
        self.pattern, self.t = pattern, 0

    def __call__(self, td):
        a = torch.tensor([p[self.t % len(p)] for p in self.pattern], dtype=torch.int8).reshape(*td.batch_size, 1)
        self.t += 1
        return td.set("action", a)


class TestTimeMaxPool(TransformContract):
    env_only = True

    def make_transform(self):
        return TimeMaxPool(in_keys=["observation"], T=3)

    def test_partial_resets_and_zero_filled_windows(self):
        # negative counters make the zeros that fill a new window visible
        t = TimeMaxPool(in_keys=["observation"], out_keys=["mx"], T=3)
        env = TransformedEnv(CountingEnv(max_steps=-3, start_val=-5, batch_size=[2]), t)
        data = env.rollout(8, _Pattern([[1], [1, 0]]), break_when_any_done=False)
        assert data["observation"].squeeze(-1).tolist() == [
            [-5, -4, -3, -5, -4, -3, -5, -4], [-5, -4, -4, -3, -3, -5, -5, -4]
        ]
        assert data["mx"].squeeze(-1).tolist() == [  # TorchRL
            [0, 0, -3, 0, 0, -3, 0, 0], [0, 0, -4, -3, -3, 0, 0, -4]
        ]
        assert data["next", "mx"].squeeze(-1).tolist() == [  # TorchRL
            [0, -3, -2, 0, -3, -2, 0, -3], [0, -4, -3, -3, -2, 0, -4, -4]
        ]
        assert env.observation_spec["mx"] == env.observation_spec["observation"]

    def test_window_maximum_by_hand(self):
        env = TransformedEnv(PendulumEnv(seed=0), TimeMaxPool(in_keys=["observation"], out_keys=["mx"], T=2))
        data = env.rollout(6)
        obs = torch.cat([data["observation"][:1], data["next", "observation"]])  # 7 observations
        expected = torch.maximum(obs[:-1], obs[1:])  # window of 2 after the first step
        torch.testing.assert_close(data["next", "mx"], expected)
        torch.testing.assert_close(data["mx"][0], obs[0].clamp_min(0))  # reset: the observation and a zero

    def test_t_one_is_identity(self):
        env = TransformedEnv(PendulumEnv(seed=0), TimeMaxPool(in_keys=["observation"], out_keys=["mx"], T=1))
        data = env.rollout(4)
        torch.testing.assert_close(data["next", "mx"], data["next", "observation"])
        torch.testing.assert_close(data["mx"], data["observation"])

    def test_defaults_and_reset_key(self):
        t = TimeMaxPool(T=3)
        assert t.in_keys == ["observation"] and t.out_keys == ["observation"] and t.reset_key == "_reset"
        assert TimeMaxPool(reset_key=("a", "_reset")).reset_key == ("a", "_reset")
        env = TransformedEnv(PendulumEnv(), TimeMaxPool(T=2))
        assert env.transform.reset_key == "_reset"
        assert env.transform.state_dict() == {}

    @pytest.mark.parametrize("T", [0, -1])
    def test_bad_t(self, T):
        with pytest.raises(ValueError, match="T .* at least 1"):
            TimeMaxPool(T=T)

    def test_refuses_stored_data(self):
        with pytest.raises(NotImplementedError, match="cannot be applied to stored data"):
            TimeMaxPool(T=2)(TensorDict(observation=torch.zeros(3, 1), batch_size=[3]))

    def test_missing_key(self):
        with pytest.raises(KeyError, match="nope"):
            TransformedEnv(PendulumEnv(), TimeMaxPool(in_keys=["nope"], T=2))
