"""Shared pieces of the trainer tests: a small iterable collector with a complete state, a DQN setup."""
from __future__ import annotations

import csv
from pathlib import Path

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential

from torchrl.data import OneHot
from torchrl.modules import MLP, EGreedyModule, QValueActor
from torchrl.objectives import DQNLoss
from torchrl.testing import DiscreteActionVecMockEnv

N = 7  # DiscreteActionVecMockEnv: 7 observations, 7 one-hot actions


class RolloutCollector:
    """A test-only collector: yields ``frames_per_batch``-step batches of one env, episodes continuing
    across batches. Its state (frames, the next input, the env and its generator, the policy) is
    complete, so a run restored from it continues exactly."""

    def __init__(self, env, policy, *, frames_per_batch: int, total_frames: int, init_random_frames: int = 0):
        self.env = env
        self.policy = policy
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.init_random_frames = init_random_frames
        self.frames = 0
        self._td: TensorDictBase | None = None
        self.shutdown_calls = 0
        self.seeds: list[int] = []

    def __iter__(self):
        while self.frames < self.total_frames:
            td = self.env.reset() if self._td is None else self._td
            steps = []
            with torch.no_grad():
                for _ in range(self.frames_per_batch):
                    if self.frames < self.init_random_frames:
                        td = self.env.rand_action(td)
                        # the Q-value policy writes int64 one-hot actions (as TorchRL's): random ones alike
                        td["action"] = td["action"].long()
                    else:
                        td = self.policy(td)
                    td, nxt = self.env.step_and_maybe_reset(td)
                    steps.append(td)
                    td = nxt
                    self.frames += 1
            self._td = td
            yield torch.stack(steps, 0).contiguous()

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        self.seeds.append(seed)
        self.env.set_seed(seed)
        self._td = None
        return seed

    def shutdown(self) -> None:
        self.shutdown_calls += 1

    def state_dict(self) -> dict:
        return {
            "frames": self.frames,
            "td": None if self._td is None else self._td.clone(),
            "env": self.env.state_dict(),
            "generator": self.env._generator.get_state(),
            "policy": self.policy.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.frames = state["frames"]
        self._td = None if state["td"] is None else state["td"].clone()
        self.env.load_state_dict(state["env"])
        self.env._generator.set_state(state["generator"])
        self.policy.load_state_dict(state["policy"])


def make_dqn(seed: int = 0, eps: float = 0.5):
    """A DQN loss (with target network) and its epsilon-greedy collection policy."""
    torch.manual_seed(seed)
    spec = OneHot(N)
    actor = QValueActor(MLP(in_features=N, out_features=N, num_cells=[16]), in_keys=["observation"], spec=spec)
    loss = DQNLoss(actor, action_space=spec, delay_value=True)
    greedy = EGreedyModule(spec, eps_init=eps, eps_end=0.05, annealing_num_steps=100)
    return loss, TensorDictSequential(actor, greedy), actor, greedy


def make_collector(total_frames: int, *, frames_per_batch: int = 10, init_random_frames: int = 0, policy=None, seed=3):
    env = DiscreteActionVecMockEnv(max_steps=7, seed=seed)
    if policy is None:
        _, policy, _, _ = make_dqn()
    return RolloutCollector(env, policy, frames_per_batch=frames_per_batch, total_frames=total_frames,
                            init_random_frames=init_random_frames)


class Regression(torch.nn.Module):
    """A loss module: mean squared error of a linear map ``x -> y`` (``"loss_mse"``)."""

    def __init__(self, n_in: int = 2, n_out: int = 1, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.net = torch.nn.Linear(n_in, n_out)
        self.calls: list[TensorDictBase] = []

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        self.calls.append(td)
        pred = self.net(td["x"])
        return TensorDict(loss_mse=(pred - td["y"]).pow(2).mean(), pred_mean=pred.detach().mean())


def regression_batches(n: int, size: int = 8, seed: int = 0) -> list[TensorDictBase]:
    g = torch.Generator().manual_seed(seed)
    return [
        TensorDict(x=torch.randn(size, 2, generator=g), y=torch.randn(size, 1, generator=g),
                   next=TensorDict(reward=torch.randn(size, 1, generator=g), batch_size=[size]), batch_size=[size])
        for _ in range(n)
    ]


class ListCollector:
    """An iterable over fixed batches, with the optional collector methods the trainer uses."""

    def __init__(self, batches, **attrs):
        self.batches = list(batches)
        self.shutdown_calls = 0
        self.position = 0
        for key, value in attrs.items():
            setattr(self, key, value)

    def __iter__(self):
        while self.position < len(self.batches):
            self.position += 1
            yield self.batches[self.position - 1]

    def shutdown(self):
        self.shutdown_calls += 1

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = state["position"]


def read_scalars(log_dir: Path, exp_name: str, name: str) -> list[tuple[int, float]]:
    """The ``(step, value)`` rows a CSVLogger wrote for ``name``."""
    path = Path(log_dir) / exp_name / "scalars" / f"{name}.csv"
    with open(path) as handle:
        return [(int(step), float(value)) for step, value in csv.reader(handle)]
