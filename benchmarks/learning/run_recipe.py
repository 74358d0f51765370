"""Learning check: runs a recipe for several seeds and reports whether it reaches a return threshold.

For each seed the recipe runs ``--frames`` frames with a deterministic evaluation (``--episodes`` episodes)
every ``--eval-every`` frames and at the end. Reported per seed and as mean ± std over seeds:

- the final deterministic evaluation (mean return over the episodes);
- frames used, training wall-clock and CPU seconds (evaluations excluded), frames/s;
- frames and seconds to the first evaluation at or above ``--threshold`` (``null`` if never reached).

The yardstick is TorchRL 0.14.1's SAC update step, about 26 ms at batch 256 with 256x256 networks on one
thread: ``torchrl_estimate_s`` is the time TorchRL would spend on optimisation alone (one update per frame
after the random warm-up) to reach the same frame count, a lower bound on its time to the threshold. It is
only comparable when the run's networks and batch are that size (the default here) and is ``null`` for the
other recipes' update costs, which were not measured.

Results go to ``benchmarks/learning/results/<algo>-<env>.json`` and ``<algo>-<env>.png`` (every seed's
curves with the threshold); run folders to ``results/runs/`` (not meant to be committed). The last line
printed is one JSON object of the aggregate figures.

    python benchmarks/learning/run_recipe.py sac --env Pendulum-v1
    python benchmarks/learning/run_recipe.py td3 --env Pendulum-v1 --seeds 0 1 2 --frames 20000
    python benchmarks/learning/run_recipe.py sac --env PendulumEnv -- network.hidden_sizes=[256,256]

Not run in CI: three seeds of 20k frames take several minutes per recipe on two cores.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from torchrl.train import plot_learning_curves, read_curve, run_recipe

HERE = Path(__file__).resolve().parent
TORCHRL_SAC_UPDATE_S = 0.026  # TorchRL 0.14.1 SAC update, batch 256, 256x256, one thread (issue figure)


def _stats(values: list) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "n": len(values)}


def _first_reach(curve: list[dict], threshold: float) -> dict | None:
    for row in curve:
        if row["eval_return"] is not None and row["eval_return"] >= threshold:
            return {"frames": int(row["frames"]), "seconds": row["seconds"], "cpu_seconds": row["cpu_seconds"]}
    return None


def run_seed(algo: str, env: str, seed: int, args, overrides: list[str]) -> dict:
    cfg = [f"env={env}", f"seed={seed}", f"total_frames={args.frames}", f"eval_every={args.eval_every}",
           f"eval_episodes={args.episodes}", "progress=false", "logger=", "checkpoint_every=0",
           f"output_dir={args.out / 'runs'}", *overrides]
    t0 = time.perf_counter()
    summary = run_recipe(algo, cfg)
    curve = read_curve(Path(summary["curve_csv"]))
    reach = _first_reach(curve, args.threshold)
    out = {
        "seed": seed,
        "final_eval_return": summary["eval_return"],
        "final_eval_return_std_over_episodes": summary["eval_return_std"],
        "frames": summary["frames"],
        "train_seconds": summary["seconds"],
        "train_cpu_seconds": summary["cpu_seconds"],
        "fps": summary["fps"],
        "total_seconds_with_evals": time.perf_counter() - t0,
        "reached": reach is not None,
        "frames_to_threshold": reach and reach["frames"],
        "seconds_to_threshold": reach and reach["seconds"],
        "cpu_seconds_to_threshold": reach and reach["cpu_seconds"],
        "run_dir": summary["run_dir"],
        "curve": curve,
    }
    print(f"[{algo} {env} seed {seed}] final eval {out['final_eval_return']:.1f}, {out['frames']} frames in "
          f"{out['train_seconds']:.1f} s ({out['fps']:.0f} f/s, CPU {out['train_cpu_seconds']:.1f} s); threshold "
          + (f"reached at {reach['frames']} frames, {reach['seconds']:.1f} s (CPU {reach['cpu_seconds']:.1f} s)"
             if reach else "not reached"), flush=True)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("algo", help="recipe name: sac, td3, ddpg, ...")
    parser.add_argument("--env", default="Pendulum-v1", help="env preset or gymnasium id (default Pendulum-v1)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--threshold", type=float, default=-200.0)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--tag", default="", help="suffix of the result files (e.g. a variant's name)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides passed to the recipe (after --)")
    args = parser.parse_intermixed_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    seeds = [run_seed(args.algo, args.env, s, args, args.overrides) for s in args.seeds]
    final = _stats([s["final_eval_return"] for s in seeds])
    aggregate = {
        "algo": args.algo,
        "env": args.env,
        "overrides": args.overrides,
        "threshold": args.threshold,
        "frames_budget": args.frames,
        "final_eval_return_mean": final["mean"],
        "final_eval_return_std": final["std"],
        "seeds_reaching_threshold": sum(s["reached"] for s in seeds),
        "seeds_final_above_threshold": sum(s["final_eval_return"] >= args.threshold for s in seeds),
        "n_seeds": len(seeds),
        "fps_mean": statistics.fmean(s["fps"] for s in seeds),
        "train_seconds_mean": statistics.fmean(s["train_seconds"] for s in seeds),
        "train_cpu_seconds_mean": statistics.fmean(s["train_cpu_seconds"] for s in seeds),
        "frames_to_threshold": _stats([s["frames_to_threshold"] for s in seeds]),
        "seconds_to_threshold": _stats([s["seconds_to_threshold"] for s in seeds]),
        "cpu_seconds_to_threshold": _stats([s["cpu_seconds_to_threshold"] for s in seeds]),
    }
    reach_frames = aggregate["frames_to_threshold"]
    if args.algo == "sac" and reach_frames is not None:
        from torchrl.train import compose_config

        cfg = compose_config(args.algo, [f"env={args.env}", *args.overrides])
        updates = max(0.0, reach_frames["mean"] - cfg.collector.init_random_frames) * cfg.optim.utd_ratio
        aggregate["torchrl_estimate_s"] = updates * TORCHRL_SAC_UPDATE_S
        aggregate["torchrl_estimate_note"] = (
            "optimisation time alone of TorchRL 0.14.1 (26 ms/update at 256x256, batch 256) for the same number of "
            f"updates; our networks: {list(cfg.network.hidden_sizes)}, batch {cfg.buffer.batch_size}")
        cpu = aggregate["cpu_seconds_to_threshold"]
        if cpu:
            aggregate["speedup_vs_torchrl_estimate_cpu"] = aggregate["torchrl_estimate_s"] / cpu["mean"]

    stem = f"{args.algo}-{args.env}{('-' + args.tag) if args.tag else ''}"
    (args.out / f"{stem}.json").write_text(json.dumps({"aggregate": aggregate, "seeds": seeds}, indent=2))
    plot_learning_curves({f"seed {s['seed']}": s["curve"] for s in seeds}, args.out / f"{stem}.png",
                         title=f"{args.algo} on {args.env} ({len(seeds)} seeds)", threshold=args.threshold)
    print(json.dumps(aggregate))
    return aggregate


if __name__ == "__main__":
    main(sys.argv[1:])
