"""Weight updaters: in-place copies, hooks, registration, server weights, errors."""
from __future__ import annotations

import gc

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.collectors import Collector, MultiProcessedWeightUpdater, VanillaWeightUpdater, WeightUpdaterBase
from torchrl.collectors.weight_update import as_weights
from torchrl.envs import PendulumEnv


def _linear(seed: int) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(3, 1)


def test_as_weights_accepts_module_tensordict_and_state_dict():
    m = _linear(0)
    from_module = as_weights(m)
    assert set(from_module.keys()) == {"weight", "bias"} and not from_module["weight"].requires_grad
    from_sd = as_weights(TensorDictModule(m, ["observation"], ["action"]).state_dict())
    assert torch.equal(from_sd["module", "weight"], m.weight.data)
    assert as_weights(None) is None
    with pytest.raises(TypeError, match="expected weights as an nn.Module, a TensorDict or a state_dict, got int"):
        as_weights(3)


def test_vanilla_updater_copies_in_place():
    policy, trained = _linear(0), _linear(1)
    weight_before = policy.weight
    updater = VanillaWeightUpdater(policy_weights=TensorDict.from_module(policy))
    updater(trained)
    assert policy.weight is weight_before
    assert torch.equal(policy.weight, trained.weight) and torch.equal(policy.bias, trained.bias)


def test_vanilla_updater_uses_weight_getter_when_called_without_weights():
    policy, trained = _linear(0), _linear(1)
    updater = VanillaWeightUpdater(weight_getter=lambda: TensorDict.from_module(trained), policy_weights=TensorDict.from_module(policy))
    updater.push_weights()
    assert torch.equal(policy.weight, trained.weight)


def test_vanilla_updater_errors():
    policy = _linear(0)
    updater = VanillaWeightUpdater(policy_weights=TensorDict.from_module(policy))
    with pytest.raises(KeyError, match="the new weights have no entry 'bias'"):
        updater(TensorDict(weight=torch.zeros(1, 3)))
    with pytest.raises(ValueError, match="worker_ids must be None"):
        updater(_linear(1), worker_ids=[0])
    assert VanillaWeightUpdater.from_policy(lambda td: td) is None
    assert isinstance(VanillaWeightUpdater.from_policy(policy), VanillaWeightUpdater)
    assert WeightUpdaterBase.from_policy(policy) is None


def test_multiprocessed_updater_targets_devices():
    shared = TensorDict.from_module(_linear(0)).data.clone().share_memory_()
    trained = _linear(1)
    updater = MultiProcessedWeightUpdater(get_server_weights=lambda: TensorDict.from_module(trained),
                                          policy_weights={"cpu": shared})
    assert updater.all_worker_ids() == [torch.device("cpu")]
    updater()
    assert torch.equal(shared["weight"], trained.weight.data)
    with pytest.raises(KeyError, match="no weights for worker/device 'meta'"):
        updater(trained, worker_ids=["meta"])


def test_post_hooks_and_registration():
    class Recorder(WeightUpdaterBase):
        def _push_weights(self, policy_or_weights=None, worker_ids=None):
            self.pushed = (policy_or_weights, worker_ids)

    updater = Recorder()
    calls = []
    updater.register_post_hook(lambda: calls.append(1))
    updater(TensorDict(w=1.0), worker_ids=3)
    assert calls == [1] and updater.pushed[1] == 3 and updater.post_hooks
    collector = Collector(PendulumEnv(), None, frames_per_batch=4, total_frames=4)
    updater.register_collector(collector)
    assert updater.collector is collector and updater.collectors == [collector]
    updater.increment_version()
    assert collector.policy_version == 1
    del collector
    gc.collect()
    assert updater.collector is None


def test_abstract_base_cannot_be_instantiated():
    with pytest.raises(TypeError, match="abstract"):
        WeightUpdaterBase()


def test_collector_uses_custom_updater():
    class Counting(WeightUpdaterBase):
        count = 0

        def _push_weights(self, policy_or_weights=None, worker_ids=None):
            Counting.count += 1

    policy = TensorDictModule(_linear(0), ["observation"], ["action"])
    collector = Collector(PendulumEnv(), policy, frames_per_batch=4, total_frames=8, weight_updater=Counting)
    assert isinstance(collector.weight_updater, Counting)
    collector.update_policy_weights_()
    collector.update_policy_weights_(weights=TensorDict())
    assert Counting.count == 2 and collector.get_policy_version() == 2
