"""``torchrl.weight_update``: strategies, the schemes used by hand across real processes, and the schemes
driving the collectors (``weight_sync_schemes={"policy": ...}``)."""
from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.multiprocessing  # noqa: F401  (registers the shared-memory tensor reductions)
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl import set_check_mode
from torchrl.collectors import Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.envs import PendulumEnv
from torchrl.weight_update import (
    DistributedWeightSyncScheme,
    MPTransport,
    MultiProcessWeightSyncScheme,
    NoWeightSyncScheme,
    SharedMemTransport,
    SharedMemWeightSyncScheme,
    TransportBackend,
    WeightStrategy,
    WeightSyncScheme,
)

FORK = mp.get_context("fork")


def _linear(bias: float) -> nn.Linear:
    net = nn.Linear(3, 1)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.fill_(bias)
    return net


# -- strategy -------------------------------------------------------------------------------------------------------
def test_strategy_formats_and_round_trip():
    source, dest = nn.Linear(2, 1), nn.Linear(2, 1)
    td = WeightStrategy().extract_weights(source)
    assert isinstance(td, TensorDict) and sorted(td.keys()) == ["bias", "weight"]
    sd = WeightStrategy("state_dict").extract_weights(source)
    assert sorted(sd) == ["bias", "weight"] and not isinstance(sd, TensorDict)
    for weights in (td, sd):
        dest = nn.Linear(2, 1)
        weight_before = dest.weight
        WeightStrategy().apply_weights(dest, weights)
        assert dest.weight is weight_before and torch.equal(dest.weight, source.weight)  # in place
    dest = nn.Linear(2, 1)
    WeightStrategy().apply_weights(dest, td, inplace=False)
    assert torch.equal(dest.weight, source.weight)
    with torch.no_grad():
        source.weight.add_(1.0)
    assert not torch.equal(dest.weight, source.weight)  # rebound to a copy, not to the source
    with pytest.raises(ValueError, match="extract_as must be 'tensordict' or 'state_dict'"):
        WeightStrategy("pickle")
    # a part of the weights updates that part (TorchRL 0.14.1 alike); extra entries are ignored
    dest = nn.Linear(2, 1)
    bias = dest.bias.detach().clone()
    WeightStrategy().apply_weights(dest, {"weight": torch.zeros(1, 2), "extra": torch.ones(1)})
    assert dest.weight.abs().sum().item() == 0.0 and torch.equal(dest.bias.detach(), bias)
    with set_check_mode(True), pytest.raises(KeyError, match="no entry 'bias'"):
        WeightStrategy().apply_weights(nn.Linear(2, 1), {"weight": torch.zeros(1, 2)})
    with pytest.raises(TypeError, match="cannot write weights into a int"):
        WeightStrategy().apply_weights(3, td)


def test_from_backend():
    assert type(WeightSyncScheme.from_backend("none")) is NoWeightSyncScheme
    assert type(WeightSyncScheme.from_backend("shared")) is SharedMemWeightSyncScheme
    scheme = WeightSyncScheme.from_backend("process", strategy="state_dict")
    assert type(scheme) is MultiProcessWeightSyncScheme and scheme.strategy.extract_as == "state_dict"
    assert type(WeightSyncScheme.from_backend("distributed", sync=False)) is DistributedWeightSyncScheme
    with pytest.raises(ValueError, match="the ray weight transport is not part of this package yet"):
        WeightSyncScheme.from_backend("ray")
    with pytest.raises(ValueError, match="unknown backend 'carrier-pigeon'"):
        WeightSyncScheme.from_backend("carrier-pigeon")


# -- by hand, across processes --------------------------------------------------------------------------------------
def _mp_worker(scheme, out):
    policy = _linear(-1.0)
    scheme.init_on_receiver(model_id="policy", model=policy, worker_idx=1)
    scheme.connect()
    out.put(float(policy.bias))  # the initial weights, applied by connect()
    got = scheme.receive(timeout=10.0)  # the next update, applied by the receiving thread
    out.put((got is not None, float(policy.bias)))
    scheme.shutdown()


def test_multiprocess_scheme_by_hand():
    trained = _linear(0.5)
    scheme = MultiProcessWeightSyncScheme()
    scheme.init_on_sender(model_id="policy", model=trained, num_workers=2)
    assert isinstance(scheme.sender_transports[1], MPTransport) and isinstance(scheme.sender_transports[1], TransportBackend)
    out = FORK.Queue()
    proc = FORK.Process(target=_mp_worker, args=(scheme, out))
    proc.start()
    try:
        scheme.connect()
        assert out.get(timeout=10) == 0.5
        with torch.no_grad():
            trained.bias.fill_(2.0)
        scheme.send(worker_ids=1)  # sync: returns once worker 1 applied the weights
        assert out.get(timeout=10) == (True, 2.0)
    finally:
        proc.join(10)
    assert proc.exitcode == 0


