"""The recipes' ``compile`` and ``cudagraphs`` options: every recipe trains with them on every device present.

On a CPU, ``cudagraphs=true`` warns and the update runs without a graph; on a CUDA device (``pytest -m cuda``) the
update is compiled and recorded as a CUDA graph, and the run must finish with finite losses.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from torchrl.testing import get_available_devices
from torchrl.train import run_recipe

CONTINUOUS = ["total_frames=300", "collector.frames_per_batch=50", "collector.init_random_frames=100",
              "buffer.batch_size=32", "network.hidden_sizes=[16,16]", "eval_every=300", "eval_episodes=1",
              "log_every=100", "checkpoint_every=0", "progress=false"]
DISCRETE = ["total_frames=256", "eval_every=256", "eval_episodes=1", "log_every=64", "checkpoint_every=0",
            "progress=false", "network.hidden_sizes=[16,16]", "env.num_envs=2", "env.max_episode_steps=50"]
TINY = {
    "sac": CONTINUOUS,
    "td3": [*CONTINUOUS, "env=PendulumEnv"],
    "ddpg": [*CONTINUOUS, "env=PendulumEnv"],
    "dqn": [*DISCRETE, "collector.frames_per_batch=64", "collector.init_random_frames=64", "buffer.batch_size=16",
            "optim.updates_per_batch=4", "loss.target_update_interval=4", "exploration.annealing_frames=128"],
    "ppo": [*DISCRETE, "collector.frames_per_batch=64", "optim.minibatch_size=32", "optim.epochs=2"],
    "a2c": [*DISCRETE, "collector.frames_per_batch=32"],
}


def _device_params():
    for device in get_available_devices():
        marks = [pytest.mark.cuda] if device.type == "cuda" else []
        yield pytest.param(device, marks=marks, id=str(device))


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("device", list(_device_params()))
@pytest.mark.parametrize("algo", sorted(TINY))
def test_recipe_runs_with_cudagraphs_option(algo, device, tmp_path):
    extra = [f"output_dir={tmp_path}", f"device={device.type}", "cudagraphs=true"]
    if device.type == "cuda":
        extra.append("compile=true")
        summary = run_recipe(algo, [*TINY[algo], *extra])
    else:
        with pytest.warns(UserWarning, match="cudagraphs=true needs a CUDA device"):
            summary = run_recipe(algo, [*TINY[algo], *extra])
    assert summary["frames"] == int(TINY[algo][0].split("=")[1])
    files = sorted((Path(summary["run_dir"]) / "scalars" / "train").glob("loss*.csv"))
    losses = [float(line.split(",")[1]) for f in files for line in f.read_text().splitlines()]
    assert files and losses and all(math.isfinite(v) for v in losses)
