"""Instruction counts of our hot paths against their raw references, under valgrind's callgrind.

Wall-clock ratios on a shared machine drift by 5-20% from run to run; instruction counts do not (the child
runs with ``PYTHONHASHSEED=0``: two runs agree exactly; other hash seeds move a rollout step by up to 1%, through
dict and set layouts). They are no stand-in for time — Python code runs at fewer instructions per cycle than
vectorised kernels, so a time ratio is usually a little higher than the instruction ratio — but they show
reliably whether a change removed work. Needs ``valgrind`` and a C compiler (for the small helper that
starts and stops the count around each measured region); the timed benchmarks need neither.

Cases (each prints instructions per call of ours and of the reference, and their ratio):
- ``env``: ``TransformedEnv(PendulumEnv(), Compose(StepCounter(200), RewardSum()))`` rollout vs the bare env
  (per step), and ``PendulumEnv`` rollouts at batch 1 and 256 vs the raw torch loops of ``bench_env.py``;
- ``actor``: ``ProbabilisticActor(TanhNormal)`` at batch 1 and 1024 vs ``bench_modules.py``'s bare module;
- ``dqn``: ``DQNLoss`` forward + backward vs ``bench_loss.py``'s hand-written loss (each call on a fresh
  shallow copy of the batch, made outside the counted region).

Run: ``python benchmarks/icount.py env actor dqn`` (about a minute per case).
"""
from __future__ import annotations

import ast
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_HELPER = r"""
#include <valgrind/callgrind.h>
void region_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void region_stop(const char *name) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name); }
"""


# ---------------------------------------------------------------------------------------- the cases
def _case_env(measure) -> list[tuple[str, str, int]]:
    import bench_env

    from torchrl.envs import Compose, PendulumEnv, RewardSum, StepCounter, TransformedEnv

    bare, batched = PendulumEnv(seed=0), PendulumEnv(seed=0)
    transformed = TransformedEnv(PendulumEnv(seed=0), Compose(StepCounter(200), RewardSum()))
    params = batched.gen_params(batch_size=[256])
    measure("bare", lambda: bare.rollout(400, break_when_any_done=False))
    measure("transformed", lambda: transformed.rollout(400, break_when_any_done=False))
    measure("raw_b1", lambda: bench_env.raw_pendulum(1, 400))
    measure("ours_b1", lambda: bare.rollout(400))
    measure("raw_b256", lambda: bench_env.raw_pendulum(256, 100))
    measure("ours_b256", lambda: batched.rollout(100, auto_reset=False, tensordict=batched.reset(params.clone())))
    return [("transformed", "bare", 400), ("ours_b1", "raw_b1", 400), ("ours_b256", "raw_b256", 100)]


def _capture(module, name: str, run) -> dict:
    """The candidate callables a benchmark function hands to its timing helper ``name``."""
    captured = {}
    original = getattr(module, name)
    setattr(module, name, lambda fns, *args, **kwargs: captured.update(fns) or {k: 1.0 for k in fns})
    try:
        run()
    finally:
        setattr(module, name, original)
    return captured


def _case_actor(measure) -> list[tuple[str, str, int]]:
    import bench_modules

    from torchrl._utils._exploration import ExplorationType, set_exploration_type

    pairs = []
    for batch, calls in ((1, 200), (1024, 20)):
        fns = _capture(bench_modules, "interleaved_best", lambda: bench_modules._actor_case(batch, calls, 1))
        with set_exploration_type(ExplorationType.RANDOM):
            measure(f"actor_b{batch}", fns["actor"])
            measure(f"bare_b{batch}", fns["bare"])
        pairs.append((f"actor_b{batch}", f"bare_b{batch}", calls))
    return pairs


def _case_dqn(measure) -> list[tuple[str, str, int]]:
    import bench_loss

    original = bench_loss._timed_fresh
    bench_loss._timed_fresh = lambda step, n_iter, td: (step, td)
    try:
        fns = _capture(bench_loss, "interleaved_best", lambda: bench_loss.bench_dqn(n_iter=1, repeats=1))
    finally:
        bench_loss._timed_fresh = original
    for name in ("ours", "raw"):
        step, td = fns[name]
        batches = iter([td.clone(False) for _ in range(40)])  # made outside the counted regions, as in the timing
        measure(f"dqn_{name}", lambda step=step, batches=batches: [step(next(batches)) for _ in range(20)])
    return [("dqn_ours", "dqn_raw", 20)]


CASES = {"env": _case_env, "actor": _case_actor, "dqn": _case_dqn}


# ---------------------------------------------------------------------------------------- plumbing
def _child(cases: list[str], helper: str) -> None:
    """Runs under callgrind: each measured region is dumped to its own file named after the region."""
    import torch

    sys.path.insert(0, str(HERE))
    torch.set_num_threads(1)
    lib = ctypes.CDLL(helper)
    lib.region_stop.argtypes = [ctypes.c_char_p]

    def measure(name, fn):
        fn()  # warm-up, not counted
        lib.region_start()
        fn()
        lib.region_stop(name.encode())

    pairs = []
    for case in cases:
        pairs += CASES[case](measure)
    print("PAIRS", pairs, flush=True)


def _totals(out_dir: Path) -> dict[str, int]:
    totals = {}
    for path in out_dir.glob("cg.*"):
        name = total = None
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger: Client Request: "):
                name = line.split(": ", 3)[-1]
            elif line.startswith("totals:"):
                total = int(line.split()[1])
        if name is not None and total is not None:
            totals[name] = total
    return totals


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        _child(argv[2:], argv[1])
        return 0
    cases = argv or list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"icount: unknown case(s) {unknown}; choose from {sorted(CASES)}.")
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        raise SystemExit("icount: needs valgrind and a C compiler (cc); the timed benchmarks do not.")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "helper.c").write_text(_HELPER)
        helper = tmp / "helper.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(helper), str(tmp / "helper.c")], check=True)
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={tmp}/cg.%p",
             sys.executable, __file__, "--child", str(helper), *cases],
            capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONHASHSEED": "0"},
        )
        marker = [line for line in run.stdout.splitlines() if line.startswith("PAIRS ")]
        if run.returncode != 0 or not marker:
            sys.stderr.write(run.stdout[-2000:] + run.stderr[-4000:])
            return 1
        pairs = ast.literal_eval(marker[0][len("PAIRS "):])
        totals = _totals(tmp)
    for ours, ref, calls in pairs:
        a, b = totals[ours] / calls, totals[ref] / calls
        print(f"{ours:>14} {a / 1e3:10.1f} k instr/call   {ref:>10} {b / 1e3:10.1f} k   ratio {a / b:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
