"""Shared pieces of the distributed collector tests: a counting policy, process counting."""
from __future__ import annotations

import os

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.envs import PendulumEnv


def make_env():
    return PendulumEnv()


class Constant(nn.Module):
    """Outputs its ``value`` parameter as the action: a batch shows which weights collected it."""

    def __init__(self, value: float = 0.0) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.full((1,), float(value)))

    def forward(self, observation):
        return self.value.expand(*observation.shape[:-1], 1)


def counting_policy(value: float = 0.0) -> TensorDictModule:
    return TensorDictModule(Constant(value), in_keys=["observation"], out_keys=["action"])


def set_value(policy: TensorDictModule, value: float) -> None:
    with torch.no_grad():
        policy.module.value.fill_(value)


def descendants() -> list[int]:
    """Pids of this process's live descendants (from /proc; zombies excluded)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
