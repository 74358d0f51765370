"""The ``"triton"`` recurrent backend: the masked recurrence with its per-step cell compiled (Inductor -> Triton).

Same layout and semantics as :func:`~torchrl.modules.tensordict_module._rnn_core.scan_run` (``x [N, T, F]``,
states ``[N, T, L, H]``, ``starts [N, T]``; the state after every step is returned), computed differently:

- the input projections of a layer are one matmul over all steps, as in the scan;
- each step is one hidden-to-hidden matmul (cuBLAS, in ``matmul_dtype`` and at ``precision``; see
  :func:`recurrent_mm`) and one fused elementwise kernel compiled by :func:`torch.compile` (the gates, the
  state update, and the reset of the state entering the *next* step: ``torch.where(starts[:, t + 1], stored,
  new)``), so there is no host sync and no data-dependent shape: the loop queues ``2 T`` kernels per layer.

LSTM projections (``proj_size``) are not handled here: the module runs the ``"pad"`` kernel for them, as
TorchRL's triton backend keeps the padded semantics for projections.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from torchrl.modules.tensordict_module._rnn_core import _layer_slice, layer_weights

__all__ = ["recurrent_mm", "tf32_split", "triton_run"]

_COMPILED: dict[tuple[str, str], object] = {}


def _compiled(fn, backend: str):
    key = (fn.__name__, backend)
    compiled = _COMPILED.get(key)
    if compiled is None:
        compiled = _COMPILED[key] = torch.compile(fn, fullgraph=True, backend=backend)
    return compiled


# The cells are autograd Functions whose forward and backward are each one compiled elementwise graph, run on
# detached tensors: the compiled code never sees autograd, so it is specialised only on dtype, device and
# (after the first change, symbolic) shapes. Each cell also returns the state entering the *next* step:
# ``where(next_mask, stored, new)`` (the reset), so a step needs no other kernel than its matmul.


def _detached(*tensors):
    """Detached and contiguous: the compiled cells are specialised on strides too (a no-op on the
    time-major slices :func:`_layer` passes; a copy only for an expanded gradient such as that of a sum)."""
    return [t.detach().contiguous() for t in tensors]


def _lstm_forward(gi, hh, c_in, mask, h_stored, c_stored):
    i, f, g, o = (gi + hh).chunk(4, -1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c = f * c_in + i * g
    tc = torch.tanh(c)
    h = o * tc
    return h, c, torch.where(mask, h_stored, h), torch.where(mask, c_stored, c), torch.cat([i, f, g, o], -1), tc


def _lstm_backward(g_h, g_c, g_h_enter, g_c_enter, mask, gates, tc, c_in):
    i, f, g, o = gates.chunk(4, -1)
    g_h = g_h + torch.where(mask, 0.0, g_h_enter)
    g_c = g_c + torch.where(mask, 0.0, g_c_enter) + g_h * o * (1 - tc * tc)
    g_z = torch.cat([g_c * g * i * (1 - i), g_c * c_in * f * (1 - f), g_c * i * (1 - g * g), g_h * tc * o * (1 - o)], -1)
    return g_z, g_c * f, torch.where(mask, g_h_enter, 0.0), torch.where(mask, g_c_enter, 0.0)


class _LSTMCell(torch.autograd.Function):
    """``(gi_t, hh = h @ w_hh.T, c_in, next_mask, h_stored, c_stored) -> (h, c, h entering t+1, c entering t+1)``."""

    @staticmethod
    def forward(ctx, gi, hh, c_in, mask, h_stored, c_stored, backend):
        args = _detached(gi, hh, c_in, mask, h_stored, c_stored)
        h, c, h_enter, c_enter, gates, tc = _compiled(_lstm_forward, backend)(*args)
        ctx.save_for_backward(mask, gates, tc, args[2])
        ctx.backend = backend
        return h, c, h_enter, c_enter

    @staticmethod
    def backward(ctx, g_h, g_c, g_h_enter, g_c_enter):
        grads = _detached(g_h, g_c, g_h_enter, g_c_enter)
        g_z, g_c_in, g_h_stored, g_c_stored = _compiled(_lstm_backward, ctx.backend)(*grads, *ctx.saved_tensors)
        return g_z, g_z, g_c_in, None, g_h_stored, g_c_stored, None


def _gru_forward(gi, hh, h_in, b_hn, mask, h_stored):
    i_r, i_u, i_n = gi.chunk(3, -1)
    h_r, h_u, h_n = hh.chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    u = torch.sigmoid(i_u + h_u)
    hn = h_n + b_hn
    n = torch.tanh(i_n + r * hn)
    h = n + u * (h_in - n)
    return h, torch.where(mask, h_stored, h), torch.cat([r, u, n, hn], -1)


def _gru_backward(g_h, g_h_enter, mask, saved, h_in):
    r, u, n, hn = saved.chunk(4, -1)
    g_h = g_h + torch.where(mask, 0.0, g_h_enter)
    g_n = g_h * (1 - u) * (1 - n * n)
    g_r = g_n * hn * r * (1 - r)
    g_u = g_h * (h_in - n) * u * (1 - u)
    g_hn = g_n * r
    return torch.cat([g_r, g_u, g_n], -1), torch.cat([g_r, g_u, g_hn], -1), g_h * u, g_hn.sum(0), torch.where(mask, g_h_enter, 0.0)


class _GRUCell(torch.autograd.Function):
    """``(gi_t, hh = h_in @ w_hh.T, h_in, b_hn, next_mask, h_stored) -> (h, h entering t+1)``."""

    @staticmethod
    def forward(ctx, gi, hh, h_in, b_hn, mask, h_stored, backend):
        args = _detached(gi, hh, h_in, b_hn, mask, h_stored)
        h, h_enter, saved = _compiled(_gru_forward, backend)(*args)
        ctx.save_for_backward(mask, saved, args[2])
        ctx.backend = backend
        return h, h_enter

    @staticmethod
    def backward(ctx, g_h, g_h_enter):
        grads = _detached(g_h, g_h_enter)
        g_gi, g_hh, g_h_in, g_b_hn, g_h_stored = _compiled(_gru_backward, ctx.backend)(*grads, *ctx.saved_tensors)
        return g_gi, g_hh, g_h_in, g_b_hn, None, g_h_stored, None


def tf32_split(value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hi, lo)`` with ``hi`` the float32 ``value`` truncated to TF32's 10 mantissa bits and ``lo = value - hi``
    (exact in float32), so that ``a @ b ~= a_hi @ b_hi + a_hi @ b_lo + a_lo @ b_hi`` in three TF32 products."""
    hi = (value.view(torch.int32) & -8192).view(torch.float32)  # clear the 13 low mantissa bits
    return hi, value - hi


