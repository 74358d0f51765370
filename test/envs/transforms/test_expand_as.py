import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import ExpandAs
from torchrl.envs.transforms import _expand_as as module

from test.envs.transforms.contract import TransformContract


class TestExpandAs(TransformContract):
    """The contract runs on Pendulum, whose entries hold no expandable pair (its reward has shape ``(1,)``,
    its observations ``()``): the reward is copied to a new reward entry ``reward_x``; the known-answer and
    spec tests below cover real expansions."""

    def make_transform(self):
        return ExpandAs("reward", "reward", out_key="reward_x")

    def test_known_answer(self):
        td = TensorDict(r=torch.tensor([[1.0], [2.0]]), obs=torch.zeros(2, 3), batch_size=[2])
        out = ExpandAs("r", "obs", out_key="r3")(td)
        assert out["r3"].tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
        assert out["r"].shape == (2, 1)
        # in place by default, trailing dims added
        td = TensorDict(a=torch.tensor([1.0, 2.0]), b=torch.zeros(2, 2, 3))
        assert ExpandAs("a", "b")(td)["a"].shape == (2, 2, 3)

    def test_reference_parity(self):
        # TorchRL: ExpandAs("a", "b").in_keys == out_keys == ["a"]; out_key kept apart
        t = ExpandAs("r", "o", out_key="r2")
        assert t.in_keys == ["r"] and t.out_keys == ["r2"]
        assert ExpandAs("a", "b").out_keys == ["a"]

    def test_spec(self):
        spec = Composite(
            full_observation_spec=Composite(o=Unbounded((1, 2))),
            full_reward_spec=Composite(r=Bounded(0.0, 1.0, (1,))),
            full_done_spec=Composite(),
        )
        out = ExpandAs("r", "o", out_key="r2").transform_output_spec(spec)
        r2 = out["full_reward_spec", "r2"]
        assert isinstance(r2, Bounded) and r2.shape == (1, 2) and r2.low.tolist() == [[0.0, 0.0]]
        assert out["full_reward_spec", "r"].shape == (1,)

    def test_env_reward_per_agent(self):
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), ExpandAs("reward", "done", out_key="r_done"))
        check_env_specs(env, seed=0)
        data = env.rollout(3)
        torch.testing.assert_close(data["next", "r_done"], data["next", "reward"])

    def test_errors(self):
        td = TensorDict(r=torch.tensor([1.0, 2.0]), obs=torch.zeros(4, 3))
        with pytest.raises(RuntimeError, match=r"'r' of shape \(2,\) cannot be expanded as 'obs' of shape \(4, 3\)"):
            ExpandAs("r", "obs")(td)
        with pytest.raises(KeyError, match="'missing' not found"):
            ExpandAs("missing", "obs")(td)
        with pytest.raises(KeyError, match="'nope' is not an output"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(), ExpandAs("reward", "nope"))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
