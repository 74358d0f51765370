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


def _lstm_cell(gi_t, hh, c, next_mask, next_h, next_c):
    i, f, g, o = (gi_t + hh).chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c, torch.where(next_mask, next_h, h), torch.where(next_mask, next_c, c)


def _gru_cell(gi_t, hh, b_hh, h, next_mask, next_h):
    if b_hh is not None:
        hh = hh + b_hh
    i_r, i_z, i_n = gi_t.chunk(3, -1)
    h_r, h_z, h_n = hh.chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    cand = torch.tanh(i_n + r * h_n)
    h = cand + z * (h - cand)
    return h, torch.where(next_mask, next_h, h)


def _compiled(cell, backend: str):
    key = (cell.__name__, backend)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = torch.compile(cell, fullgraph=True, backend=backend)
    return fn


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
    if a.dtype != torch.float32 or a.device.type != "cuda":
        out = a @ w_t
    elif precision == ("ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"):
        out = a @ w_t
    else:
        out = _PrecisionMM.apply(a, w_t, precision)
    return out if out.dtype == h.dtype else out.to(h.dtype)


def _shifted(value: torch.Tensor | None, zeros: torch.Tensor, steps: int) -> tuple:
    """Per step ``t``: the stored state of step ``t + 1`` (``zeros`` for the last step, or without a store)."""
    if value is None:
        return (zeros,) * steps
    return (*value.unbind(1)[1:], zeros)


def _layer(cell, is_lstm, gi, w_hh_t, b_hh, h_init, c_init, next_masks, precision):
    n, steps = gi.shape[:2]
    zeros = gi.new_zeros(n, w_hh_t.shape[0])
    h_next, c_next = _shifted(h_init, zeros, steps), _shifted(c_init, zeros, steps)
    h = h_init[:, 0] if h_init is not None else zeros
    c = c_init[:, 0] if c_init is not None else zeros
    hs, cs = [], []
    for t, gi_t in enumerate(gi.unbind(1)):
        hh = recurrent_mm(h, w_hh_t, precision=precision)
        if is_lstm:
            out_h, out_c, h, c = cell(gi_t, hh, c, next_masks[t], h_next[t], c_next[t])
            cs.append(out_c)
        else:
            out_h, h = cell(gi_t, hh, b_hh, h, next_masks[t], h_next[t])
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
    cell = _compiled(_lstm_cell if is_lstm else _gru_cell, compile_backend)
    nxt = torch.zeros(n, steps, 1, dtype=torch.bool, device=x.device)
    if starts is not None:
        nxt[:, :-1, 0] = starts[:, 1:]
    next_masks = nxt.unbind(1)
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
            h, c = _layer(cell, True, gi, w_hh_t, None, h_0, _layer_slice(c_init, layer), next_masks, precision)
            cs.append(c)
        else:
            gi = F.linear(layer_in, w_ih, b_ih)
            h, _ = _layer(cell, False, gi, w_hh_t, b_hh, h_0, None, next_masks, precision)
        hs.append(h)
        layer_in = h
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            layer_in = F.dropout(h, rnn.dropout, True)
    return hs[-1], torch.stack(hs, 2), torch.stack(cs, 2) if is_lstm else None