def _shm_worker(scheme, out):
    policy = _linear(-1.0)
    scheme.init_on_receiver(model_id="policy", model=policy, worker_idx=0)
    scheme.connect()
    out.put(float(policy.bias))
    got = scheme.receive(timeout=10.0)
    out.put((got is not None, float(policy.bias)))


def test_shared_memory_scheme_by_hand():
    trained = _linear(0.5)
    scheme = SharedMemWeightSyncScheme()
    scheme.init_on_sender(model_id="policy", model=trained, num_workers=1)
    assert scheme.weights["bias"].is_shared() and isinstance(scheme.shared_transport, SharedMemTransport)
    out = FORK.Queue()
    proc = FORK.Process(target=_shm_worker, args=(scheme, out))
    proc.start()
    try:
        scheme.connect()
        assert out.get(timeout=10) == 0.5  # bound to the shared copy of the trainer's weights
        with torch.no_grad():
            trained.bias.fill_(3.0)
        assert float(scheme.weights["bias"]) == 0.5  # a copy: nothing moves before send()
        scheme.send()
        assert out.get(timeout=10) == (True, 3.0)
    finally:
        proc.join(10)
    assert proc.exitcode == 0


def test_roles_and_timeouts():
    scheme = MultiProcessWeightSyncScheme()
    with pytest.raises(RuntimeError, match=r"send\(\): call init_on_sender\(\) first"):
        scheme.send()
    scheme.init_on_sender(model_id="policy", model=_linear(0.0), num_workers=1)
    shm = SharedMemWeightSyncScheme()
    shm.init_on_sender(model_id="policy", model=_linear(0.0), num_workers=1)
    copy = pickle.loads(ForkingPickler.dumps(shm))  # what a spawned worker gets: the shared buffer, no role
    assert not copy.initialized_on_sender and copy.model is None and copy.weights["bias"].is_shared()
    with pytest.raises(RuntimeError, match="was initialized as the sender"):
        scheme.init_on_receiver(model_id="policy", model=_linear(0.0))
    transport = MPTransport(queue.Queue(), queue.Queue(), timeout=0.2)
    transport.send_weights_async(_linear(0.0))
    with pytest.raises(TimeoutError, match="did not acknowledge weight update 1 within 0.2 s"):
        transport.wait_ack()
    with pytest.raises(TimeoutError, match="worker 0 received no initial weights"):
        MPTransport(queue.Queue(), timeout=0.1).setup_connection_and_weights_on_receiver(worker_idx=0, model=_linear(0.0))
    with pytest.raises(RuntimeError, match="carries no shared buffer"):
        SharedMemWeightSyncScheme().init_on_receiver(model_id="policy", model=_linear(0.0))


def test_multiprocess_scheme_without_sync_does_not_wait():
    scheme = MultiProcessWeightSyncScheme(sync=False)
    scheme.init_on_sender(model_id="policy", model=_linear(0.0), num_workers=2, timeout=0.2)
    scheme.connect()
    scheme.send()  # no worker is listening: a sync send would raise TimeoutError after 0.2 s
    weights, acks, _ = scheme._queues[1]
    assert acks is None and weights.get(timeout=5)[0] == 1  # the initial weights, then the update
    assert weights.get(timeout=5)[0] == 2


def test_no_sync_scheme_does_nothing():
    scheme = NoWeightSyncScheme()
    model = _linear(1.0)
    scheme.init_on_sender(model_id="policy", model=model)
    scheme.connect()
    scheme.send(_linear(5.0))
    assert model.bias.item() == 1.0 and scheme.synchronized_on_sender


# -- driven by collectors -----------------------------------------------------------------------------------------
def _actions(batch) -> list[float]:
    return sorted(set(batch["action"].flatten().tolist()))


def _next_settled(it, collector_cls, expected: list[float]) -> list[float]:
    """The actions of the next batch collected entirely after a change. Sync: the very next batch. Async:
    batches requested before the change may still come (a slow worker's old batch can arrive after the other
    worker's new ones), so batches are read until two in a row show ``expected`` (at most 40 reads)."""
    if collector_cls is not MultiAsyncCollector:
        return _actions(next(it))
    got, streak = None, 0
    for _ in range(40):
        got = _actions(next(it))
        streak = streak + 1 if got == expected else 0
        if streak == 2:
            break
    return got


