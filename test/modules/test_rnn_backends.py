"""The recurrent-mode kernels ("pad", "scan", "triton") agree, "auto" keeps the fastest measured, and the
"triton" backend's matmul precision and compute dtype behave as TorchRL documents.

On CPU the "triton" kernel runs with ``torch.compile(backend="aot_eager")`` (same graphs, no Triton code
generation; ``fullgraph=True`` proves there is no graph break); on a GPU machine the CUDA cases compile it
with Inductor (Triton kernels) and run it through the modules.
"""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.modules.tensordict_module import GRUModule, LSTMModule, set_recurrent_mode
from torchrl.modules.tensordict_module import _recurrent_base
from torchrl.modules.tensordict_module._recurrent_auto import BackendChooser, problem_key
from torchrl.modules.tensordict_module._rnn_core import padded_run, scan_run
from torchrl.modules.tensordict_module._rnn_triton import _PrecisionMM, _mm, recurrent_mm, tf32_split, triton_run
from torchrl.testing import get_available_devices
from torchrl.testing._host_syncs import count_host_syncs

DEVICES = [pytest.param(d, marks=pytest.mark.cuda) if d.type == "cuda" else d for d in get_available_devices()]
# float32: the backends sum in different orders (fused ATen kernels, separate matmuls); over 12 steps with
# resets the outputs and gradients agree to 1e-4 (float64: 1e-5, in practice ~1e-12)
TOL = {torch.float64: 1e-5, torch.float32: 1e-4}


@pytest.fixture
def no_tf32():
    """cuDNN's RNNs use TF32 on Ampere+ by default; the agreement claims are about full float32."""
    previous = torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    yield
    torch.backends.cudnn.allow_tf32 = previous[0]
    torch.set_float32_matmul_precision(previous[1])


def _problem(mode, layers, dtype, device, n=4, steps=12, hidden=5, seed=0):
    torch.manual_seed(seed)
    rnn = (torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU)(3, hidden, num_layers=layers, batch_first=True)
    rnn = rnn.to(device=device, dtype=dtype)
    x = torch.randn(n, steps, 3, device=device, dtype=dtype, requires_grad=True)
    starts = torch.rand(n, steps, device=device) < 0.25
    starts[:, 0] = True
    states = [torch.randn(n, steps, layers, hidden, device=device, dtype=dtype, requires_grad=True) for _ in range(1 + (mode == "LSTM"))]
    return rnn, x, starts, states


def _run_with_grads(kernel, rnn, x, starts, states, **kwargs):
    h0, c0 = (states + [None])[:2]
    y, h, c = kernel(rnn, x, h0, c0, starts, **kwargs)
    # weigh every output and step differently so that a wrong gradient cannot cancel out
    weights = [torch.linspace(-1, 1, t.numel(), device=t.device, dtype=t.dtype).reshape(t.shape) for t in (y, h)]
    loss = (y * weights[0]).sum() + (h * weights[1]).sum() + (0 if c is None else (c * c).sum())
    inputs = [x, *states, *rnn.parameters()]
    return [y, h] + ([c] if c is not None else []), torch.autograd.grad(loss, inputs)


