"""Throughput of ``MultiThreadedEnv`` vs raw EnvPool stepping (same run, interleaved best-of).

Run: ``python benchmarks/bench_envpool.py`` (needs the ``envpool`` extra).
"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(__file__))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import interleaved_best, report, single_thread  # noqa: E402
import envpool  # noqa: E402
from torchrl.envs.libs.envpool import MultiThreadedEnv

single_thread()
T = 2000
figures = {}
for task, n, threads in [("CartPole-v1", 8, 1), ("Pendulum-v1", 8, 1), ("CartPole-v1", 64, 2)]:
    kw = dict(seed=0, num_threads=threads)
    pool = envpool.make(task, env_type="gymnasium", num_envs=n, **kw)
    env = MultiThreadedEnv(n, task, create_env_kwargs=kw, categorical_action_encoding=True)
    rng = np.random.default_rng(0)
    if task == "CartPole-v1":
        acts = rng.integers(0, 2, size=(T, n))
    else:
        acts = rng.uniform(-2, 2, size=(T, n, 1)).astype(np.float32)
    tacts = torch.as_tensor(acts)

    def raw():
        pool.reset()
        for t in range(T):
            obs, r, te, tr, info = pool.step(acts[t])
            done = te | tr
            if done.any():
                pool.reset(np.flatnonzero(done).astype(np.int32))

    def ours_loop():
        td = env.reset()
        for t in range(T):
            td.set("action", tacts[t])
            _, td = env.step_and_maybe_reset(td)

    def ours_rollout():
        env.rollout(T, actions=tacts, break_when_any_done=False)

    best = interleaved_best({"raw": raw, "loop": ours_loop, "rollout": ours_rollout}, repeats=9)
    tag = f"{task}x{n}"
    figures[f"{tag} raw steps/s"] = T * n / best["raw"]
    figures[f"{tag} raw us/step"] = best["raw"] / T * 1e6
    figures[f"{tag} ours us/step"] = best["loop"] / T * 1e6
    figures[f"{tag} step_and_maybe_reset / raw (time ratio)"] = best["loop"] / best["raw"]
    figures[f"{tag} rollout / raw (time ratio)"] = best["rollout"] / best["raw"]
report(figures)