@pytest.mark.parametrize("collector_cls", [MultiSyncCollector, MultiAsyncCollector])
@pytest.mark.parametrize(
    "scheme_cls,before,after",
    [
        (SharedMemWeightSyncScheme, [0.5], [0.5]),  # shared memory: workers run the trainer's weights at once
        (MultiProcessWeightSyncScheme, [-0.25], [0.5]),  # copies: new weights after update_policy_weights_()
        (NoWeightSyncScheme, [-0.25], [-0.25]),  # the workers keep the weights they were built with
    ],
)
def test_process_collectors(collector_cls, scheme_cls, before, after):
    net = _linear(-0.25)
    policy = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
    collector = collector_cls([PendulumEnv, PendulumEnv], policy, frames_per_batch=8, total_frames=-1,
                              weight_sync_schemes={"policy": scheme_cls()})
    try:
        it = iter(collector)
        assert _actions(next(it)) == [-0.25]
        with torch.no_grad():
            net.bias.fill_(0.5)
        assert _next_settled(it, collector_cls, before) == before
        collector.update_policy_weights_()
        assert _next_settled(it, collector_cls, after) == after
    finally:
        collector.shutdown()


def test_process_collector_updates_chosen_workers():
    net = _linear(-0.25)
    policy = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
    collector = MultiSyncCollector([PendulumEnv, PendulumEnv], policy, frames_per_batch=8, total_frames=-1,
                                   cat_results="stack", weight_sync_schemes={"policy": MultiProcessWeightSyncScheme()})
    try:
        it = iter(collector)
        next(it)
        new = TensorDictModule(_linear(1.5), in_keys=["observation"], out_keys=["action"])
        collector.update_policy_weights_(TensorDict.from_module(new), worker_ids=[1])
        batch = next(it)
        assert _actions(batch[0]) == [-0.25] and _actions(batch[1]) == [1.5]
        assert collector.get_policy_version() == 1
    finally:
        collector.shutdown()


def test_shared_weights_have_no_per_worker_update():
    policy = TensorDictModule(_linear(0.0), in_keys=["observation"], out_keys=["action"])
    collector = MultiSyncCollector([PendulumEnv, PendulumEnv], policy, frames_per_batch=8,
                                   weight_sync_schemes={"policy": SharedMemWeightSyncScheme()})
    try:
        with pytest.raises(ValueError, match="the workers share one copy of the weights; worker_ids must be None"):
            collector.update_policy_weights_(worker_ids=[0])
    finally:
        collector.shutdown()


def test_single_collector_sends_through_the_scheme():
    net = _linear(0.0)
    policy = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
    scheme = MultiProcessWeightSyncScheme()
    collector = Collector(PendulumEnv(), policy, frames_per_batch=4, total_frames=-1, weight_sync_schemes={"policy": scheme})
    assert scheme.initialized_on_sender and scheme.synchronized_on_sender and scheme.context is collector
    collector.update_policy_weights_(TensorDictModule(_linear(0.75), in_keys=["observation"], out_keys=["action"]))
    assert _actions(next(iter(collector))) == [0.75]


def test_collector_scheme_errors():
    policy = TensorDictModule(_linear(0.0), in_keys=["observation"], out_keys=["action"])
    with pytest.raises(TypeError, match=r"weight_sync_schemes\['policy'\] must be a WeightSyncScheme, got object"):
        Collector(PendulumEnv(), policy, frames_per_batch=4, weight_sync_schemes={"policy": object()})
    with pytest.raises(KeyError, match="has a scheme for 'critic'; this collector only runs 'policy'"):
        Collector(PendulumEnv(), policy, frames_per_batch=4, weight_sync_schemes={"critic": NoWeightSyncScheme()})
    with pytest.raises(ValueError, match="either weight_updater or weight_sync_schemes"):
        MultiSyncCollector([PendulumEnv], policy, frames_per_batch=4, weight_updater=lambda: None,
                           weight_sync_schemes={"policy": NoWeightSyncScheme()})
    with pytest.raises(ValueError, match="weight_recv_schemes=.*receiver-side weight-sync schemes are taken by Collector"):
        MultiSyncCollector([PendulumEnv], policy, frames_per_batch=4, weight_recv_schemes={"policy": NoWeightSyncScheme()})


@pytest.mark.parametrize("module", ["_strategy", "_no_sync", "_shared_mem", "_multiprocess", "_distributed", "_rpc"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"torchrl.weight_update.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
