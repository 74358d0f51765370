import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import Stack
from torchrl.envs.transforms import _stack as module

from test.envs.transforms.contract import TransformContract


class TwoActionEnv(EnvBase):
    """Two action entries ``left`` and ``right`` (shape ``(2,)`` each); observes ``obs = left - right`` and
    ``total = left + right``, and records the keys each step receives."""

    _batch_locked = True

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(obs=Unbounded((*shape, 2)), total=Unbounded((*shape, 2)), shape=shape)
        self.action_spec = Composite(left=Bounded(-1.0, 1.0, (*shape, 2)), right=Bounded(-1.0, 1.0, (*shape, 2)), shape=shape)
        self.reward_spec = Unbounded((*shape, 1))
        self.seen_step: list[set] = []

    def _reset(self, td=None, **kwargs):
        return TensorDict(obs=torch.zeros(*self.batch_size, 2), total=torch.zeros(*self.batch_size, 2), done=torch.zeros(*self.batch_size, 1, dtype=torch.bool),
                          terminated=torch.zeros(*self.batch_size, 1, dtype=torch.bool), batch_size=self.batch_size)

    def _step(self, td):
        self.seen_step.append(set(td.keys()))
        obs = td["left"] - td["right"]
        return TensorDict(obs=obs, total=td["left"] + td["right"], reward=obs.sum(-1, keepdim=True), done=torch.zeros(*self.batch_size, 1, dtype=torch.bool),
                          terminated=torch.zeros(*self.batch_size, 1, dtype=torch.bool), batch_size=self.batch_size)

    def _set_seed(self, seed):
        pass


class TestStack(TransformContract):
    def make_env(self, batch_size=()):
        return TwoActionEnv(batch_size=batch_size)

    def make_transform(self):
        return Stack(in_keys=["obs", "total"], out_key="both", in_key_inv="action", out_keys_inv=["left", "right"])

    def test_known_answers(self):
        td = TensorDict(a=torch.tensor([[1.0, 2.0]]), n=TensorDict(b=torch.tensor([[3.0, 4.0]]), batch_size=[1]), batch_size=[1])
        out = Stack(in_keys=["a", ("n", "b")], out_key="s")(td.clone())
        assert out["s"].tolist() == [[[1.0, 3.0], [2.0, 4.0]]]
        assert list(out.keys(True)) == ["s"]  # the emptied "n" goes too, as TorchRL
        out = Stack(in_keys=["a", ("n", "b")], out_key="s", dim=-2, del_keys=False)(td.clone())
        assert out["s"].tolist() == [[[1.0, 2.0], [3.0, 4.0]]] and "a" in out.keys()
        out = Stack(in_keys=["a", ("n", "b")], out_key="s", dim=1, allow_positive_dim=True)(td.clone())
        assert out["s"].shape == (1, 2, 2) and out["s"][0, 1].tolist() == [3.0, 4.0]

    def test_signature_and_keys(self):
        t = Stack(in_keys=["a", ("n", "b")], out_key="s")
        assert t.in_keys == ["a", ("n", "b")] and t.out_keys == ["s"] and t.in_keys_inv == [] and t.out_keys_inv == []
        t = Stack(in_keys=["a", "b"], out_key="s", in_key_inv="s", out_keys_inv=["a", "b"])
        assert t.in_keys_inv == ["s"] and t.out_keys_inv == ["a", "b"]
        assert t.dim == -1

    def test_observation_spec(self):
        spec = Composite(a=Bounded(0.0, 1.0, (2,)), b=Bounded(0.0, 1.0, (2,)), c=Unbounded((2,)))
        out = Stack(in_keys=["a", "b"], out_key="s").transform_observation_spec(spec.clone())
        assert set(out.keys()) == {"c", "s"} and isinstance(out["s"], Bounded) and out["s"].shape == (2, 2)
        out = Stack(in_keys=["a", "b"], out_key="s", dim=-2).transform_observation_spec(spec.clone())
        assert out["s"].shape == (2, 2)
        with pytest.raises(RuntimeError, match=r"specs of \['a', 'c'\] cannot be stacked"):
            Stack(in_keys=["a", "c"], out_key="s").transform_observation_spec(spec.clone())

    def test_pendulum_mixed_spec_classes(self):
        # Pendulum's th is Unbounded, thdot Bounded: their specs cannot be stacked
        with pytest.raises(RuntimeError, match=r"specs of \['th', 'thdot'\] cannot be stacked"):  # (when attached)
            TransformedEnv(PendulumEnv(seed=0), Stack(in_keys=["th", "thdot"], out_key="s", del_keys=False))

    def test_inverse_action_split(self):
        base = TwoActionEnv(batch_size=(3,))
        t = Stack(in_keys=["obs", "total"], out_key="both", in_key_inv="action", out_keys_inv=["left", "right"], dim=-2)
        env = TransformedEnv(base, t)
        assert set(env.full_action_spec.keys()) == {"action"}
        assert env.full_action_spec["action"].shape == (3, 2, 2)
        check_env_specs(env, seed=0)
        td = env.reset()
        td["action"] = torch.tensor([[1.0, 0.5], [0.25, 0.0]]).expand(3, 2, 2)
        out = env.step(td)
        assert base.seen_step[-1] >= {"left", "right"} and "action" not in base.seen_step[-1]
        # obs = left - right and total = left + right, stacked on dim -2
        assert out["next", "both"][0].tolist() == [[0.75, 0.5], [1.25, 0.5]]
        assert set(out["next"].keys()) >= {"both", "reward"} and "obs" not in out["next"].keys()
        # round trip outside an env
        data = TensorDict(action=torch.arange(4.0).reshape(2, 2))
        split = t.inv(data)
        assert split["left"].tolist() == [0.0, 1.0] and split["right"].tolist() == [2.0, 3.0]

    def test_errors(self):
        with pytest.raises(ValueError, match="dim=0 should be negative"):
            Stack(in_keys=["a", "b"], out_key="s", dim=0)
        with pytest.raises(ValueError, match="pass both in_key_inv and out_keys_inv"):
            Stack(in_keys=["a", "b"], out_key="s", in_key_inv="s")
        with pytest.raises(KeyError, match=r"\['b'\] not found"):
            Stack(in_keys=["a", "b"], out_key="s")(TensorDict(a=torch.zeros(2)))
        with pytest.raises(RuntimeError, match="different shapes"):
            Stack(in_keys=["a", "b"], out_key="s")(TensorDict(a=torch.zeros(2), b=torch.zeros(3)))
        t = Stack(in_keys=["a"], out_key="s", in_key_inv="s", out_keys_inv=["x", "y", "z"])
        with pytest.raises(KeyError, match="inverse.*'s' not found"):
            t.inv(TensorDict(x=torch.zeros(2)))
        assert set(t.inv(TensorDict(x=torch.zeros(2), y=torch.zeros(2), z=torch.zeros(2))).keys()) == {"x", "y", "z"}
        with pytest.raises(RuntimeError, match="has 2 slices along dim -1, but out_keys_inv names 3"):
            t.inv(TensorDict(s=torch.zeros(2)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
