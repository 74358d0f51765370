"""``Run``: run folder, logging of returns and losses, cadences, checkpoint/resume, summary."""
from __future__ import annotations

import json
import re
import sys

import pytest
import torch
from tensordict import TensorDict

from torchrl.train import CHECKPOINT_NAME, Run, read_curve


def _cfg(tmp_path, **extra):
    cfg = {"total_frames": 300, "seed": 0, "logger": "csv", "output_dir": str(tmp_path), "progress": False,
           "log_every": 100, "env": {"name": "Some/Env-v0"}}
    cfg.update(extra)
    return cfg


def _batch(returns_at_done: list[float | None]) -> TensorDict:
    """One frame per entry: ``done`` where a return is given (then ``episode_reward`` is that return)."""
    done = torch.tensor([r is not None for r in returns_at_done]).unsqueeze(-1)
    ret = torch.tensor([r if r is not None else -1e6 for r in returns_at_done]).unsqueeze(-1)
    return TensorDict({"next": {"done": done, "episode_reward": ret}}, [len(returns_at_done)])


def _scalar_rows(run, name):
    text = (run.dir / "scalars" / f"{name}.csv").read_text()
    return [tuple(float(x) for x in line.split(",")) for line in text.splitlines()]


class Counter:
    def __init__(self, n=0):
        self.n = n

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        self.n = state["n"]


def test_run_folder_and_config(tmp_path):
    run = Run("sac", _cfg(tmp_path))
    assert run.dir.parent == tmp_path
    assert re.fullmatch(r"sac-Some_Env-v0-\d{8}-\d{6}", run.dir.name)
    assert "total_frames: 300" in (run.dir / "config.yaml").read_text()
    other = Run("sac", _cfg(tmp_path))  # same second: a distinct folder
    assert other.dir != run.dir and other.dir.name.startswith(run.dir.name[:20])
    for r in (run, other):
        r.finish(quiet=True)


def test_seed_threads_and_device(tmp_path):
    before = torch.get_num_threads()
    try:
        run = Run("sac", _cfg(tmp_path, seed=123, threads=1, device="cpu"))
        assert torch.get_num_threads() == 1 and run.device == torch.device("cpu")
        first = torch.rand(3)
        torch.manual_seed(123)
        torch.testing.assert_close(first, torch.rand(3))
        run.finish(quiet=True)
    finally:
        torch.set_num_threads(before)


def test_step_logs_mean_return_of_finished_episodes(tmp_path):
    run = Run("td3", _cfg(tmp_path))
    run.step(50, _batch([None, -10.0, None] + [None] * 47))
    assert run.train_return is None  # no log before 100 frames
    run.step(100, _batch([-20.0] + [None] * 49), {"loss_actor": torch.tensor(1.5, requires_grad=True),
                                                   "pred_value": torch.zeros(2, 5)}, alpha=0.25)
    assert run.train_return == pytest.approx(-15.0)
    run.step(150, _batch([None] * 50))
    run.step(200, _batch([None] * 49 + [-40.0]))
    assert run.train_return == pytest.approx(-40.0)  # the previous episodes were already counted
    summary = run.finish(quiet=True)
    assert _scalar_rows(run, "train/episode_return") == [(100.0, -15.0), (200.0, -40.0)]
    assert _scalar_rows(run, "train/loss_actor") == [(100.0, 1.5)]
    assert _scalar_rows(run, "train/alpha") == [(100.0, 0.25)]
    assert not (run.dir / "scalars" / "train" / "pred_value.csv").exists()  # not a scalar
    assert [r["train_return"] for r in read_curve(run.dir / "curve.csv")] == [-15.0, -40.0]
    assert summary["train_return"] == pytest.approx(-40.0) and summary["frames"] == 200


def test_due_crosses_multiples_and_the_end(tmp_path):
    run = Run("sac", _cfg(tmp_path, logger=""))
    seen = []
    for frames in (70, 140, 210, 280, 300):
        run.step(frames)
        seen.append((frames, run.due(100), run.due(0)))
    assert seen == [(70, False, False), (140, True, False), (210, True, False), (280, False, False),
                    (300, True, False)]
    run.finish(quiet=True)


def test_evaluate_logs_and_is_off_the_training_clock(tmp_path, monkeypatch):
    import time

    from torchrl.train import _run

    def slow_evaluate(env, policy, *, episodes, max_steps):
        time.sleep(0.3)
        return torch.tensor([-100.0, -300.0])

    monkeypatch.setattr(_run, "evaluate", slow_evaluate)
    run = Run("sac", _cfg(tmp_path))
    run.step(100)
    t0 = run.seconds
    assert run.evaluate(None, None, episodes=2, max_steps=5) == -200.0
    assert run.seconds - t0 < 0.25 and run.eval_std == pytest.approx(100.0)
    summary = run.finish(quiet=True)
    assert _scalar_rows(run, "eval/episode_return") == [(100.0, -200.0)]
    assert (summary["eval_return"], summary["eval_return_std"]) == (-200.0, 100.0)
    assert read_curve(run.dir / "curve.csv")[-1]["eval_return"] == -200.0


