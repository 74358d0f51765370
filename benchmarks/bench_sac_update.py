"""One SAC update step as the SAC recipe runs it, timed on one thread.

The step: ``buffer.sample()`` (256 transitions from a ``TensorDictReplayBuffer(LazyTensorStorage)`` holding
10k Pendulum transitions) -> ``SACLoss`` (two Q-networks, learned temperature, ``"l2"``) -> one backward
through the sum of the three losses -> ``Adam.step`` -> ``SoftUpdate.step``. Networks are 256x256 ReLU MLPs,
observation 3, action 1 (Pendulum). The issue's yardstick is TorchRL 0.14.1's update at these sizes: about
26 ms here. The script uses TorchRL's public API only, so ``../shared/bench/compare.sh`` can run it against
the original package for a side-by-side figure.

Figures: ``sac_update_ms`` (median of the per-round means, thread CPU time) and ``sac_update_raw_ms``, the same
update written in plain torch (``F.linear`` MLPs, hand-written tanh-normal log-density, same Adam), with
``sac_update_vs_raw`` their ratio (1.0: no overhead).

Run: ``python benchmarks/bench_sac_update.py``. The last line printed is one JSON object of the figures.
"""
from __future__ import annotations

import json
import math
import statistics
import time

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import SACLoss, SoftUpdate

BATCH, N_OBS, N_ACT, HIDDEN, GAMMA = 256, 3, 1, [256, 256], 0.99


def _data(n: int = 10_000) -> TensorDict:
    return TensorDict({
        "observation": torch.randn(n, N_OBS),
        "action": torch.rand(n, N_ACT) * 2 - 1,
        "next": {"observation": torch.randn(n, N_OBS), "reward": torch.randn(n, 1),
                 "done": torch.zeros(n, 1, dtype=torch.bool), "terminated": torch.zeros(n, 1, dtype=torch.bool)},
    }, [n])


def ours_update():
    actor_net = nn.Sequential(MLP(in_features=N_OBS, out_features=2 * N_ACT, num_cells=HIDDEN,
                                  activation_class=nn.ReLU), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(actor_net, ["observation"], ["loc", "scale"]), ["loc", "scale"],
                               distribution_class=TanhNormal)
    qvalue = ValueOperator(MLP(in_features=N_OBS + N_ACT, out_features=1, num_cells=HIDDEN,
                               activation_class=nn.ReLU), ["observation", "action"])
    loss = SACLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2", target_entropy=-float(N_ACT))
    loss.make_value_estimator(gamma=GAMMA)
    updater = SoftUpdate(loss, tau=0.005)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-3)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=BATCH)
    buffer.extend(_data())

    def step():
        out = loss(buffer.sample())
        total = out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]
        optim.zero_grad()
        total.backward()
        optim.step()
        updater.step()

    return step


def raw_update():
    def mlp(n_in, n_out):
        sizes = [n_in, *HIDDEN, n_out]
        return [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]

    def run(layers, x, detach=False):
        for i, lin in enumerate(layers):
            w, b = (lin.weight.detach(), lin.bias.detach()) if detach else (lin.weight, lin.bias)
            x = F.linear(x, w, b)
            if i < len(layers) - 1:
                x = x.relu()
        return x

    actor = mlp(N_OBS, 2 * N_ACT)
    qs = [mlp(N_OBS + N_ACT, 1) for _ in range(2)]
    targets = [[nn.Linear(lin.in_features, lin.out_features) for lin in q] for q in qs]
    for q, t in zip(qs, targets):
        for lq, lt in zip(q, t):
            lt.load_state_dict(lq.state_dict())
            lt.requires_grad_(False)
    log_alpha = torch.zeros((), requires_grad=True)
    params = [p for layers in [actor, *qs] for lin in layers for p in lin.parameters()] + [log_alpha]
    target_params = [p for t in targets for lin in t for p in lin.parameters()]
    online_q = [p for q in qs for lin in q for p in lin.parameters()]
    optim = torch.optim.Adam(params, lr=1e-3)
    data = _data()
    n = data.shape[0]
    obs_all, act_all, nobs_all = data["observation"], data["action"], data["next", "observation"]
    rew_all, term_all = data["next", "reward"], data["next", "terminated"]
    log_2pi = math.log(2 * math.pi)

    def sample(o):
        loc, raw_scale = run(actor, o).chunk(2, -1)
        scale = F.softplus(raw_scale + 0.5413) + 1e-4
        u = loc + scale * torch.randn_like(loc)
        lp = -0.5 * ((u - loc) / scale) ** 2 - scale.log() - 0.5 * log_2pi
        lp = lp - 2 * (math.log(2) - u - F.softplus(-2 * u))  # tanh change of variables
        return u.tanh(), lp.sum(-1, keepdim=True)

    def step():
        idx = torch.randint(n, (BATCH,))
        obs, act, nobs, rew, term = obs_all[idx], act_all[idx], nobs_all[idx], rew_all[idx], term_all[idx]
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            na, nlp = sample(nobs)
            x = torch.cat([nobs, na], -1)
            next_v = torch.minimum(run(targets[0], x), run(targets[1], x)) - alpha * nlp
            target = rew + GAMMA * (~term).float() * next_v
        x = torch.cat([obs, act], -1)
        loss_q = sum(F.mse_loss(run(q, x), target) for q in qs)
        a, lp = sample(obs)
        x = torch.cat([obs, a], -1)
        loss_actor = (alpha * lp - torch.minimum(run(qs[0], x, True), run(qs[1], x, True))).mean()
        loss_alpha = (-log_alpha * (lp.detach() - float(N_ACT))).mean()
        optim.zero_grad()
        (loss_actor + loss_q + loss_alpha).backward()
        optim.step()
        with torch.no_grad():
            torch._foreach_lerp_(target_params, online_q, 0.005)

    return step


def main(rounds: int = 7, per_round: int = 30) -> dict[str, float]:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    steps = {"ours": ours_update(), "raw": raw_update()}
    means = {k: [] for k in steps}
    for step in steps.values():
        for _ in range(5):
            step()
    for _ in range(rounds):  # interleaved rounds, thread CPU time: load from other processes hits both alike
        for name, step in steps.items():
            t0 = time.thread_time()
            for _ in range(per_round):
                step()
            means[name].append((time.thread_time() - t0) / per_round)
    ours, raw = statistics.median(means["ours"]), statistics.median(means["raw"])
    figures = {"sac_update_ms": ours * 1e3, "sac_update_raw_ms": raw * 1e3, "sac_update_vs_raw": ours / raw}
    for key, value in figures.items():
        print(f"{key:>24}: {value:.4g}")
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}))
    return figures


if __name__ == "__main__":
    main()
