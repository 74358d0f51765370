"""Issue 19's GPU figures: each against the same work written in raw torch, in the same process, on one device.

Sections (each one's figures, or its error, under its name in the JSON line; one failing section does not stop
the others):

- ``rb``: ``TensorDictReplayBuffer(LazyTensorStorage(1M, device))``: ``sample(4096)`` and ``extend(4096)`` vs raw
  preallocated leaves (``torch.randint`` on the device + ``index_select`` / slice copy); prioritized
  sample + ``update_priority`` vs the raw uniform sample (targets 0.9 / 0.8 / 0.4, ratio = raw time / ours).
- ``pendulum``: ``PendulumEnv(device, batch_size=[B]).rollout(200, policy)`` with an MLP policy vs the same
  dynamics and MLP in a raw loop, B = 1,024 and 65,536 (target 0.9).
- ``sac``: one SAC update (loss, backward, Adam, soft update) at batch 4,096 with 256x256 networks: eager, then
  ``torch.compile`` + ``tensordict.nn.CudaGraphModule``; speed-up (target 3x) and the largest difference of the
  three losses between the two on the same fixed batch and parameters (target 1e-5).
- ``ppo``: ``ClipPPOLoss`` forward + backward on 65,536 transitions vs hand-written torch (target 0.95).
- ``collector``: ``Collector(PendulumEnv(batch_size=[4096], device), mlp)``: frames/s.
- ``gae``: ``vec_generalized_advantage_estimate`` [256 x 1000] vs a reverse loop.
- ``rnn``: ``benchmarks/gpu/bench_rnn.py``'s backends (when present).

Run: ``python benchmarks/gpu/bench_gpu.py [--device cuda] [--small] [--only rb,sac]``. ``--small`` shrinks every
size so that the script runs on a CPU in seconds (the CI smoke test); its figures mean nothing.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import math
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import CudaGraphModule, NormalParamExtractor, TensorDictModule
from torch import nn

HERE = Path(__file__).resolve().parent


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device, iters: int) -> float:
    """Seconds per call of ``fn`` over ``iters`` calls, the device drained before and after."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / iters


def paired(fns: dict[str, Callable[[], object]], device: torch.device, iters: int, rounds: int) -> dict[str, float]:
    """Median seconds per call of each function, measured in interleaved rounds after two warm-up calls each."""
    for fn in fns.values():
        fn()
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(timed(fn, device, iters))
    return {name: statistics.median(values) for name, values in times.items()}


@contextlib.contextmanager
def _patched(obj, **values):
    old = {k: getattr(obj, k) for k in values}
    for k, v in values.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(obj, k, v)


