"""Recurrence kernels shared by the recurrent modules: sequences with resets inside them.

Layout: inputs ``x`` are ``[N, T, F]`` (batch first), states are ``[N, T, L, H]`` (one entry per step and
layer). ``starts[n, t]`` marks a step where a new segment begins: the state entering that step is the
*stored* state at that step (``h_init[n, t]``, zeros when no state is stored) instead of the one carried
from ``t - 1``. Step 0 of every row always starts a segment.

Two kernels:

- :func:`padded_run` (``"pad"`` backend): cuts the rows into segments at the starts, pads them in groups
  of similar lengths and runs each group through ATen's fused ``torch.lstm``/``torch.gru`` (one dense call
  per group and layer): no Python loop over time.
- :func:`scan_run` (``"scan"`` backend): a fixed-shape masked recurrence (no data-dependent shapes, so it
  compiles); the input projections of a layer are one matmul over all steps, the loop over time only does
  the hidden-state update.

Both return the output and the state after every step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["layer_weights", "padded_run", "scan_run", "lstm_layer", "gru_layer"]


def layer_weights(rnn: nn.RNNBase, layer: int, suffix: str = "", dtype: torch.dtype | None = None):
    """``(w_ih, w_hh, b_ih, b_hh, w_hr)`` of one layer (biases/projection may be ``None``)."""

    def get(name):
        value = getattr(rnn, f"{name}_l{layer}{suffix}", None)
        if value is not None and dtype is not None and value.dtype != dtype:
            value = value.to(dtype)
        return value

    return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")


def _flat_weights(rnn: nn.RNNBase, dtype: torch.dtype | None) -> list[torch.Tensor]:
    weights = rnn._flat_weights  # kept in sync by nn.RNNBase (also after .to() / load_state_dict)
    if dtype is not None:
        weights = [w.to(dtype) if w.dtype != dtype else w for w in weights]
    return weights


def _reset_steps(starts: torch.Tensor | None, n_steps: int) -> list[bool]:
    """Per step: does any row start a segment there (step 0 excluded)? One host sync for the whole call."""
    if starts is None or n_steps < 2:
        return [False] * n_steps
    return [False] + starts[:, 1:].any(0).tolist()


def _steps(value: torch.Tensor | None) -> tuple | None:
    """``value [N, T, ...]`` as ``T`` views ``[N, ...]``: one ``unbind`` (its backward is one stack), not ``T``
    selects (each of whose backwards writes a zero tensor of the whole input)."""
    return None if value is None else value.unbind(1)


def _select(mask: torch.Tensor, stored: torch.Tensor | None, carried: torch.Tensor) -> torch.Tensor:
    if stored is None:
        return carried.masked_fill(mask.unsqueeze(-1), 0)
    return torch.where(mask.unsqueeze(-1), stored, carried)


def lstm_layer(
    gi: torch.Tensor,
    w_hh: torch.Tensor,
    w_hr: torch.Tensor | None,
    h_init: torch.Tensor | None,
    c_init: torch.Tensor | None,
    starts: torch.Tensor | None,
    hidden_size: int,
    resets: list[bool] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM layer over time. ``gi = x @ w_ih.T + b_ih + b_hh`` for all steps ``[N, T, 4H]``.

    ``resets[t]``: whether any row restarts at step ``t`` (computed from ``starts`` when not given).
    Returns ``(h, c)`` after every step: ``[N, T, H_out]`` and ``[N, T, H]``.
    """
    n, steps = gi.shape[:2]
    h_size = w_hr.shape[0] if w_hr is not None else hidden_size
    gis, h_inits, c_inits, masks = _steps(gi), _steps(h_init), _steps(c_init), _steps(starts)
    h = h_inits[0] if h_init is not None else gi.new_zeros(n, h_size)
    c = c_inits[0] if c_init is not None else gi.new_zeros(n, hidden_size)
    w_hh_t = w_hh.t()
    w_hr_t = w_hr.t() if w_hr is not None else None
    resets = _reset_steps(starts, steps) if resets is None else resets
    hs, cs = [], []
    for t in range(steps):
        if resets[t]:
            h = _select(masks[t], None if h_init is None else h_inits[t], h)
            c = _select(masks[t], None if c_init is None else c_inits[t], c)
        gates = torch.addmm(gis[t], h, w_hh_t)
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        if w_hr_t is not None:
            h = h @ w_hr_t
        hs.append(h)
        cs.append(c)
    return torch.stack(hs, 1), torch.stack(cs, 1)