def _mm(a: torch.Tensor, b: torch.Tensor, precision: str) -> torch.Tensor:
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if precision == "ieee" else "high")  # "high": TF32 in cuBLAS
    try:
        if precision != "tf32x3":
            return a @ b
        a_hi, a_lo = tf32_split(a)
        b_hi, b_lo = tf32_split(b)
        return (a_hi @ b_lo + a_lo @ b_hi) + a_hi @ b_hi
    finally:
        torch.set_float32_matmul_precision(previous)


class _PrecisionMM(torch.autograd.Function):
    """``a @ b`` whose forward and backward matmuls run at one precision, whatever torch's setting then."""

    @staticmethod
    def forward(ctx, a, b, precision):
        ctx.save_for_backward(a, b)
        ctx.precision = precision
        return _mm(a, b, precision)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = _mm(grad, b.t(), ctx.precision) if ctx.needs_input_grad[0] else None
        grad_b = _mm(a.t(), grad, ctx.precision) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b, None


def recurrent_mm(h: torch.Tensor, w_t: torch.Tensor, *, precision: str) -> torch.Tensor:
    """``h @ w_t`` in ``w_t``'s dtype (the compute dtype), returned in ``h``'s dtype.

    float32 products on CUDA run at ``precision`` (``"ieee"``, ``"tf32"`` or ``"tf32x3"``) in the forward
    and the backward pass; when torch's own setting already gives it, the plain matmul runs. CPU matmuls
    and other dtypes ignore ``precision`` (a CPU float32 matmul is IEEE).
    """
    a = h if h.dtype == w_t.dtype else h.to(w_t.dtype)
    plain = a.dtype != torch.float32 or a.device.type != "cuda"
    if plain or precision == ("ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"):
        out = a @ w_t
    else:
        out = _PrecisionMM.apply(a, w_t, precision)
    return out if out.dtype == h.dtype else out.to(h.dtype)


def _time_major(value: torch.Tensor | None) -> tuple | None:
    """``value [N, T, ...]`` as ``T`` contiguous ``[N, ...]`` steps (one copy, then views)."""
    return None if value is None else value.transpose(0, 1).contiguous().unbind(0)