def test_checkpoint_and_resume(tmp_path):
    run = Run("ddpg", _cfg(tmp_path))
    counter = Counter(7)
    run.step(100, _batch([-5.0]))
    run.step(200)
    path = run.save(counter=counter)
    expected = torch.rand(2)  # the generator state saved above produces this next
    run.finish(quiet=True)
    assert path == run.dir / CHECKPOINT_NAME

    resumed = Run("ddpg", _cfg(tmp_path, resume=str(run.dir), total_frames=400, seed=99))
    assert resumed.dir == run.dir and resumed.frames == 200
    restored = Counter()
    assert resumed.restore(counter=restored) == 200
    assert restored.n == 7
    torch.testing.assert_close(torch.rand(2), expected)
    saved = torch.load(path, weights_only=False)["run"]
    assert saved["seconds"] > 0 and resumed.seconds >= saved["seconds"]  # the clock continues from the saved one
    assert resumed.cpu_seconds >= saved["cpu_seconds"]
    resumed.step(300)
    resumed.step(400)
    summary = resumed.finish(quiet=True)
    assert summary["frames"] == 400
    assert [r["frames"] for r in read_curve(run.dir / "curve.csv")] == [100.0, 200.0, 300.0, 400.0]
    # the resumed logger continues the same CSV files
    assert [row[0] for row in _scalar_rows(resumed, "train/fps")] == [100.0, 200.0, 300.0, 400.0]


def test_resume_from_checkpoint_file_and_errors(tmp_path):
    run = Run("sac", _cfg(tmp_path))
    run.step(100)
    path = run.save(a=Counter(1))
    run.finish(quiet=True)
    resumed = Run("sac", _cfg(tmp_path, resume=str(path)))
    with pytest.raises(KeyError, match=r"no state for 'b'; it has \['a'\]"):
        resumed.restore(b=Counter())
    resumed.finish(quiet=True)
    with pytest.raises(FileNotFoundError, match=r"resume=.*no checkpoint found at .*checkpoint\.pt"):
        Run("sac", _cfg(tmp_path, resume=str(tmp_path / "nothing")))


def test_fresh_run_restores_nothing(tmp_path):
    run = Run("sac", _cfg(tmp_path))
    counter = Counter(3)
    assert run.restore(counter=counter) == 0 and counter.n == 3
    run.finish(quiet=True)


def test_finish_summary_files_and_print(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = Run("sac", _cfg(tmp_path))
    run.step(100, _batch([-3.0]))
    run.save()
    summary = run.finish()
    out = capsys.readouterr().out
    assert out.startswith("Finished sac on Some/Env-v0: 100 frames")
    assert f"run folder:      {run.dir}" in out and "learning_curve.png" in out and CHECKPOINT_NAME in out
    assert summary["curve_png"] == str(run.dir / "learning_curve.png")
    assert (run.dir / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run.dir / "summary.json").read_text())["frames"] == 100
    with pytest.raises(RuntimeError, match="already finished"):
        run.finish()


def test_without_matplotlib_the_csv_is_named(tmp_path, monkeypatch, capsys):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    run = Run("sac", _cfg(tmp_path, logger=""))
    run.step(100)
    summary = run.finish()
    assert summary["curve_png"] is None and summary["logs"] is None and summary["checkpoint"] is None
    assert "curve.csv (install matplotlib for the PNG)" in capsys.readouterr().out


RUN_CHILD = """
import torch
from torchrl.train import Run

class Big:
    def state_dict(self):
        return {{"w": torch.ones(8_000_000)}}

cfg = {{"total_frames": 300, "seed": 0, "logger": "", "output_dir": {out!r}, "progress": False,
        "env": {{"name": "Some/Env-v0"}}, "resume": {run_dir!r}}}
run = Run("sac", cfg)
block_after(torch, "save")  # the checkpoint is written to its temporary, then the process hangs
run.save(counter=Big())
"""


def test_run_checkpoint_killed_midway_is_cleaned_up_on_resume(tmp_path):
    from test._kill_helpers import kill_mid_save, size_of, temporaries

    run = Run("sac", _cfg(tmp_path, logger=""))
    run.step(100)
    run.save(counter=Counter(3))
    run.finish(quiet=True)
    pid = kill_mid_save(RUN_CHILD.format(out=str(tmp_path), run_dir=str(run.dir)), tmp_path)
    (left,) = temporaries(run.dir, CHECKPOINT_NAME)
    assert f"-{pid}-" in left.name and size_of(left) > 30e6
    resumed = Run("sac", _cfg(tmp_path, logger="", resume=str(run.dir)))
    assert temporaries(run.dir, CHECKPOINT_NAME) == []  # removed when the checkpoint was loaded
    restored = Counter()
    assert resumed.restore(counter=restored) == 100 and restored.n == 3  # the previous checkpoint
    resumed.finish(quiet=True)