def _triton_kwargs(device):
    return {"compile_backend": "inductor" if device.type == "cuda" else "aot_eager"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_kernels_agree_with_resets(mode, layers, dtype, device, no_tf32):
    rnn, x, starts, states = _problem(mode, layers, dtype, device)
    outs, grads = _run_with_grads(padded_run, rnn, x, starts, states)
    tol = TOL[dtype]
    for kernel, kwargs in ((scan_run, {}), (triton_run, _triton_kwargs(device))):
        other_outs, other_grads = _run_with_grads(kernel, rnn, x, starts, states, **kwargs)
        for a, b in zip(outs + list(grads), other_outs + list(other_grads)):
            assert a.dtype == b.dtype == dtype and a.device == b.device
            torch.testing.assert_close(b, a, atol=tol, rtol=tol)
    # the resets matter: without them the outputs differ
    y_no_reset = scan_run(rnn, x, states[0], (states + [None])[1], None)[0]
    assert not torch.allclose(y_no_reset, outs[0], atol=1e-3)


def _module(cls, backend, dtype, device, layers=2, **kwargs):
    torch.manual_seed(0)
    module = cls(
        input_size=3, hidden_size=5, num_layers=layers, in_key="obs", out_key="feat", recurrent_backend=backend,
        device=device, **kwargs,
    )
    return module.to(dtype)


def _data(module, n=3, steps=10, dtype=torch.float64, device="cpu", seed=1):
    torch.manual_seed(seed)
    is_init = torch.rand(n, steps, 1, device=device) < 0.3
    is_init[:, 0] = True
    data = TensorDict(obs=torch.randn(n, steps, 3, device=device, dtype=dtype), is_init=is_init, batch_size=[n, steps])
    for key, shape in zip(module._state_keys, module._state_shapes()):
        data[key] = torch.randn(n, steps, *shape, device=device, dtype=dtype)
    return data


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
def test_modules_agree_across_backends(cls, device, no_tf32):
    backends = ["pad", "scan"] + (["triton"] if device.type == "cuda" and _recurrent_base._has_triton() else [])
    results = []
    for backend in backends:
        module = _module(cls, backend, torch.float64, device)
        data = _data(module, device=device)
        data["obs"].requires_grad_(True)
        with set_recurrent_mode(True):
            out = module(data)
        keys = ["feat", *module._next_state_keys]
        loss = sum((out[k] * torch.arange(out[k].numel(), device=device).reshape(out[k].shape)).sum() for k in keys)
        grads = torch.autograd.grad(loss, [data["obs"], *module.parameters()])
        results.append(([out[k] for k in keys], grads))
    for outs, grads in results[1:]:
        for a, b in zip(results[0][0] + list(results[0][1]), outs + list(grads)):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_host_syncs_per_kernel(mode):
    rnn, x, starts, states = _problem(mode, 2, torch.float32, torch.device("cpu"))
    h0, c0 = (states + [None])[:2]
    # the counter is a dispatch mode, which torch.compile refuses: count on the same functions run eagerly
    with torch.compiler.set_stance("force_eager"), count_host_syncs() as syncs:
        _, h, c = triton_run(rnn, x, h0, c0, starts)
        (h.sum() + (0 if c is None else c.sum())).backward()
    assert syncs.count == 0, syncs.report()
    with count_host_syncs() as syncs:
        scan_run(rnn, x, h0, c0, starts)
    assert syncs.count == 1, syncs.report()  # which steps have resets: one read for all layers
    with count_host_syncs() as syncs:
        padded_run(rnn, x, h0, c0, starts)
    assert syncs.count == 2, syncs.report()  # where the segments start and their lengths (the group shapes)


@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
def test_sequential_step_reads_nothing_off_cpu(cls):
    """Collection steps: on an accelerator (here the meta device) the reset masking needs no host read."""
    module = cls(input_size=3, hidden_size=4, in_key="obs", out_key="f", device="meta")
    td = TensorDict(obs=torch.randn(5, 3, device="meta"), is_init=torch.zeros(5, 1, dtype=torch.bool, device="meta"), batch_size=[5])
    for key, shape in zip(module._state_keys, module._state_shapes()):
        td[key] = torch.zeros(5, *shape, device="meta")
    with count_host_syncs() as syncs:
        out = module(td)
    assert syncs.count == 0, syncs.report()
    assert out["f"].device.type == "meta" and out["next", module._state_keys[0]].shape == (5, 1, 4)
    cpu = cls(input_size=3, hidden_size=4, in_key="obs", out_key="f")
    td = TensorDict(obs=torch.randn(5, 3), is_init=torch.zeros(5, 1, dtype=torch.bool), batch_size=[5])
    for key, shape in zip(module._state_keys, module._state_shapes()):
        td[key] = torch.zeros(5, *shape)
    with count_host_syncs() as syncs:
        cpu(td)
    assert syncs.count == 1  # on CPU one read skips the masking when no episode starts


# -- "auto": the fastest measured ---------------------------------------------------------------------------


class FakeClock:
    """A timer that only advances when a fake backend 'runs'."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_chooser_keeps_the_fastest_and_caches():
    clock = FakeClock()
    chooser = BackendChooser(timer=clock, repeats=2)
    calls = {"pad": 0, "scan": 0, "triton": 0}
    cost = {"pad": 0.030, "scan": 0.012, "triton": 0.020}

    def run(name):
        def go():
            calls[name] += 1
            clock.now += cost[name] * (100 if calls[name] == 1 else 1)  # the warm-up (compilation) is slow

        return go

    cpu = torch.device("cpu")
    assert chooser.choose("k", {name: run(name) for name in cost}, device=cpu) == "scan"
    assert chooser.timings["k"] == pytest.approx(cost)  # warm-up excluded, best of the timed runs
    assert calls == {"pad": 3, "scan": 3, "triton": 3}
    assert chooser.choose("k", {name: run(name) for name in cost}, device=cpu) == "scan"
    assert calls == {"pad": 3, "scan": 3, "triton": 3}  # cached: nothing ran
    cost["pad"] = 0.001
    assert chooser.choose("other", {name: run(name) for name in cost}, device=cpu) == "pad"
    assert min(chooser.timings["other"], key=chooser.timings["other"].get) == "pad"
    with pytest.raises(ValueError, match="no candidate backend to measure"):
        chooser.choose("empty", {}, device=cpu)


@pytest.mark.parametrize("fastest", ["pad", "scan"])
def test_auto_module_runs_the_fastest_measured(monkeypatch, fastest):
    clock = FakeClock()
    chooser = BackendChooser(timer=clock, repeats=2)
    monkeypatch.setattr(_recurrent_base, "AUTO", chooser)
    ran = []

    def timed(name, kernel, seconds):
        def wrapped(*args, **kwargs):
            ran.append(name)
            clock.now += seconds
            return kernel(*args, **kwargs)

        return wrapped

    slow, quick = (0.5, 0.1) if fastest == "scan" else (0.1, 0.5)
    monkeypatch.setattr(_recurrent_base, "padded_run", timed("pad", padded_run, slow))
    monkeypatch.setattr(_recurrent_base, "scan_run", timed("scan", scan_run, quick))
    module = _module(LSTMModule, "auto", torch.float32, "cpu")
    data = _data(module, dtype=torch.float32)
    with set_recurrent_mode(True):
        out = module(data.clone())
    (key,) = chooser.choices
    assert key == problem_key(module.lstm, data["obs"], True)
    assert chooser.choices[key] == fastest == min(chooser.timings[key], key=chooser.timings[key].get)
    assert set(chooser.timings[key]) == {"pad", "scan"}  # no "triton" candidate on CPU
    assert ran == ["pad"] * 3 + ["scan"] * 3 + [fastest]
    ref = _module(LSTMModule, fastest, torch.float32, "cpu")
    with set_recurrent_mode(True):
        torch.testing.assert_close(out["feat"], ref(data.clone())["feat"], atol=0, rtol=0)
        ran.clear()
        module(_data(module, steps=9, dtype=torch.float32))  # same size bucket: no new measurement
        assert ran == [fastest]
        with torch.no_grad():
            module(data.clone())  # inference is another problem: measured again
    assert len(chooser.choices) == 2 and ran[1:] == ["pad"] * 3 + ["scan"] * 3 + [chooser.choices[key[:-1] + (False,)]]


@pytest.mark.parametrize("device", DEVICES)
def test_auto_real_measurement(monkeypatch, device):
    """With the real clock: the choice is the fastest of the measured candidates and computes what it computes."""
    chooser = BackendChooser()
    monkeypatch.setattr(_recurrent_base, "AUTO", chooser)
    module = _module(GRUModule, "auto", torch.float32, device)
    data = _data(module, dtype=torch.float32, device=device)
    with set_recurrent_mode(True):
        out = module(data.clone())["feat"]
        ((key, choice),) = chooser.choices.items()
        timings = chooser.timings[key]
        expected = {"pad", "scan"} | ({"triton"} if device.type == "cuda" and _recurrent_base._has_triton() else set())
        assert set(timings) == expected and choice == min(timings, key=timings.get)
        assert all(0 < t < 60 for t in timings.values())
        ref = _module(GRUModule, choice, torch.float32, device)(data.clone())["feat"]
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


def test_triton_kernel_without_biases():
    for mode in ("LSTM", "GRU"):
        torch.manual_seed(0)
        rnn = (torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU)(3, 4, num_layers=2, bias=False, batch_first=True)
        x = torch.randn(3, 7, 3)
        starts = torch.rand(3, 7) < 0.3
        starts[:, 0] = True
        ref = padded_run(rnn, x, None, None, starts)
        out = triton_run(rnn, x, None, None, starts, compile_backend="aot_eager")
        for a, b in zip(ref, out):
            if a is not None:
                torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_auto_measuring_keeps_the_random_stream(monkeypatch):
    monkeypatch.setattr(_recurrent_base, "AUTO", BackendChooser())
    module = _module(GRUModule, "auto", torch.float32, "cpu", dropout=0.5)  # dropout draws random numbers
    data = _data(module, dtype=torch.float32)
    draws = []
    for _ in range(2):  # the first call measures, the second only looks up
        torch.manual_seed(0)
        with set_recurrent_mode(True):
            module(data.clone())
        draws.append(torch.rand(3))
    torch.testing.assert_close(draws[0], draws[1], atol=0, rtol=0)


# -- triton backend: compute dtype and matmul precision -----------------------------------------------------------------


def test_tf32_split_and_three_product_matmul():
    torch.manual_seed(0)
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    hi, lo = tf32_split(a)
    assert torch.equal(hi + lo, a) and not torch.equal(hi, a)
    assert torch.all(hi.view(torch.int32) & 0x1FFF == 0)  # 10 mantissa bits left
    exact = a.double() @ b.double()
    x3 = _mm(a, b, "tf32x3").double()
    one = (hi @ tf32_split(b)[0]).double()
    assert (x3 - exact).abs().max() < 1e-4 < (one - exact).abs().max()


class _RecordPrecision(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mm.default:
            self.seen.append(torch.get_float32_matmul_precision())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("precision,setting", [("tf32", "high"), ("ieee", "highest")])
def test_precision_scoped_to_forward_and_backward(precision, setting):
    previous = torch.get_float32_matmul_precision()
    other = "medium"
    torch.set_float32_matmul_precision(other)
    try:
        a = torch.randn(4, 3, requires_grad=True)
        b = torch.randn(3, 5, requires_grad=True)
        with _RecordPrecision() as record:
            out = _PrecisionMM.apply(a, b, precision)
            assert torch.get_float32_matmul_precision() == other
            out.sum().backward()
        assert record.seen == [setting] * 3  # forward, grad of a, grad of b
        assert torch.get_float32_matmul_precision() == other
        torch.testing.assert_close(a.grad, torch.ones(4, 5) @ b.detach().t())
    finally:
        torch.set_float32_matmul_precision(previous)


def test_recurrent_mm_compute_dtype():
    torch.manual_seed(0)
    h, w = torch.randn(4, 8), torch.randn(8, 12)
    plain = recurrent_mm(h, w, precision="tf32")  # CPU float32: a plain (IEEE) matmul, no precision games
    assert plain.grad_fn is None and torch.equal(plain, h @ w)
    low = recurrent_mm(h, w.to(torch.bfloat16), precision="ieee")
    assert low.dtype == torch.float32
    torch.testing.assert_close(low, (h.bfloat16() @ w.bfloat16()).float(), atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_triton_compute_dtype_casts_inside_only(mode):
    rnn, x, starts, states = _problem(mode, 2, torch.float32, torch.device("cpu"))
    h0, c0 = (states + [None])[:2]
    ref = triton_run(rnn, x, h0, c0, starts, compile_backend="aot_eager")
    low = triton_run(rnn, x, h0, c0, starts, compile_backend="aot_eager", matmul_dtype=torch.bfloat16)
    for a, b in zip(ref, low):
        if a is None:
            continue
        assert b.dtype == torch.float32
        assert 0 < (a - b).abs().max() < 5e-2  # bfloat16 products: close, not equal
    low[0].sum().backward()
    assert rnn.weight_hh_l0.grad.dtype == torch.float32
    x64 = x.detach().double()
    rnn64 = rnn.double()
    y64 = triton_run(rnn64, x64, None, None, starts, compile_backend="aot_eager", matmul_dtype=torch.bfloat16)[0]
    torch.testing.assert_close(y64, scan_run(rnn64, x64, None, None, starts)[0])  # float64 data computes in float64


@pytest.mark.parametrize("device", DEVICES)
def test_triton_precision(device):
    """``ieee`` matches the scan; ``tf32`` is close; on CPU every precision is the IEEE matmul."""
    rnn, x, starts, states = _problem("LSTM", 1, torch.float32, device, n=64, steps=20, hidden=64)
    kwargs = _triton_kwargs(device)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.no_grad():
            exact = scan_run(rnn, x, *states, starts)[0]
            ieee = triton_run(rnn, x, *states, starts, precision="ieee", **kwargs)[0]
            fast = triton_run(rnn, x, *states, starts, precision="tf32", **kwargs)[0]
            x3 = triton_run(rnn, x, *states, starts, precision="tf32x3", **kwargs)[0]
        assert torch.get_float32_matmul_precision() == "highest"  # scoped to the kernel
    finally:
        torch.set_float32_matmul_precision(previous)
    torch.testing.assert_close(ieee, exact, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(x3, exact, atol=1e-4, rtol=1e-4)
    if device.type == "cpu":
        assert torch.equal(fast, ieee) and torch.equal(x3, ieee)
    else:
        assert (fast - exact).abs().max() < 5e-2


@pytest.mark.parametrize("device", DEVICES)
def test_triton_module(device):
    """Through the module: on CUDA it runs (Inductor); elsewhere it says it needs CUDA."""
    if not _recurrent_base._has_triton():
        with pytest.raises(RuntimeError, match="requires the triton package"):
            _module(LSTMModule, "triton", torch.float32, device)
        return
    module = _module(LSTMModule, "triton", torch.float32, device)
    data = _data(module, dtype=torch.float32, device=device)
    with set_recurrent_mode(True):
        if device.type != "cuda":
            with pytest.raises(RuntimeError, match="runs on CUDA only"):
                module(data)
            return
        out = module(data.clone())["feat"]
        ref = _module(LSTMModule, "scan", torch.float32, device)(data.clone())["feat"]
    torch.testing.assert_close(out, ref, atol=1e-3, rtol=1e-3)  # default precision may be TF32
