"""Collectors: batch keys and shapes across the random phase, trajectory batches, evaluation."""
import torch
from tensordict.nn import TensorDictModule

import parity
from torchrl.collectors import Collector
from torchrl.envs import GymEnv
from torchrl.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal


def _actor(env):
    net = torch.nn.Sequential(MLP(in_features=3, out_features=2, num_cells=[8]), NormalParamExtractor())
    module = TensorDictModule(net, ["observation"], ["loc", "scale"])
    return ProbabilisticActor(module, in_keys=["loc", "scale"], spec=env.action_spec, distribution_class=TanhNormal,
                              return_log_prob=True)


def scenario_init_random_frames_keys():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    collector = Collector(env, _actor(env), frames_per_batch=10, total_frames=30, init_random_frames=20)
    out = []
    for batch in collector:
        out.append(parity.structure(batch))
        out.append(batch["loc"].abs().sum().item() == 0)
    collector.shutdown()
    return out


def scenario_init_random_frames_not_multiple():
    env = GymEnv("Pendulum-v1")
    collector = Collector(env, _actor(env), frames_per_batch=8, total_frames=24, init_random_frames=5)
    out = [(batch["scale"] == 0).all().item() for batch in collector]
    collector.shutdown()
    return out
