"""DistributedWeightSyncScheme across real processes (gloo on loopback)."""
from __future__ import annotations

import multiprocessing as mp
import os
import socket

import pytest
import torch

from test.weight_update.test_schemes import _linear

FORK = mp.get_context("fork")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, out) -> None:
    import torch.distributed as dist

    from torchrl.weight_update import DistributedWeightSyncScheme

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        scheme = DistributedWeightSyncScheme(timeout=20.0)
        if rank == 0:
            trained = _linear(0.5)
            scheme.init_on_sender(model_id="policy", model=trained)
            scheme.connect()  # every receiver has the initial weights when this returns (sync)
            with torch.no_grad():
                trained.bias.fill_(2.0)
            scheme.send()
            scheme.send(_linear(-3.0), worker_ids=[1])  # only rank 2
            out.put(("sender", "done"))
        else:
            policy = _linear(-1.0)
            scheme.init_on_receiver(model_id="policy", model=policy, worker_idx=rank - 1)
            scheme.connect()
            seen = [policy.bias.item()]
            got = scheme.receive(timeout=20.0)
            seen.append((got is not None, policy.bias.item()))
            seen.append(scheme.receive(timeout=0.5 if rank == 1 else 20.0) is not None)
            seen.append(policy.bias.item())
            out.put((rank, seen))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_distributed_scheme_across_ranks():
    world, port = 3, _free_port()
    out = FORK.Queue()
    procs = [FORK.Process(target=_rank_main, args=(r, world, port, out)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        results = dict(out.get(timeout=60) for _ in range(world))
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert results["sender"] == "done"
    assert results[1] == [0.5, (True, 2.0), False, 2.0]  # rank 1 was not sent the third update
    assert results[2] == [0.5, (True, 2.0), True, -3.0]


def test_needs_a_process_group():
    from torchrl.weight_update import DistributedWeightSyncScheme

    with pytest.raises(RuntimeError, match="needs an initialized process group"):
        DistributedWeightSyncScheme().init_on_sender(model_id="policy", model=_linear(0.0))
