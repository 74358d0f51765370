"""Loss forward + backward time as a ratio to the same loss written in plain torch (same run).

DQN (the setting TorchRL was measured on, TorchRL: +147%): batch 256, CartPole shapes (observation 4, two
actions, one-hot), MLP 2x64 Q-network wrapped in a ``QValueActor``, target network, ``"l2"`` loss, TD(0)
with gamma 0.99. One step = zero_grad + ``loss(td.clone(False))`` + backward. The raw reference computes
``(Q(s) * a).sum(-1)`` against ``r + gamma (1 - terminated) max_a' Q_target(s', a')`` with ``F.mse_loss``.
Candidates are timed in interleaved rounds (``benchmarks/_common.py``), best round kept, on the thread's CPU
clock, so load from other processes hits both alike. Figures: ``dqn_b256_overhead_ratio`` (best ours / best
raw) and ``..._paired_median`` (median over rounds of the ratio of the two adjacent measurements, robust to
load that drifts between rounds). Target: ratio <= 1.10.

Run: ``python benchmarks/bench_loss.py [--quick]``. The last line printed is one JSON object of the figures.
"""
from __future__ import annotations

import argparse
import copy
import sys
import statistics
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from tensordict import TensorDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved_best, report, single_thread  # noqa: E402

from torchrl.modules import MLP  # noqa: E402
from torchrl.modules.tensordict_module import QValueActor  # noqa: E402
from torchrl.objectives import DQNLoss  # noqa: E402

GAMMA = 0.99


def _zero(params):
    for p in params:
        p.grad = None


def _timed(step, n_iter: int):
    """Mean CPU time of the calling thread per step (``torch`` runs single-threaded here): unlike wall time,
    it does not count the time this process waits for a core while other processes run."""

    def run() -> float:
        t0 = time.thread_time()
        for _ in range(n_iter):
            step()
        return (time.thread_time() - t0) / n_iter

    return run


def bench_dqn(batch: int = 256, n_iter: int = 200, repeats: int = 7) -> dict[str, float]:
    torch.manual_seed(0)
    n_obs, n_act = 4, 2
    net = MLP(in_features=n_obs, out_features=n_act, num_cells=[64, 64])
    actor = QValueActor(net, in_keys=["observation"], action_space="one_hot")
    loss_mod = DQNLoss(actor, loss_function="l2", delay_value=True, action_space="one_hot")
    loss_mod.make_value_estimator(gamma=GAMMA)
    a_idx = torch.randint(0, n_act, (batch,))
    td = TensorDict(
        {
            "observation": torch.randn(batch, n_obs),
            "action": F.one_hot(a_idx, n_act).to(torch.int64),
            "next": {
                "observation": torch.randn(batch, n_obs),
                "reward": torch.ones(batch, 1),
                "done": torch.rand(batch, 1) < 0.05,
                "terminated": torch.rand(batch, 1) < 0.05,
            },
        },
        [batch],
    )
    params = list(loss_mod.parameters())

    def step_ours():
        _zero(params)
        loss_mod(td.clone(False))["loss"].backward()

    raw_net = copy.deepcopy(net)
    tgt_net = copy.deepcopy(net).requires_grad_(False)
    obs, nobs, rew = td["observation"], td["next", "observation"], td["next", "reward"].squeeze(-1)
    not_term = (~td["next", "terminated"]).float().squeeze(-1)
    act = td["action"]
    raw_params = list(raw_net.parameters())

    def step_raw():
        _zero(raw_params)
        q = (raw_net(obs) * act).sum(-1)
        with torch.no_grad():
            target = rew + GAMMA * not_term * tgt_net(nobs).max(-1).values
        F.mse_loss(q, target).backward()

    with torch.no_grad():
        ours = loss_mod(td.clone(False))["loss"].item()
        q = (raw_net(obs) * act).sum(-1)
        raw = F.mse_loss(q, rew + GAMMA * not_term * tgt_net(nobs).max(-1).values).item()
    if abs(ours - raw) > 1e-5 * max(1.0, abs(raw)):
        raise RuntimeError(f"DQN cross-check failed: ours {ours} vs raw {raw}")
    fns = {"ours": _timed(step_ours, n_iter), "raw": _timed(step_raw, n_iter)}
    best = {"ours": float("inf"), "raw": float("inf")}
    paired = []
    for _ in range(repeats):  # one interleaved round per call: a pair of adjacent measurements
        round_ = interleaved_best(fns, repeats=1)
        paired.append(round_["ours"] / round_["raw"])
        best = {k: min(best[k], round_[k]) for k in best}
    return {
        "dqn_b256_ours_ms": best["ours"] * 1e3,
        "dqn_b256_raw_ms": best["raw"] * 1e3,
        "dqn_b256_overhead_ratio": best["ours"] / best["raw"],
        "dqn_b256_overhead_ratio_paired_median": statistics.median(paired),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    args = parser.parse_args()
    single_thread()
    warnings.filterwarnings("ignore", message="No target network updater")  # TorchRL's setting: no updater
    figures = bench_dqn(n_iter=20 if args.quick else 50, repeats=3 if args.quick else 25)
    report(figures)


if __name__ == "__main__":
    main()