def gru_layer(
    gi: torch.Tensor,
    w_hh: torch.Tensor,
    b_hh: torch.Tensor | None,
    h_init: torch.Tensor | None,
    starts: torch.Tensor | None,
    resets: list[bool] | None = None,
) -> torch.Tensor:
    """One GRU layer over time. ``gi = x @ w_ih.T + b_ih`` for all steps ``[N, T, 3H]``; returns ``h`` per step."""
    n, steps = gi.shape[:2]
    hidden = w_hh.shape[1]
    gis, h_inits, masks = _steps(gi), _steps(h_init), _steps(starts)
    h = h_inits[0] if h_init is not None else gi.new_zeros(n, hidden)
    resets = _reset_steps(starts, steps) if resets is None else resets
    hs = []
    for t in range(steps):
        if resets[t]:
            h = _select(masks[t], None if h_init is None else h_inits[t], h)
        gh = F.linear(h, w_hh, b_hh)
        i_r, i_z, i_n = gis[t].chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        cand = torch.tanh(i_n + r * h_n)
        h = cand + z * (h - cand)
        hs.append(h)
    return torch.stack(hs, 1)


def _layer_slice(state: torch.Tensor | None, layer: int) -> torch.Tensor | None:
    return None if state is None else state[:, :, layer]


