"""The contract every collector backend meets; each backend's tests subclass ``BackendContract``.

A subclass sets ``backend`` (the name given to ``torchrl.collectors.register_backend``) and, when the
backend runs several collectors, ``num_collectors``. The contract builds ``Collector(...,
backend=self.backend)`` on ``PendulumEnv`` with a linear deterministic policy and checks, for free: batches
have ``frames_per_batch`` frames with TorchRL's keys (``("collector", "traj_ids")``, ``"next"`` done entries,
the policy's outputs) and a last dim named ``"time"``; iteration stops at ``total_frames``; the same seed
gives the same data; ``update_policy_weights_()`` makes later batches follow the new weights; ``state_dict``
/ ``load_state_dict`` round-trip; ``shutdown`` is final and may be called twice.

Adding a backend: write its builder (``builder(sync, args, kwargs) -> collector``, see ``register_backend``
in ``torchrl/collectors/_single.py``; a multi-process one plugs a ``Transport`` under ``MultiCollector``,
``torchrl/collectors/_multi.py``), register it where it is defined, then subclass this contract in
``test/collectors/test_<backend>.py``.
"""
from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.collectors import Collector
from torchrl.envs import PendulumEnv


def make_env():
    return PendulumEnv()


def make_policy(scale: float = 0.0) -> TensorDictModule:
    net = nn.Linear(3, 1)
    with torch.no_grad():
        net.weight.fill_(scale)
        net.bias.fill_(scale)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


class BackendContract:
    backend: str = "direct"
    num_collectors: int | None = None
    frames_per_batch = 20
    total_frames = 60

    def collector(self, policy=None, **options):
        kwargs = dict(frames_per_batch=self.frames_per_batch, total_frames=self.total_frames, backend=self.backend)
        if self.num_collectors is not None:
            kwargs["num_collectors"] = self.num_collectors
        kwargs.update(options)
        return Collector(make_env, policy if policy is not None else make_policy(), **kwargs)

    def test_contract_batches_and_keys(self):
        collector = self.collector()
        try:
            batches = list(collector)
        finally:
            collector.shutdown()
        assert sum(b.numel() for b in batches) == self.total_frames
        for batch in batches:
            assert batch.numel() == self.frames_per_batch
            assert batch.names[-1] == "time"
            keys = batch.keys(True, True)
            for key in ("observation", "action", ("collector", "traj_ids"), ("next", "reward"),
                        ("next", "done"), ("next", "terminated"), ("next", "observation")):
                assert key in keys, key

    def test_contract_seeded_runs_repeat(self):
        runs = []
        for _ in range(2):
            collector = self.collector()
            try:
                collector.set_seed(7)
                runs.append(torch.cat([b.reshape(-1)["observation"] for b in collector]))
            finally:
                collector.shutdown()
        assert torch.equal(runs[0], runs[1])

    def test_contract_policy_weights_follow_updates(self):
        policy = make_policy(0.0)
        collector = self.collector(policy, total_frames=-1)
        try:
            it = iter(collector)
            first = next(it)
            assert (first["action"] == 0).all()
            with torch.no_grad():
                policy.module.bias.fill_(0.5)
            collector.update_policy_weights_()
            next(it)  # a batch in flight may still use the old weights
            later = next(it)
            assert (later["action"] == 0.5).all()
        finally:
            collector.shutdown()

    def test_contract_state_dict_round_trip(self):
        collector = self.collector()
        try:
            next(iter(collector))
            state = collector.state_dict()
        finally:
            collector.shutdown()
        fresh = self.collector()
        try:
            fresh.load_state_dict(state)
            assert fresh.state_dict().keys() == state.keys()
        finally:
            fresh.shutdown()

    def test_contract_shutdown_twice(self):
        collector = self.collector()
        next(iter(collector))
        collector.shutdown()
        collector.shutdown()
