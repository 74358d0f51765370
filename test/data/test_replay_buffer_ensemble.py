"""``ReplayBufferEnsemble``: sampling across members, routed writes, conditional updates."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import LazyTensorStorage, ReplayBufferEnsemble, RoundRobinWriter, TensorDictReplayBuffer


def member(value: float, n: int = 6, **kwargs) -> TensorDictReplayBuffer:
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), **kwargs)
    if n:  # an empty extend raises, as in TorchRL
        rb.extend(TensorDict(x=torch.full((n,), value), batch_size=[n]))
    return rb


def test_sample_from_all_members():
    ensemble = ReplayBufferEnsemble(member(0.0), member(1.0), member(2.0), sample_from_all=True, batch_size=6)
    batch = ensemble.sample()
    assert batch.shape == (3, 2)
    assert batch["x"].tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    assert batch["buffer_ids"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert len(ensemble) == 3 and len(ensemble[1]) == 6


def test_member_probabilities_and_transforms():
    rb0 = member(0.0)
    rb1 = member(1.0, transform=lambda td: td.set("x", td["x"] * 10))
    ensemble = ReplayBufferEnsemble(rb0, rb1, p=[0.0, 1.0], num_buffer_sampled=2, batch_size=4)
    batch = ensemble.sample()
    assert (batch["x"] == 10.0).all() and (batch["buffer_ids"] == 1).all()


def test_routed_writes():
    rb0, rb1 = member(0.0, n=0), member(1.0, n=0)
    ensemble = ReplayBufferEnsemble(rb0, rb1, routing_key="member", sample_from_all=True, batch_size=2)
    index = ensemble.extend(TensorDict(x=torch.arange(5.0), member=torch.tensor([0, 1, 1, 0, 1]), batch_size=[5]))
    assert index["buffer_ids"].tolist() == [0, 1, 1, 0, 1] and index["index"].tolist() == [0, 0, 1, 1, 2]
    assert rb0.storage.get(torch.arange(2))["x"].tolist() == [0.0, 3.0]
    with pytest.raises(ValueError, match=r"routing ids must lie in \[0, 2\)"):
        ensemble.extend(TensorDict(x=torch.zeros(1), member=torch.tensor([5]), batch_size=[1]))
    plain = ReplayBufferEnsemble(member(0.0), member(1.0))
    with pytest.raises(RuntimeError, match="needs routing_key= or routing_dim="):
        plain.extend(TensorDict(x=torch.zeros(1), batch_size=[1]))


def test_routing_dim_and_end_streams():
    rb0, rb1 = member(0.0, n=0), member(1.0, n=0)
    ensemble = ReplayBufferEnsemble(rb0, rb1, routing_dim=0)
    data = TensorDict(x=torch.arange(6.0).reshape(2, 3), next=TensorDict(
        done=torch.zeros(2, 3, 1, dtype=torch.bool), truncated=torch.zeros(2, 3, 1, dtype=torch.bool),
        batch_size=[2, 3]), batch_size=[2, 3])
    index = ensemble.extend(data)
    assert index["buffer_ids"].tolist() == [[0, 0, 0], [1, 1, 1]]
    assert rb1.storage.get(torch.arange(3))["x"].tolist() == [3.0, 4.0, 5.0]
    ensemble.end_streams()
    assert rb0.storage.get(torch.arange(3))["next", "done"].squeeze(-1).tolist() == [False, False, True]
    assert rb1.storage.get(2)["next", "truncated"].item()


def test_update_if_present_routes_to_members():
    rbs = [member(float(i), writer=RoundRobinWriter(track_generations=True)) for i in range(2)]
    ensemble = ReplayBufferEnsemble(*rbs, sample_from_all=True, batch_size=4)
    batch, info = ensemble.sample(return_info=True)
    generation = ensemble.writer.generations_of(info["index"])
    result = ensemble.update_if_present(index=info["index"], generation=generation, patch={"x": torch.full((2, 2), 7.0)})
    assert result.updated.all()
    assert (rbs[0].storage.get(info["index"]["index"][0])["x"] == 7.0).all()