def scan_run(
    rnn: nn.RNNBase,
    x: torch.Tensor,
    h_init: torch.Tensor | None,
    c_init: torch.Tensor | None,
    starts: torch.Tensor | None,
    *,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Masked recurrence of a unidirectional ``nn.LSTM``/``nn.GRU``-like module (see the module doc).

    Returns ``(y [N, T, H_out], h [N, T, L, H_out], c [N, T, L, H] or None)``.
    """
    is_lstm = rnn.mode == "LSTM"
    resets = _reset_steps(starts, x.shape[1])
    layer_in = x
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        w_ih, w_hh, b_ih, b_hh, w_hr = layer_weights(rnn, layer, dtype=dtype)
        if is_lstm:
            bias = None if b_ih is None else b_ih + b_hh
            gi = F.linear(layer_in, w_ih, bias)
            h_0, c_0 = _layer_slice(h_init, layer), _layer_slice(c_init, layer)
            h, c = lstm_layer(gi, w_hh, w_hr, h_0, c_0, starts, rnn.hidden_size, resets)
            cs.append(c)
        else:
            gi = F.linear(layer_in, w_ih, b_ih)
            h = gru_layer(gi, w_hh, b_hh, _layer_slice(h_init, layer), starts, resets)
        hs.append(h)
        layer_in = h
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            layer_in = F.dropout(h, rnn.dropout, True)
    return hs[-1], torch.stack(hs, 2), torch.stack(cs, 2) if is_lstm else None


def _segments(starts: torch.Tensor | None, n: int, steps: int, device: torch.device):
    """``(start_index [S], lengths [S])`` of the segments of the flattened ``[N * T]`` steps."""
    if starts is None:
        start_index = torch.arange(0, n * steps, steps, device=device)
        return start_index, torch.full((n,), steps, device=device, dtype=torch.long)
    flat = starts.reshape(n, steps).clone()
    flat[:, 0] = True
    start_index = flat.reshape(-1).nonzero().squeeze(-1)
    ends = torch.cat([start_index[1:], start_index.new_tensor([n * steps])])
    return start_index, ends - start_index


def _linear_recurrence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Solves ``c[t] = a[t] * c[t-1] + b[t]`` along dim 1 (``a[:, 0]`` must be 0).

    Elementwise only (the matmuls were done for all steps at once), so the loop over time is cheap.
    """
    a_steps, b_steps = a.unbind(1), b.unbind(1)
    c = b_steps[0]
    out = [c]
    for t in range(1, len(a_steps)):
        c = torch.addcmul(b_steps[t], a_steps[t], c)
        out.append(c)
    return torch.stack(out, 1)


def _lstm_cells(layer_in, h, h_init, c_init, starts, weights) -> torch.Tensor:
    """The LSTM cell states of every step, recovered from the layer's hidden states without a time loop.

    The gates of step ``t`` only need the input and the hidden state entering ``t`` (both known), so they
    are computed for all steps at once (the output gate is not needed); the cell update is then a linear
    recurrence (:func:`_linear_recurrence`).
    """
    w_ih, w_hh, b_ih, b_hh, _ = weights
    rows = 3 * w_hh.shape[1] if w_hh.shape[0] == 4 * w_hh.shape[1] else (w_hh.shape[0] // 4) * 3
    carried = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)
    entering = _select(starts, h_init, carried)
    bias = None if b_ih is None else (b_ih + b_hh)[:rows]
    gates = F.linear(layer_in, w_ih[:rows], bias) + F.linear(entering, w_hh[:rows])
    i, f, g = gates.chunk(3, -1)
    f = torch.sigmoid(f)
    update = torch.sigmoid(i) * torch.tanh(g)
    keep = starts.unsqueeze(-1)
    if c_init is not None:
        update = update + torch.where(keep, f * c_init, torch.zeros_like(f))
    return _linear_recurrence(torch.where(keep, torch.zeros_like(f), f), update)


def _buckets(lengths: torch.Tensor, ratio: float = 2.0) -> list[tuple[torch.Tensor, int]]:
    """Segments grouped by length (longest first; within a group lengths differ by at most ``ratio``).

    Returns ``[(segment indices, padded length)]``: each group becomes one dense fused call.
    """
    lengths_sorted, order = lengths.sort(descending=True)
    values = lengths_sorted.tolist()
    groups, a = [], 0
    while a < len(values):
        longest = values[a]
        b = a + 1
        while b < len(values) and values[b] * ratio >= longest:
            b += 1
        groups.append((order[a:b], longest))
        a = b
    return groups


def padded_run(
    rnn: nn.RNNBase,
    x: torch.Tensor,
    h_init: torch.Tensor | None,
    c_init: torch.Tensor | None,
    starts: torch.Tensor | None,
    *,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Segments cut at the starts, padded in groups of similar lengths, through ATen's fused kernels.

    Each group is one dense ``torch.lstm``/``torch.gru`` call per layer (the fast oneDNN/cuDNN paths),
    so there is no Python loop over time; padding only follows the real steps, so the outputs of real
    steps are exact. Two host reads per call (where the segments start, and their lengths, which shape the
    groups); everything else is fixed-shape gathers and one scatter per layer. Layers run one call each, so every layer's hidden state at every step is an output;
    LSTM cell states are recovered with :func:`_lstm_cells`. Returns ``(y [N, T, H_out], h [N, T, L,
    H_out], c [N, T, L, H] or None)``: the state after every step, like :func:`scan_run`.
    """
    is_lstm = rnn.mode == "LSTM"
    n, steps, _ = x.shape
    total = n * steps
    device = x.device
    start_index, lengths = _segments(starts, n, steps, device)
    full_starts = torch.zeros(total, dtype=torch.bool, device=device).index_fill(0, start_index, True).reshape(n, steps)
    plans = []  # per group: first step of each segment, and the steps read (padding reads/writes row ``total``)
    for segments, longest in _buckets(lengths):
        t_range = torch.arange(longest, device=device)
        index = start_index[segments].unsqueeze(1) + t_range
        valid = t_range < lengths[segments].unsqueeze(1)
        plans.append((start_index[segments], torch.where(valid, index, total)))
    scatter = torch.cat([gather.reshape(-1) for _, gather in plans])
    h_size = rnn.proj_size if getattr(rnn, "proj_size", 0) else rnn.hidden_size

    def initial(state, layer, first, size):
        if state is None:
            return x.new_zeros(1, first.numel(), size)
        return state[:, :, layer].reshape(total, size)[first].unsqueeze(0).contiguous()

    layer_in = x
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        weights = layer_weights(rnn, layer, dtype=dtype)
        flat = [w for w in weights if w is not None]
        source = torch.cat([layer_in.reshape(total, -1), layer_in.new_zeros(1, layer_in.shape[-1])])
        outs = []
        for first, gather in plans:
            h0 = initial(h_init, layer, first, h_size)
            if is_lstm:
                hx = (h0, initial(c_init, layer, first, rnn.hidden_size))
                out = torch.lstm(source[gather], hx, flat, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
            else:
                out = torch.gru(source[gather], h0, flat, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
            outs.append(out.reshape(-1, out.shape[-1]))
        # one scatter of every group's outputs; the padded steps all land in the spare row ``total``, dropped
        h = outs[0].new_zeros(total + 1, outs[0].shape[-1]).index_put((scatter,), torch.cat(outs))
        h = h[:total].reshape(n, steps, -1)
        hs.append(h)
        if is_lstm:
            cs.append(_lstm_cells(layer_in, h, _layer_slice(h_init, layer), _layer_slice(c_init, layer), full_starts, weights))
        layer_in = h
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            layer_in = F.dropout(h, rnn.dropout, True)
    return hs[-1], torch.stack(hs, 2), torch.stack(cs, 2) if is_lstm else None
