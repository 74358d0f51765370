"""``torchrl.envs.gym_like``: ``GymLikeEnv``'s generic path and the info-dict readers."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Categorical, Composite, NonTensor, Unbounded
from torchrl.envs import check_env_specs
from torchrl.envs.gym_like import BaseInfoDictReader, GymLikeEnv, default_info_dict_reader


class _OldApiCounter:
    """Not a gym env: a gym-like object with the old 4-tuple step API and dict observations."""

    def __init__(self, end: int = 3):
        self.end = end
        self.t = 0

    def reset(self, **kwargs):
        self.t = 0
        return {"pos": np.array([0.0]), "vel": np.array([1.0, -1.0])}

    def step(self, action):
        self.t += 1
        obs = {"pos": np.array([float(self.t) * float(action[0])]), "vel": np.array([1.0, -1.0])}
        info = {"TimeLimit.truncated": self.t >= self.end, "t": self.t}
        return obs, 0.5, self.t >= self.end, info


class ToyLike(GymLikeEnv):
    def _build_env(self, env=None, **kwargs):
        return _OldApiCounter()

    def _make_specs(self, env):
        self.observation_spec = Composite(pos=Unbounded(shape=(1,), dtype=torch.float64), vel=Unbounded(shape=(2,), dtype=torch.float64))
        self.action_spec = Bounded(0.0, 2.0, shape=(1,))
        self.full_done_spec = Composite(
            done=Categorical(2, (1,), dtype=torch.bool),
            terminated=Categorical(2, (1,), dtype=torch.bool),
            truncated=Categorical(2, (1,), dtype=torch.bool),
        )

    def _set_seed(self, seed):
        pass


def test_generic_gym_like_env_old_api():
    env = ToyLike(env="unused")
    rollout = env.rollout(5, actions=[torch.tensor([2.0])] * 5)
    assert rollout.shape == torch.Size([3])
    assert rollout["next", "pos"].squeeze(-1).tolist() == [2.0, 4.0, 6.0]
    assert rollout["next", "pos"].dtype == torch.float64
    assert rollout["next", "reward"].squeeze(-1).tolist() == [0.5, 0.5, 0.5]
    # old API: "TimeLimit.truncated" marks the end as a truncation, not a termination
    assert rollout[-1]["next", "truncated"].item() and not rollout[-1]["next", "terminated"].item()
    check_env_specs(env)


def test_generic_gym_like_env_info_probe():
    env = ToyLike(env="unused")
    env.set_info_dict_reader(default_info_dict_reader(["t"]))
    assert env.observation_spec["t"].dtype == torch.int64
    assert env.rollout(2)["next", "t"].tolist() == [1, 2]


def test_requested_key_never_reported_is_declared_as_zeros():
    # as TorchRL: a requested key missing from the probed infos gets a float32 scalar Unbounded spec, read as zeros
    env = ToyLike(env="unused")
    env.set_info_dict_reader(default_info_dict_reader(["t", "absent"]))
    spec = env.observation_spec["absent"]
    assert isinstance(spec, Unbounded) and spec.dtype == torch.float32 and spec.shape == torch.Size([])
    rollout = env.rollout(2)
    assert rollout["next", "absent"].tolist() == [0.0, 0.0]
    assert rollout["next", "t"].tolist() == [1, 2]


def test_default_reader_nested_masks_and_objects():
    reader = default_info_dict_reader()
    info = {
        "score": np.array([1.5, 2.5]),
        "_score": np.array([True, False]),
        "episode": {"r": np.array([3.0, 4.0]), "_r": np.array([True, True])},
        "name": np.array(["a", "b"], dtype=object),
        "final_obs": np.array([None, None]),
    }
    td = reader(info, TensorDict(batch_size=[2]))
    assert td["score"].tolist() == [1.5, 0.0]  # the masked-out row is zero-filled
    assert td["episode", "r"].tolist() == [3.0, 4.0]
    assert td["name"] == ["a", "b"]
    assert "final_obs" not in td.keys() and "_score" not in td.keys()
    spec = reader.info_spec
    assert spec["score"].dtype == torch.float64 and spec["score"].shape == torch.Size([])
    assert isinstance(spec["name"], NonTensor)
    # later calls zero-fill entries that are missing
    td2 = reader({}, TensorDict(batch_size=[2]))
    assert td2["score"].tolist() == [0.0, 0.0]


def test_default_reader_ignore_private_false_and_reset():
    reader = default_info_dict_reader(ignore_private=False)
    td = reader({"_hidden": 3}, TensorDict(batch_size=[]))
    assert td["_hidden"].item() == 3
    reader.reset()
    assert list(reader.info_spec.keys()) == []
    given = default_info_dict_reader(spec={"a": Unbounded(shape=(2,))})
    assert given.keys == ["a"]
    given.reset()
    assert list(given.info_spec.keys()) == ["a"]
    td = given({"a": [1, 2]}, TensorDict(batch_size=[]))
    assert td["a"].dtype == torch.float32 and td["a"].tolist() == [1.0, 2.0]


def test_default_reader_errors():
    with pytest.raises(TypeError, match="spec must be a list, dict or Composite"):
        default_info_dict_reader(["a"], spec=Unbounded(shape=()))


def test_custom_reader_subclass():
    class Doubler(BaseInfoDictReader):
        def __call__(self, info_dict, tensordict):
            tensordict.set("twice", torch.tensor(2 * info_dict.get("t", 0)))
            return tensordict

        @property
        def info_spec(self):
            return Composite(twice=Unbounded(shape=(), dtype=torch.int64))

    env = ToyLike(env="unused").set_info_dict_reader(Doubler())
    assert env.rollout(2)["next", "twice"].tolist() == [2, 4]
    with pytest.raises(TypeError):
        BaseInfoDictReader()


def test_default_reader_promotes_dtypes_across_infos():
    reader = default_info_dict_reader(["p"])
    reader.infer([{"p": 1}, {"p": 0.5}], batch_dims=0)
    assert reader.info_spec["p"].dtype == torch.float64
    td = reader({"p": 0.25}, TensorDict(batch_size=[]))
    assert td["p"].item() == 0.25
