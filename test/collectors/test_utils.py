"""``torchrl.collectors.utils``: split_trajectories known answers, layouts and errors."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from torchrl.collectors import utils
from torchrl.collectors.utils import DEFAULT_DONE_KEYS, split_trajectories


def _batch(ids, *, prefix="collector"):
    ids = torch.as_tensor(ids)
    data = TensorDict(
        {"obs": torch.arange(ids.numel(), dtype=torch.float32).reshape(ids.shape), "next": {"done": torch.zeros(*ids.shape, 1, dtype=torch.bool)}},
        batch_size=ids.shape,
    )
    if prefix is not None:
        data.set((prefix, "traj_ids") if prefix else "traj_ids", ids)
    return data


def test_padded_layout_and_mask():
    out = split_trajectories(_batch([0, 0, 0, 1, 1, 2]))
    assert out.batch_size == torch.Size([3, 3])
    assert out["obs"].tolist() == [[0, 1, 2], [3, 4, 0], [5, 0, 0]]
    assert out["collector", "mask"].tolist() == [[True] * 3, [True, True, False], [True, False, False]]
    assert out["collector", "traj_ids"].tolist() == [[0, 0, 0], [1, 1, 0], [2, 0, 0]]
    assert out["next", "done"].shape == (3, 3, 1)


def test_rows_of_a_batched_rollout_are_split_per_env():
    # env 0 runs trajectory 0 then 2, env 1 runs trajectory 1 all along
    out = split_trajectories(_batch([[0, 0, 2, 2], [1, 1, 1, 1]]))
    assert out.batch_size == torch.Size([3, 4])
    assert out["obs"].tolist() == [[0, 1, 0, 0], [2, 3, 0, 0], [4, 5, 6, 7]]
    assert out["collector", "mask"].sum(-1).tolist() == [2, 2, 4]


def test_ids_recovered_from_done_flags_without_ids():
    data = _batch([0, 0, 0, 0, 0], prefix=None)
    data["next", "done"][1] = True
    out = split_trajectories(data)
    assert out["obs"].tolist() == [[0, 1, 0], [2, 3, 4]]
    assert out["mask"].tolist() == [[True, True, False], [True, True, True]]


def test_trajectory_key_and_custom_done_key():
    data = _batch([0, 0, 1], prefix=None)
    data.set(("meta", "tid"), torch.tensor([5, 5, 9]))
    out = split_trajectories(data, trajectory_key=("meta", "tid"))
    assert out["meta", "mask"].tolist() == [[True, True], [True, False]]
    data2 = _batch([0, 0, 0], prefix=None)
    data2["next", "stop"] = torch.tensor([[True], [False], [False]])
    out2 = split_trajectories(data2, done_key="stop")
    assert out2["obs"].tolist() == [[0, 0], [1, 2]]


def test_no_prefix_when_no_collector_entry():
    out = split_trajectories(_batch([0, 1, 1], prefix=""))
    assert "mask" in out.keys() and out["mask"].tolist() == [[True, False], [True, True]]


def test_as_nested():
    out = split_trajectories(_batch([0, 0, 0, 1, 1]), as_nested=True)
    assert out.batch_size == torch.Size([2])
    assert out[0]["obs"].tolist() == [0, 1, 2] and out[1]["obs"].tolist() == [3, 4]


def test_missing_ids_and_done_raise():
    data = TensorDict({"obs": torch.zeros(3)}, [3])
    with pytest.raises(KeyError, match=r"neither the trajectory ids 'traj_ids' nor the done flags \('next', 'done'\)"):
        split_trajectories(data)
    with pytest.raises(ValueError, match="no batch dimension"):
        split_trajectories(TensorDict({"obs": torch.zeros(())}, []))
    # TorchRL raises TypeError for a missing done entry: ours is both
    with pytest.raises(TypeError, match=r"done flags \('next', 'next', 'done'\)"):
        split_trajectories(data, done_key=("next", "done"))  # done_key is read under "next"
    nested = TensorDict({"obs": torch.zeros(3), "traj": {"id": torch.zeros(3, dtype=torch.long)}}, [3])
    with pytest.raises(AttributeError, match="the trajectory ids 'traj' must be a tensor, got a TensorDict"):
        split_trajectories(nested, trajectory_key="traj")  # TorchRL: AttributeError; ours is a TypeError too


def test_nested_keys_known_answer():
    """TorchRL 0.14.1's output for a nested trajectory key and for nested done flags."""
    obs = torch.arange(8.0)
    data = TensorDict({"traj": {"id": torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])}, "obs": obs,
                       "next": {"done": torch.zeros(8, 1, dtype=torch.bool), "obs": obs + 1}}, [8])
    out = split_trajectories(data, trajectory_key=("traj", "id"))
    assert out.batch_size == (3, 3)
    assert set(out.keys(True, True)) == {("next", "done"), ("next", "obs"), ("traj", "id"), ("traj", "mask"), "obs"}
    assert out["traj", "id"].flatten().tolist() == [0, 0, 0, 1, 1, 0, 2, 2, 2]
    assert out["traj", "mask"].flatten().tolist() == [True] * 5 + [False] + [True] * 3
    assert out["next", "obs"].flatten().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 6.0, 7.0, 8.0]
    done = torch.tensor([0, 0, 1, 0, 1, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
    agents = TensorDict({"obs": obs, "next": {"agents": {"done": done}, "done": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
    out = split_trajectories(agents, done_key=("agents", "done"))
    assert out.batch_size == (3, 3) and out["traj_ids"].flatten().tolist() == [0, 0, 0, 1, 1, 0, 2, 2, 2]
    assert out["obs"].flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 5.0, 6.0, 7.0]
    # a missing nested trajectory key is computed from the done flags and stored there
    out = split_trajectories(data, trajectory_key=("traj", "missing"))
    assert out.batch_size == (1, 8) and out["traj", "missing"].flatten().tolist() == [0] * 8


def test_module_reexports_torchrl_names():
    assert DEFAULT_DONE_KEYS == ("done", "truncated", "terminated")
    for name in ("pad", "TensorDict", "TensorDictBase", "NestedKey", "set_lazy_legacy", "implement_for", "Buffer",
                 "NonTensorData", "NonTensorStack", "Parameter"):
        assert hasattr(utils, name), name


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_round_trip_keeps_every_step(lengths):
    ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    data = _batch(ids)
    out = split_trajectories(data)
    mask = out["collector", "mask"]
    assert out.batch_size == torch.Size([len(lengths), max(lengths)])
    assert mask.sum(-1).tolist() == lengths
    assert torch.equal(out["obs"][mask], data["obs"])
