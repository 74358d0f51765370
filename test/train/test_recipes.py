"""Smoke runs of the SAC, TD3 and DDPG recipes with tiny budgets: artefacts of the run folder, resume.

Learning itself is checked by ``benchmarks/learning/`` (not in CI)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchrl.train import CHECKPOINT_NAME, read_curve, run_recipe

REPO = Path(__file__).resolve().parents[2]

# A few hundred frames, small networks and batches: seconds per run.
TINY = ["total_frames=300", "collector.frames_per_batch=50", "collector.init_random_frames=100",
        "buffer.batch_size=32", "network.hidden_sizes=[16,16]", "eval_every=150", "eval_episodes=2",
        "log_every=100", "checkpoint_every=150", "progress=false"]


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """Recipes set ``torch.set_num_threads(cfg.threads)``; other tests in this process keep their setting."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _run(algo: str, tmp_path: Path, *extra: str) -> dict:
    return run_recipe(algo, [*TINY, f"output_dir={tmp_path}", *extra])


@pytest.mark.parametrize("algo, extra", [
    ("sac", []),                                  # native PendulumEnv (the default)
    ("sac", ["env=Pendulum-v1"]),
    ("td3", []),                                  # gymnasium Pendulum-v1 (TD3's default)
    ("td3", ["env=PendulumEnv"]),
    ("ddpg", []),
    ("ddpg", ["env=PendulumEnv", "exploration.type=ou"]),
])
def test_smoke_run_writes_the_run_folder_and_resumes(algo, extra, tmp_path, capsys):
    summary = _run(algo, tmp_path, *extra)
    run_dir = Path(summary["run_dir"])
    assert run_dir.parent == tmp_path and run_dir.name.startswith(f"{algo}-")
    assert summary["frames"] == 300 and summary["eval_return"] is not None and summary["train_return"] is not None
    assert capsys.readouterr().out.startswith(f"Finished {algo} on ")

    # the run folder: config, CSV logs, curve and its PNG, checkpoint, summary
    for name in ("config.yaml", "curve.csv", "learning_curve.png", CHECKPOINT_NAME, "summary.json"):
        assert (run_dir / name).is_file(), name
    scalars = run_dir / "scalars"
    for name in ("train/episode_return", "train/fps", "eval/episode_return"):
        assert (scalars / f"{name}.csv").is_file(), name
    assert any((scalars / "train").glob("loss_*.csv"))
    curve = read_curve(run_dir / "curve.csv")
    assert [r["frames"] for r in curve if r["eval_return"] is not None] == [150.0, 300.0]
    assert torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)["frames"] == 300

    # resuming continues the frame count in the same folder
    resumed = _run(algo, tmp_path, *extra, f"resume={run_dir}", "total_frames=400")
    assert resumed["run_dir"] == str(run_dir) and resumed["frames"] == 400
    checkpoint = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)
    assert checkpoint["frames"] == 400
    assert checkpoint["objects"]["collector"]["frames"] == 400  # the collector went on from 300
    assert checkpoint["objects"]["buffer"]["_storage"]["_len"] == 400  # 300 + 100 transitions stored
    frames = [r["frames"] for r in read_curve(run_dir / "curve.csv")]
    assert frames == sorted(frames) and frames[-1] == 400.0
    assert json.loads((run_dir / "summary.json").read_text())["frames"] == 400


def test_halfcheetah_preset_runs(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")  # the mujoco extra; installed in the test environment
    monkeypatch.chdir(tmp_path)  # MuJoCo writes MUJOCO_LOG.TXT into the working directory
    summary = _run("sac", tmp_path, "env=HalfCheetah-v5", "total_frames=100", "collector.init_random_frames=50",
                   "eval_episodes=1", "env.max_episode_steps=50", "checkpoint_every=0")
    assert summary["frames"] == 100 and summary["env"] == "HalfCheetah-v5"
    assert summary["checkpoint"] is None  # checkpoint_every=0: none written


def test_script_entry_point(tmp_path):
    """``python sota-implementations/sac/sac.py key=value``: Hydra's own entry point, writing nothing but the run."""
    script = REPO / "sota-implementations" / "sac" / "sac.py"
    out = subprocess.run(
        [sys.executable, str(script), *TINY, "total_frames=200", "logger=", "output_dir=runs"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Finished sac on PendulumEnv: 200 frames" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no hydra outputs/ or logs
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "curve.csv").is_file() and not (run_dir / "scalars").exists()  # logger="" : no logger files
