"""RemoteTensorDictReplayBuffer served over torch.distributed.rpc: extended from a collector process,
sampled in the trainer, checkpointed where its storage lives."""
from __future__ import annotations

import multiprocessing as mp
import socket

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import LazyTensorStorage, ListStorage, RemoteTensorDictReplayBuffer
from torchrl.data.replay_buffers import PrioritizedSampler, SamplerWithoutReplacement, TensorDictMaxValueWriter

FORK = mp.get_context("fork")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(name: str, rank: int, port: int) -> None:
    import torch.distributed.rpc as rpc

    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=60)
    rpc.init_rpc(name, rank=rank, world_size=3, rpc_backend_options=options)


def _owner(port: int) -> None:  # holds the buffer, serves calls until everyone is done
    import torch.distributed.rpc as rpc

    _init("buffer", 0, port)
    rpc.shutdown()


def _collector(port: int, out) -> None:
    import torch.distributed.rpc as rpc

    _init("collector", 1, port)
    try:
        rref = None
        while rref is None:  # the trainer creates the buffer on the owner, then hands out its RRef
            rref = rpc.rpc_sync("trainer", _get_rref)
        for i in range(5):
            data = TensorDict(obs=torch.full((10, 2), float(i)), step=torch.arange(10) + 10 * i, batch_size=[10])
            rref.rpc_sync().extend(data)
        out.put("extended")
    finally:
        rpc.shutdown()


_RREF = {}


def _get_rref():
    return _RREF.get("rb")


def _trainer(port: int, out, tmp: str) -> None:
    import torch.distributed.rpc as rpc

    _init("trainer", 2, port)
    try:
        rref = rpc.remote("buffer", RemoteTensorDictReplayBuffer,
                          kwargs={"storage": LazyTensorStorage(100), "batch_size": 16})
        _RREF["rb"] = rref
        out.put(("ready", None))
        out.put(("wait", None))
        while rref.rpc_sync().__len__() < 50:
            pass
        sample = rref.rpc_sync().sample()
        steps = sorted(set(sample["step"].tolist()))
        state = rref.rpc_sync().state_dict()
        rref.rpc_sync().dumps(tmp)  # the checkpoint is written where the storage lives
        fresh = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=16)
        fresh.loads(tmp)
        out.put(("done", (sample.shape[0], all(0 <= s < 50 for s in steps), len(fresh),
                          bool((fresh[:]["step"] == torch.arange(50)).all()), sorted(state))))
    finally:
        rpc.shutdown()


def test_remote_buffer_over_rpc(tmp_path):
    port = _free_port()
    out, col_out = FORK.Queue(), FORK.Queue()
    procs = [FORK.Process(target=_owner, args=(port,)),
             FORK.Process(target=_trainer, args=(port, out, str(tmp_path / "ckpt"))),
             FORK.Process(target=_collector, args=(port, col_out))]
    for p in procs:
        p.start()
    try:
        assert out.get(timeout=60)[0] == "ready"
        assert out.get(timeout=60)[0] == "wait"
        assert col_out.get(timeout=60) == "extended"
        kind, result = out.get(timeout=60)
        assert kind == "done"
        n, in_range, restored, same, keys = result
        assert (n, in_range, restored, same) == (16, True, 50, True)
        assert "_storage" in keys or "storage" in keys
    finally:
        for p in procs:
            p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]


@pytest.mark.parametrize("storage", [LazyTensorStorage(20), ListStorage(20)])
@pytest.mark.parametrize("sampler", [None, SamplerWithoutReplacement(), PrioritizedSampler(20, 0.7, 0.5)])
def test_local_use_with_storages_and_samplers(storage, sampler):
    kwargs = {"storage": storage, "batch_size": 4}
    if sampler is not None:
        kwargs["sampler"] = sampler
    rb = RemoteTensorDictReplayBuffer(**kwargs)
    rb.extend(TensorDict(obs=torch.arange(12.0), batch_size=[12]))
    assert len(rb) == 12 and rb.sample()["obs"].shape == (4,)
    assert rb.can_sample() and rb.client() is rb


def test_max_value_writer():
    rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="r"),
                                      batch_size=3)
    rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 2.0, 7.0, 0.5]), batch_size=[5]))
    assert sorted(rb[:]["r"].tolist()) == [2.0, 5.0, 7.0]


def test_extend_with_a_list_and_sample_argument_order():
    rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    rb.extend([TensorDict(obs=torch.tensor(float(i))) for i in range(4)])
    assert rb[:]["obs"].tolist() == [0.0, 1.0, 2.0, 3.0]
    sample, info = rb.sample(2, None, True)  # (batch_size, include_info, return_info)
    assert sample.shape == (2,) and "index" in info
