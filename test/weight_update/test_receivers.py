"""Collectors on the receiver side of a weight-sync scheme (``weight_recv_schemes=`` /
``register_scheme_receiver``): weights sent by a trainer process are applied before the next batch."""
from __future__ import annotations

import multiprocessing as mp

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.collectors import Collector, MultiSyncCollector
from torchrl.envs import PendulumEnv
from torchrl.weight_update import MultiProcessWeightSyncScheme, NoWeightSyncScheme

FORK = mp.get_context("fork")


def _policy(value: float) -> TensorDictModule:
    net = nn.Linear(3, 1)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.fill_(value)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def _receiver(scheme, out, go, as_option: bool) -> None:
    policy = _policy(-1.0)
    if as_option:
        collector = Collector(PendulumEnv(), policy, frames_per_batch=5, total_frames=15, worker_idx=0,
                              weight_recv_schemes={"policy": scheme})
    else:
        collector = Collector(PendulumEnv(), policy, frames_per_batch=5, total_frames=15, worker_idx=0)
        collector.register_scheme_receiver({"policy": scheme})
    for batch in collector:
        out.put((batch["action"].unique().tolist(), collector.policy_version))
        go.get(timeout=20)
    collector.shutdown()
    scheme.shutdown()


@pytest.mark.parametrize("as_option", [True, False])
def test_collector_applies_the_senders_weights_before_each_batch(as_option):
    trained = _policy(0.5)
    scheme = MultiProcessWeightSyncScheme()
    scheme.init_on_sender(model_id="policy", model=trained, num_workers=1)
    out, go = FORK.Queue(), FORK.Queue()
    proc = FORK.Process(target=_receiver, args=(scheme, out, go, as_option))
    proc.start()
    try:
        scheme.connect()  # the receiver starts with the trainer's weights
        assert out.get(timeout=20) == ([0.5], 0)
        for value, version in ((2.0, 1), (3.0, 2)):
            with torch.no_grad():
                trained.module.bias.fill_(value)
            scheme.send()  # applied in the worker before its next batch
            go.put(True)
            assert out.get(timeout=20) == ([value], version)
        go.put(True)
    finally:
        proc.join(20)
    assert proc.exitcode == 0
    scheme.shutdown()


def test_receiver_schemes_are_checked():
    collector = Collector(PendulumEnv(), _policy(0.0), frames_per_batch=5, total_frames=5)
    try:
        with pytest.raises(TypeError, match="weight_recv_schemes must be a dict"):
            collector.register_scheme_receiver([NoWeightSyncScheme()])
        with pytest.raises(KeyError, match="unknown model_id 'critic'"):
            collector.register_scheme_receiver({"critic": NoWeightSyncScheme()})
    finally:
        collector.shutdown()
    with pytest.raises(ValueError, match="weight_recv_schemes"):
        MultiSyncCollector([PendulumEnv], None, frames_per_batch=5, weight_recv_schemes={"policy": NoWeightSyncScheme()})