def _layer(is_lstm, gi, w_hh_t, b_hn, h_init, c_init, next_masks, precision, backend):
    """One layer over time; ``gi [N, T, G]``, ``h_init``/``c_init [N, T, H]`` or None, ``next_masks``: per step."""
    n, steps = gi.shape[:2]
    # distinct zero tensors: the compiled cells are specialised on which of their inputs alias each other
    zeros = gi.new_zeros(4, n, w_hh_t.shape[0]).unbind(0)
    h_stored, c_stored = _time_major(h_init), _time_major(c_init)
    h_next = (zeros[0],) * steps if h_init is None else (*h_stored[1:], zeros[0])
    c_next = (zeros[1],) * steps if c_init is None else (*c_stored[1:], zeros[1])
    h = zeros[2] if h_init is None else h_stored[0]
    c = zeros[3] if c_init is None else c_stored[0]
    hs, cs = [], []
    for t, gi_t in enumerate(_time_major(gi)):
        hh = recurrent_mm(h, w_hh_t, precision=precision)
        if is_lstm:
            out_h, out_c, h, c = _LSTMCell.apply(gi_t, hh, c, next_masks[t], h_next[t], c_next[t], backend)
            cs.append(out_c)
        else:
            out_h, h = _GRUCell.apply(gi_t, hh, h, b_hn, next_masks[t], h_next[t], backend)
        hs.append(out_h)
    return torch.stack(hs, 1), (torch.stack(cs, 1) if is_lstm else None)


def triton_run(
    rnn: nn.RNNBase,
    x: torch.Tensor,
    h_init: torch.Tensor | None,
    c_init: torch.Tensor | None,
    starts: torch.Tensor | None,
    *,
    matmul_dtype: torch.dtype | None = None,
    precision: str = "ieee",
    compile_backend: str = "inductor",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The masked recurrence with compiled cells; returns ``(y [N, T, H], h [N, T, L, H], c [N, T, L, H] or None)``.

    Args:
        rnn (nn.LSTM or nn.GRU): unidirectional, without projection; its weights are used as they are.
        x (torch.Tensor): ``[N, T, F]`` inputs.
        h_init, c_init (torch.Tensor or None): ``[N, T, L, H]`` stored states (zeros where ``None``).
        starts (torch.Tensor or None): ``[N, T]`` segment starts (step 0 always starts one).

    Keyword Args:
        matmul_dtype (torch.dtype, optional): dtype of the hidden-to-hidden matmul of float32 data (e.g.
            ``torch.bfloat16``); other data computes in its own dtype. Defaults to the data's dtype.
        precision (str, optional): float32 matmul precision on CUDA (see :func:`recurrent_mm`).
        compile_backend (str, optional): the :func:`torch.compile` backend of the cells (``"inductor"``
            generates Triton kernels on CUDA; tests use ``"aot_eager"`` on CPU).
    """
    is_lstm = rnn.mode == "LSTM"
    n, steps, _ = x.shape
    nxt = torch.zeros(steps, n, 1, dtype=torch.bool, device=x.device)
    if starts is not None:
        nxt[:-1, :, 0] = starts[:, 1:].t()
    next_masks = nxt.unbind(0)
    if matmul_dtype is None or x.dtype != torch.float32:
        matmul_dtype = x.dtype
    layer_in = x
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        w_ih, w_hh, b_ih, b_hh, _ = layer_weights(rnn, layer)
        w_hh_t = w_hh.t().to(matmul_dtype)
        h_0 = _layer_slice(h_init, layer)
        if is_lstm:
            gi = F.linear(layer_in, w_ih, None if b_ih is None else b_ih + b_hh)
            h, c = _layer(True, gi, w_hh_t, None, h_0, _layer_slice(c_init, layer), next_masks, precision, compile_backend)
            cs.append(c)
        else:
            # the reset and update gates' hidden biases join the input projection; the new gate's stays in the cell
            size = rnn.hidden_size
            b_hn = x.new_zeros(size) if b_hh is None else b_hh[2 * size :]
            bias = None if b_ih is None else b_ih + torch.cat([b_hh[: 2 * size], b_hh.new_zeros(size)])
            gi = F.linear(layer_in, w_ih, bias)
            h, _ = _layer(False, gi, w_hh_t, b_hn, h_0, None, next_masks, precision, compile_backend)
        hs.append(h)
        layer_in = h
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            layer_in = F.dropout(h, rnn.dropout, True)
    return hs[-1], torch.stack(hs, 2), torch.stack(cs, 2) if is_lstm else None
