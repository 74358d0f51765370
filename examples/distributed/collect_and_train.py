"""Distributed collection feeding a PPO learner, on any collector backend.

The learner (this process) trains a Gaussian policy on Pendulum with ``ClipPPOLoss``; collection runs on
``--nodes`` collectors built through ``Collector(..., backend=...)``; after every optimizer phase the new
weights are pushed to the collectors, which apply them before their next batch.

Single machine (every backend runs its nodes locally)::

    python examples/distributed/collect_and_train.py --backend distributed   # torch.distributed (gloo)
    python examples/distributed/collect_and_train.py --backend rpc           # torch.distributed.rpc
    python examples/distributed/collect_and_train.py --backend ray           # Ray actors (pip install ray)
    python examples/distributed/collect_and_train.py --backend process       # plain processes, for reference

A cluster, with the same script:

    # SLURM: one job per collection node, submitted by submitit from the learner's job
    python examples/distributed/collect_and_train.py --backend submitit --nodes 8 \\
        --slurm-partition train --slurm-cpus-per-task 8
    # Ray: an existing cluster (``ray start --head`` on one machine, ``ray start --address=...`` on the others)
    python examples/distributed/collect_and_train.py --backend ray --ray-address auto --nodes 16
"""
from __future__ import annotations

import argparse
import time

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl.collectors import Collector
from torchrl.envs import GymEnv, StepCounter, TransformedEnv
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE


def make_env():
    return TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())


def make_actor() -> ProbabilisticActor:
    net = nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 2), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                              distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)


def backend_options(args) -> dict:
    if args.backend == "submitit":
        slurm = {"timeout_min": args.timeout_min, "folder": args.log_folder}
        if args.slurm_partition:
            slurm.update(slurm_partition=args.slurm_partition, slurm_cpus_per_task=args.slurm_cpus_per_task)
        return {"slurm_kwargs": slurm}
    if args.backend == "ray":
        init = {"address": args.ray_address} if args.ray_address else {}
        return {"ray_init_config": init}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="distributed", choices=["distributed", "rpc", "submitit", "ray", "process"])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--frames-per-batch", type=int, default=1_000)
    parser.add_argument("--slurm-partition", default=None)
    parser.add_argument("--slurm-cpus-per-task", type=int, default=8)
    parser.add_argument("--timeout-min", type=int, default=30)
    parser.add_argument("--log-folder", default="log_test")
    parser.add_argument("--ray-address", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    actor = make_actor()
    critic = ValueOperator(nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 1)), in_keys=["observation"])
    loss = ClipPPOLoss(actor, critic)
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    optim = torch.optim.Adam(loss.parameters(), lr=3e-4)

    start = time.perf_counter()
    collector = Collector(make_env, actor, frames_per_batch=args.frames_per_batch, total_frames=args.frames,
                          backend=args.backend, num_collectors=args.nodes, sync=True,
                          backend_options=backend_options(args))
    print(f"{type(collector).__name__} on {args.nodes} collectors, first batch in ", end="", flush=True)
    try:
        for i, batch in enumerate(collector):
            if i == 0:
                print(f"{time.perf_counter() - start:.1f} s")
            with torch.no_grad():
                advantage(batch)
            data = batch.reshape(-1)
            for _ in range(4):
                for idx in torch.randperm(data.numel()).split(256):
                    losses = loss(data[idx])
                    total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                    optim.zero_grad()
                    total.backward()
                    optim.step()
            collector.update_policy_weights_()  # the nodes use the new weights from their next batch on
            print(f"batch {i}: mean reward {batch['next', 'reward'].mean():.3f}, frames {collector.stats()['frames']}")
    finally:
        collector.shutdown()


if __name__ == "__main__":
    main()
