"""Smoke runs of the DQN, PPO and A2C recipes with tiny budgets: artefacts of the run folder, schedules,
checkpoint and resume.

Learning itself is checked by ``benchmarks/learning/`` (not in CI)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchrl.train import CHECKPOINT_NAME, compose_config, read_curve, run_recipe

REPO = Path(__file__).resolve().parents[2]

# A few hundred frames, two envs, small networks, short evaluation episodes: seconds per run.
COMMON = ["total_frames=256", "eval_every=128", "eval_episodes=2", "log_every=64", "checkpoint_every=128",
          "progress=false", "network.hidden_sizes=[16,16]", "env.num_envs=2", "env.max_episode_steps=50"]
TINY = {
    "dqn": [*COMMON, "collector.frames_per_batch=64", "collector.init_random_frames=64", "buffer.batch_size=16",
            "optim.updates_per_batch=4", "loss.target_update_interval=4", "exploration.annealing_frames=128"],
    "ppo": [*COMMON, "collector.frames_per_batch=64", "optim.minibatch_size=32", "optim.epochs=2"],
    "a2c": [*COMMON, "collector.frames_per_batch=32"],
}


def _run(algo: str, tmp_path: Path, *extra: str) -> dict:
    return run_recipe(algo, [*TINY[algo], f"output_dir={tmp_path}", *extra])


def _check_run_folder(summary: dict, algo: str, tmp_path: Path, frames: int) -> Path:
    run_dir = Path(summary["run_dir"])
    assert run_dir.parent == tmp_path and run_dir.name.startswith(f"{algo}-")
    assert summary["frames"] == frames and summary["eval_return"] is not None
    for name in ("config.yaml", "curve.csv", "learning_curve.png", CHECKPOINT_NAME, "summary.json"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scalars = run_dir / "scalars"
    for name in ("train/fps", "eval/episode_return"):
        assert (scalars / f"{name}.csv").is_file(), name
    assert any((scalars / "train").glob("loss*.csv"))
    curve = read_curve(run_dir / "curve.csv")
    assert [r["frames"] for r in curve if r["eval_return"] is not None] == [128.0, float(frames)]
    return run_dir


def _check_resume(algo: str, tmp_path: Path, run_dir: Path, *extra: str) -> dict:
    """Resuming with a larger budget continues the frame count (collector included) in the same folder."""
    resumed = _run(algo, tmp_path, *extra, f"resume={run_dir}", "total_frames=384")
    assert resumed["run_dir"] == str(run_dir) and resumed["frames"] == 384
    checkpoint = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)
    assert checkpoint["frames"] == 384
    assert checkpoint["objects"]["collector"]["frames"] == 384  # the collector went on from 256
    frames = [r["frames"] for r in read_curve(run_dir / "curve.csv")]
    assert frames == sorted(frames) and frames[-1] == 384.0
    assert json.loads((run_dir / "summary.json").read_text())["frames"] == 384
    return checkpoint


def test_dqn_cartpole_smoke_and_resume(tmp_path, capsys):
    summary = _run("dqn", tmp_path)
    assert capsys.readouterr().out.startswith("Finished dqn on CartPole-v1: 256 frames")
    run_dir = _check_run_folder(summary, "dqn", tmp_path, 256)
    assert (run_dir / "scalars" / "train" / "epsilon.csv").is_file()

    checkpoint = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)
    objects = checkpoint["objects"]
    assert objects["buffer"]["_storage"]["_len"] == 256
    # epsilon annealed 1 -> 0.04 over 128 frames: at its end value after 256 frames
    eps = [v for k, v in objects["collector"]["policy_state_dict"].items() if k.endswith("eps")]
    assert eps and float(eps[0]) == pytest.approx(0.04)
    # the learning rate decays linearly to lr * lr_end_factor at total_frames
    assert objects["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-3 * 0.05)
    # updates start once the buffer holds the 64 random frames: 4 rounds of 4 Adam steps
    assert int(next(iter(objects["optimizer"]["state"].values()))["step"]) == 16

    checkpoint = _check_resume("dqn", tmp_path, run_dir)
    assert checkpoint["objects"]["buffer"]["_storage"]["_len"] == 384


@pytest.mark.parametrize("extra", [[], ["env=PendulumEnv"], ["env=Pendulum-v1"]])
def test_ppo_smoke_and_resume(extra, tmp_path):
    summary = _run("ppo", tmp_path, *extra)
    run_dir = _check_run_folder(summary, "ppo", tmp_path, 256)
    optimizer = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)["objects"]["optimizer"]
    # lr decays linearly to 0: the last batch (frames 192..256) used lr * (1 - 192 / 256)
    lr = compose_config("ppo", extra).optim.lr
    assert optimizer["param_groups"][0]["lr"] == pytest.approx(lr * 0.25)
    # 4 batches x 2 epochs x 2 minibatches of 32 = 16 Adam steps
    assert int(next(iter(optimizer["state"].values()))["step"]) == 16
    _check_resume("ppo", tmp_path, run_dir, *extra)


def test_a2c_cartpole_smoke_and_resume(tmp_path):
    summary = _run("a2c", tmp_path)
    run_dir = _check_run_folder(summary, "a2c", tmp_path, 256)
    optimizer = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)["objects"]["optimizer"]
    assert int(next(iter(optimizer["state"].values()))["step"]) == 8  # one RMSprop step per 32-frame batch
    assert optimizer["param_groups"][0]["lr"] == pytest.approx(7e-4)  # constant (anneal_lr: false)
    _check_resume("a2c", tmp_path, run_dir)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_halfcheetah_preset_normalizes_observations(algo, tmp_path):
    pytest.importorskip("mujoco")  # the mujoco extra; installed in the test environment
    summary = _run(algo, tmp_path, "env=HalfCheetah-v5", "env.num_envs=1", "eval_episodes=1")
    run_dir = _check_run_folder(summary, algo, tmp_path, 256)
    env_state = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)["objects"]["collector"]["env_state_dict"]
    # the VecNorm statistics travel in the checkpoint: 256 frames (+ resets) of 17-dim observations seen
    stats = [v for k, v in env_state.items() if k.endswith("_extra_state")]
    assert stats, sorted(env_state)
    flat = {k: v for state in stats for k, v in (state.items() if hasattr(state, "items") else [])}
    assert any(torch.is_tensor(v) and v.shape == (17,) for v in _leaves(flat)), flat.keys()


def _leaves(obj):
    if torch.is_tensor(obj):
        yield obj
    elif hasattr(obj, "values"):
        for v in obj.values():
            yield from _leaves(v)


def test_a2c_rejects_unknown_optimizer(tmp_path):
    # checked with the other options before the run starts: no run folder
    with pytest.raises(ValueError, match="optim.optimizer=sgd: expected one of 'rmsprop', 'adam'"):
        _run("a2c", tmp_path, "optim.optimizer=sgd")
    assert list(tmp_path.iterdir()) == []


def test_ppo_script_entry_point(tmp_path):
    """``python sota-implementations/ppo/ppo.py key=value``: Hydra's own entry point."""
    script = REPO / "sota-implementations" / "ppo" / "ppo.py"
    out = subprocess.run(
        [sys.executable, str(script), *TINY["ppo"], "total_frames=128", "logger=", "output_dir=runs"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Finished ppo on CartPole-v1: 128 frames" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no hydra outputs/ or logs