def mlp(n_in: int, n_out: int, hidden: list[int], device, activation=nn.ReLU) -> nn.Sequential:
    sizes = [n_in, *hidden, n_out]
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b, device=device))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------- replay buffer
def bench_rb(device: torch.device, small: bool) -> dict:
    from torchrl.data import LazyTensorStorage, TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer

    capacity, batch, obs, act = (10_000, 256, 17, 6) if small else (1_000_000, 4096, 17, 6)
    iters, rounds = (5, 3) if small else (200, 7)

    def make(n):
        return TensorDict({
            "observation": torch.randn(n, obs, device=device), "action": torch.randn(n, act, device=device),
            "next": {"observation": torch.randn(n, obs, device=device), "reward": torch.randn(n, 1, device=device),
                     "done": torch.zeros(n, 1, dtype=torch.bool, device=device)},
        }, [n], device=device)

    chunk = make(batch)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity, device=device), batch_size=batch)
    for _ in range(capacity // batch):
        rb.extend(chunk)
    leaves = [torch.empty(capacity, *v.shape[1:], dtype=v.dtype, device=device)
              for v in chunk.values(True, True)]
    src = list(chunk.values(True, True))
    cursor = [0]

    def raw_sample():
        idx = torch.randint(0, capacity, (batch,), device=device)
        return [leaf.index_select(0, idx) for leaf in leaves]

    def raw_extend():
        i = cursor[0]
        if i + batch > capacity:
            i = 0
        for dst, s in zip(leaves, src):
            dst[i:i + batch] = s
        cursor[0] = i + batch

    out = {}
    t = paired({"ours": rb.sample, "raw": raw_sample}, device, iters, rounds)
    out["sample_vs_raw"], out["sample_us"] = t["raw"] / t["ours"], t["ours"] * 1e6
    t = paired({"ours": lambda: rb.extend(chunk), "raw": raw_extend}, device, iters, rounds)
    out["extend_vs_raw"], out["extend_us"] = t["raw"] / t["ours"], t["ours"] * 1e6
    prb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(capacity, device=device),
                                            batch_size=batch)
    for _ in range(capacity // batch):
        prb.extend(chunk)
    priority = torch.rand(batch, device=device) + 1e-3

    def sample_update():
        sample = prb.sample()
        prb.update_priority(sample["index"], priority)

    t = paired({"ours": sample_update, "raw": raw_sample}, device, iters, rounds)
    out["prioritized_sample_update_vs_raw_uniform"] = t["raw"] / t["ours"]
    out["sample_device"] = str(rb.sample()["observation"].device)
    return out


# ---------------------------------------------------------------------------------------------- pendulum
def raw_pendulum(policy: nn.Module, batch: int, steps: int, device: torch.device) -> None:
    """Pendulum-v1 dynamics with the MLP, keeping what a rollout keeps (obs, action, next obs, reward, done)."""
    g, m, length, dt, max_speed, max_torque = 10.0, 1.0, 1.0, 0.05, 8.0, 2.0
    th = torch.rand(batch, device=device) * 2 * math.pi - math.pi
    thdot = torch.rand(batch, device=device) * 2 - 1
    obs = torch.empty(batch, steps, 3, device=device)
    nobs = torch.empty(batch, steps, 3, device=device)
    acts = torch.empty(batch, steps, 1, device=device)
    rews = torch.empty(batch, steps, 1, device=device)
    done = torch.zeros(batch, steps, 1, dtype=torch.bool, device=device)
    with torch.no_grad():
        o = torch.stack([th.cos(), th.sin(), thdot], -1)
        for t in range(steps):
            obs[:, t] = o
            u = policy(o).clamp(-max_torque, max_torque)
            acts[:, t] = u
            u = u.squeeze(-1)
            costs = (((th + math.pi) % (2 * math.pi)) - math.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
            thdot = (thdot + (3 * g / (2 * length) * th.sin() + 3.0 / (m * length**2) * u) * dt).clamp(
                -max_speed, max_speed)
            th = th + thdot * dt
            rews[:, t] = -costs.unsqueeze(-1)
            o = torch.stack([th.cos(), th.sin(), thdot], -1)
            nobs[:, t] = o
            done[:, t] = False


def bench_pendulum(device: torch.device, small: bool) -> dict:
    from torchrl.envs import PendulumEnv

    steps = 20 if small else 200
    out = {}
    for batch in ((16, 64) if small else (1024, 65536)):
        net = mlp(3, 1, [64, 64], device, nn.Tanh)
        policy = TensorDictModule(net, ["observation"], ["action"])
        env = PendulumEnv(device=device, batch_size=[batch])
        with torch.no_grad():
            t = paired({"ours": lambda: env.rollout(steps, policy, break_when_any_done=False),
                        "raw": lambda: raw_pendulum(net, batch, steps, device)}, device, 1, 3 if small else 5)
        out[f"b{batch}_vs_raw"] = t["raw"] / t["ours"]
        out[f"b{batch}_us_per_step"] = t["ours"] / steps * 1e6
        out[f"b{batch}_raw_us_per_step"] = t["raw"] / steps * 1e6
    return out


# ---------------------------------------------------------------------------------------------- SAC
def _sac_parts(device, batch, hidden):
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import SACLoss, SoftUpdate
    from torchrl.train import fast_adam

    actor = ProbabilisticActor(
        TensorDictModule(nn.Sequential(mlp(17, 12, hidden, device), NormalParamExtractor()), ["observation"],
                         ["loc", "scale"]), ["loc", "scale"], distribution_class=TanhNormal)
    # torchrl's MLP concatenates its inputs (observation, action)
    qvalue = ValueOperator(MLP(in_features=23, out_features=1, num_cells=hidden, activation_class=nn.ReLU,
                               device=device), ["observation", "action"])
    loss = SACLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2", target_entropy=-6.0)
    loss.make_value_estimator(gamma=0.99)
    return loss, SoftUpdate(loss, tau=0.005), fast_adam


def _sac_batch(device, batch):
    gen = torch.Generator().manual_seed(0)
    return TensorDict({
        "observation": torch.randn(batch, 17, generator=gen), "action": torch.rand(batch, 6, generator=gen) * 2 - 1,
        "next": {"observation": torch.randn(batch, 17, generator=gen), "reward": torch.randn(batch, 1, generator=gen),
                 "done": torch.zeros(batch, 1, dtype=torch.bool), "terminated": torch.zeros(batch, 1, dtype=torch.bool)},
    }, [batch]).to(device)


def bench_sac(device: torch.device, small: bool, backend: str = "inductor") -> dict:
    batch, hidden = (64, [32, 32]) if small else (4096, [256, 256])
    torch.manual_seed(0)
    loss_eager, updater_eager, fast_adam = _sac_parts(device, batch, hidden)
    loss_fast = copy.deepcopy(loss_eager)
    from torchrl.objectives import SoftUpdate

    updater_fast = SoftUpdate(loss_fast, tau=0.005)
    data = _sac_batch(device, batch)
    graphs = device.type == "cuda"

    def make_update(loss, updater, capturable):
        optim = fast_adam(loss.parameters(), lr=1e-3, capturable=capturable) if capturable else fast_adam(
            loss.parameters(), lr=1e-3)

        def update(sample):
            out = loss(sample)
            total = out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]
            optim.zero_grad(set_to_none=False)
            total.backward()
            optim.step()
            updater.step()
            return out.select("loss_actor", "loss_qvalue", "loss_alpha").detach()

        return update

    # the same losses on the same batch and parameters, eager vs compiled (sampling noise fixed by the seed)
    import torch._inductor.config as inductor_config

    with torch.no_grad(), _patched(inductor_config, fallback_random=True):  # eager's random streams when compiled
        torch.manual_seed(1)
        ref = loss_eager(data.clone())
        compiled_forward = torch.compile(loss_fast, backend=backend)
        torch.manual_seed(1)
        got = compiled_forward(data.clone())
    diff = max((ref[k] - got[k]).abs().max().item() for k in ("loss_actor", "loss_qvalue", "loss_alpha"))

    eager = make_update(loss_eager, updater_eager, False)
    fast = torch.compile(make_update(loss_fast, updater_fast, graphs), backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = CudaGraphModule(fast, warmup=3, in_keys=[], out_keys=[]) if graphs else fast
    for _ in range(5):  # compilation, then the graph's warm-up and capture
        fast(data)
    iters, rounds = (3, 2) if small else (50, 5)
    t = paired({"eager": lambda: eager(data), "fast": lambda: fast(data)}, device, iters, rounds)
    return {"eager_ms": t["eager"] * 1e3, "compiled_graphed_ms": t["fast"] * 1e3,
            "speedup": t["eager"] / t["fast"], "loss_max_abs_diff": diff, "cudagraphs": graphs}


# ---------------------------------------------------------------------------------------------- PPO
def bench_ppo(device: torch.device, small: bool) -> dict:
    from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import ClipPPOLoss

    batch, eps = (512 if small else 65536), 0.2
    torch.manual_seed(0)
    pnet = nn.Sequential(mlp(17, 12, [64, 64], device, nn.Tanh), NormalParamExtractor())
    vnet = mlp(17, 1, [64, 64], device, nn.Tanh)
    actor = ProbabilisticActor(TensorDictModule(pnet, ["observation"], ["loc", "scale"]), ["loc", "scale"],
                               distribution_class=TanhNormal, return_log_prob=True)
    loss = ClipPPOLoss(actor, ValueOperator(vnet, ["observation"]), clip_epsilon=eps, entropy_coeff=0.01)
    td = TensorDict({
        "observation": torch.randn(batch, 17), "action": torch.rand(batch, 6) * 1.8 - 0.9,
        "action_log_prob": torch.randn(batch) - 3.0, "advantage": torch.randn(batch, 1),
        "value_target": torch.randn(batch, 1)}, [batch]).to(device)
    params = list(loss.parameters())
    raw_p, raw_v = copy.deepcopy(pnet), copy.deepcopy(vnet)
    raw_params = list(raw_p.parameters()) + list(raw_v.parameters())
    obs, action, old_lp, adv, target = (td[k] for k in ("observation", "action", "action_log_prob", "advantage",
                                                         "value_target"))
    lo, hi = math.log1p(-eps), math.log1p(eps)
    half_log_2pi = 0.5 * math.log(2 * math.pi)

    def normal_lp(u, loc, scale):
        return -((u - loc) / scale).pow(2) / 2 - scale.log() - half_log_2pi

    def tanh_log_det(u):
        return 2 * (math.log(2) - u - F.softplus(-2 * u))

    def ours():
        for p in params:
            p.grad = None
        out = loss(td)
        (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()

    def raw():
        for p in raw_params:
            p.grad = None
        a = adv.squeeze(-1)
        u_data = torch.atanh(action.clamp(-1 + 1e-6, 1 - 1e-6))
        loc, scale = raw_p(obs)
        log_w = (normal_lp(u_data, loc, scale) - tanh_log_det(u_data)).sum(-1) - old_lp
        objective = -torch.minimum(log_w.exp() * a, log_w.clamp(lo, hi).exp() * a).mean()
        u = loc + scale * torch.randn_like(loc)
        entropy = -(normal_lp(u, loc, scale) - tanh_log_det(u)).sum(-1)
        (objective + F.smooth_l1_loss(raw_v(obs), target) - 0.01 * entropy.mean()).backward()

    t = paired({"ours": ours, "raw": raw}, device, 3 if small else 30, 3 if small else 7)
    return {"fwd_bwd_vs_raw": t["raw"] / t["ours"], "ours_ms": t["ours"] * 1e3, "raw_ms": t["raw"] * 1e3}


# ---------------------------------------------------------------------------------------------- collector
def bench_collector(device: torch.device, small: bool) -> dict:
    from torchrl.collectors import Collector
    from torchrl.envs import PendulumEnv

    batch, per_batch = (32, 32 * 10) if small else (4096, 4096 * 50)
    policy = TensorDictModule(mlp(3, 1, [64, 64], device, nn.Tanh), ["observation"], ["action"])
    collector = Collector(PendulumEnv(device=device, batch_size=[batch]), policy, frames_per_batch=per_batch,
                          total_frames=per_batch * (3 if small else 12), device=device)
    it = iter(collector)
    next(it)  # warm-up batch
    sync(device)
    t0, frames = time.perf_counter(), 0
    for data in it:
        frames += data.numel()
    sync(device)
    seconds = time.perf_counter() - t0
    collector.shutdown()
    return {"frames_per_s": frames / seconds, "batch_device": str(data.device)}


# ---------------------------------------------------------------------------------------------- GAE
def bench_gae(device: torch.device, small: bool) -> dict:
    from torchrl.objectives.value.functional import vec_generalized_advantage_estimate

    b, t = (8, 50) if small else (256, 1000)
    gamma, lmbda = 0.99, 0.95
    reward, value, next_value = (torch.randn(b, t, 1, device=device) for _ in range(3))
    done = torch.rand(b, t, 1, device=device) < 0.01
    terminated = done.clone()

    def loop():
        adv = torch.empty_like(reward)
        running = torch.zeros(b, 1, device=device)
        not_term, not_done = (~terminated).float(), (~done).float()
        delta = reward + gamma * next_value * not_term - value
        for i in reversed(range(t)):
            running = delta[:, i] + gamma * lmbda * not_done[:, i] * running
            adv[:, i] = running
        return adv

    def vec():
        return vec_generalized_advantage_estimate(gamma, lmbda, value, next_value, reward, done, terminated)

    assert torch.allclose(vec()[0], loop(), atol=1e-4)
    tm = paired({"vec": vec, "loop": loop}, device, 3 if small else 10, 3 if small else 5)
    return {"vec_vs_loop": tm["loop"] / tm["vec"], "vec_ms": tm["vec"] * 1e3}


def bench_rnn(device: torch.device, small: bool) -> dict:
    path = HERE / "bench_rnn.py"
    if not path.exists():
        return {"skipped": "benchmarks/gpu/bench_rnn.py not present"}
    spec = importlib.util.spec_from_file_location("bench_rnn", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run(device, small=small)


SECTIONS = {"rb": bench_rb, "pendulum": bench_pendulum, "sac": bench_sac, "ppo": bench_ppo,
            "collector": bench_collector, "gae": bench_gae, "rnn": bench_rnn}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny sizes (a CPU smoke run; figures mean nothing)")
    parser.add_argument("--only", default="", help="comma-separated sections (default: all)")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the SAC section")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    names = [n for n in args.only.split(",") if n] or list(SECTIONS)
    result: dict = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                    "torch": torch.__version__, "small": args.small}
    for name in names:
        t0 = time.perf_counter()
        try:
            extra = {"backend": args.compile_backend} if name == "sac" else {}
            result[name] = SECTIONS[name](device, args.small, **extra)
        except Exception as err:  # one broken section must not hide the others' figures
            result[name] = {"error": f"{type(err).__name__}: {err}",
                            "where": traceback.format_exc().strip().splitlines()[-6:]}
        result[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"{name}: {result[name]}", file=sys.stderr, flush=True)
    print(json.dumps(result, default=str))
    return result


if __name__ == "__main__":
    main()
