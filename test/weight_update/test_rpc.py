"""RPCWeightSyncScheme across real processes (torch.distributed.rpc over TensorPipe, loopback)."""
from __future__ import annotations

import multiprocessing as mp
import socket

import pytest
import torch

from test.weight_update.test_schemes import _linear
from torchrl.weight_update import RPCTransport, RPCWeightSyncScheme

FORK = mp.get_context("fork")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _options(port: int):
    import torch.distributed.rpc as rpc

    return rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=60)


def _receiver(port: int, out, go) -> None:
    import torch.distributed.rpc as rpc

    rpc.init_rpc("COLLECTOR_NODE_1", rank=1, world_size=2, rpc_backend_options=_options(port))
    try:
        policy = _linear(-1.0)
        scheme = RPCWeightSyncScheme()
        scheme.init_on_receiver(model_id="policy", model=policy)
        scheme.connect()  # waits for the sender's initial weights
        out.put(float(policy.bias))
        assert scheme.receive(timeout=0) is None  # nothing new yet
        out.put("ready")
        go.get(timeout=30)  # the sender sent twice: the latest weights win
        got = scheme.receive(timeout=10)
        out.put((got is not None, float(policy.bias)))
    finally:
        rpc.shutdown()


def _sender(port: int, out, go) -> None:
    import torch.distributed.rpc as rpc

    rpc.init_rpc("TRAINER", rank=0, world_size=2, rpc_backend_options=_options(port))
    try:
        trained = _linear(0.5)
        scheme = RPCWeightSyncScheme()
        scheme.init_on_sender(model_id="policy", model=trained, worker_ranks=[1])
        assert isinstance(scheme.sender_transports[0], RPCTransport)
        scheme.connect()
        out.get(timeout=30)
        for value in (2.0, 3.0):
            with torch.no_grad():
                trained.bias.fill_(value)
            scheme.send()  # returns once the receiver filed them
        go.put(True)
    finally:
        rpc.shutdown()


def test_rpc_scheme_between_processes():
    port = _free_port()
    out, go, sender_out = FORK.Queue(), FORK.Queue(), FORK.Queue()
    receiver = FORK.Process(target=_receiver, args=(port, out, go))
    sender = FORK.Process(target=_sender, args=(port, sender_out, go))
    receiver.start()
    sender.start()
    try:
        assert out.get(timeout=60) == 0.5
        assert out.get(timeout=30) == "ready"
        sender_out.put("go")
        assert out.get(timeout=30) == (True, 3.0)
    finally:
        sender.join(30)
        receiver.join(30)
    assert sender.exitcode == 0 and receiver.exitcode == 0


def test_rpc_scheme_options():
    with pytest.raises(ValueError, match="give collector_infos"):
        RPCWeightSyncScheme().init_on_sender(model_id="policy", model=_linear(0.0))
    with pytest.raises(ValueError, match="give collector_info"):
        RPCTransport()._destination()
    assert RPCTransport(collector_info="node-a")._destination() == "node-a"
    with pytest.raises(RuntimeError, match="not a receiver's"):
        RPCTransport().receive_weights(0)
