"""Python implementations of LSTM/GRU layers and cells (``LSTM``, ``GRU``, ``LSTMCell``, ``GRUCell``).

They hold exactly the parameters of their ``torch.nn`` counterparts (same names and shapes, so state
dicts are interchangeable) and compute the same function, but in plain tensor ops: they run under
``vmap``, can be compiled, and accept a per-step reset ``mask`` that the fused ATen kernels lack.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from torchrl.modules.tensordict_module._rnn_core import gru_layer, layer_weights, lstm_layer

try:  # torch's scan operator (private module path): only needed with use_scan=True
    from torch._higher_order_ops.scan import scan as _torch_scan
except ImportError:  # pragma: no cover - depends on the torch build
    _torch_scan = None

__all__ = ["GRU", "GRUBase", "GRUCell", "LSTM", "LSTMBase", "LSTMCell"]


def _scan_layer(step, carry, xs):
    """Runs ``step`` over the leading dim of ``xs`` with torch's ``scan`` operator (compile-friendly)."""
    if _torch_scan is None:
        raise RuntimeError("use_scan=True needs torch's scan operator (torch._higher_order_ops.scan), missing in this torch.")
    return _torch_scan(step, carry, xs)


class LSTMCell(nn.RNNCellBase):
    """One LSTM step in Python; same parameters and results as :class:`torch.nn.LSTMCell`.

    Examples:
        >>> import torch
        >>> from torchrl.modules import LSTMCell
        >>> cell = LSTMCell(3, 4)
        >>> ref = torch.nn.LSTMCell(3, 4)
        >>> _ = ref.load_state_dict(cell.state_dict())
        >>> x = torch.randn(2, 3)
        >>> all(torch.allclose(a, b, atol=1e-6) for a, b in zip(cell(x), ref(x)))
        True
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        unbatched = input.dim() == 1
        if unbatched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = input.new_zeros(input.shape[0], self.hidden_size)
            hx = (zeros, zeros)
        elif unbatched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = self.lstm_cell(input, hx[0], hx[1])
        if unbatched:
            return h.squeeze(0), c.squeeze(0)
        return h, c

    def lstm_cell(self, x: torch.Tensor, hx: torch.Tensor, cx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The LSTM update for batched ``x``, ``hx``, ``cx``."""
        gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(hx, self.weight_hh, self.bias_hh)
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * cx + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class GRUCell(nn.RNNCellBase):
    """One GRU step in Python; same parameters and results as :class:`torch.nn.GRUCell`.

    Examples:
        >>> import torch
        >>> from torchrl.modules import GRUCell
        >>> cell = GRUCell(3, 4)
        >>> ref = torch.nn.GRUCell(3, 4)
        >>> _ = ref.load_state_dict(cell.state_dict())
        >>> x = torch.randn(2, 3)
        >>> torch.allclose(cell(x), ref(x), atol=1e-6)
        True
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
        unbatched = input.dim() == 1
        if unbatched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = input.new_zeros(input.shape[0], self.hidden_size)
        elif unbatched:
            hx = hx.unsqueeze(0)
        h = self.gru_cell(input, hx)
        return h.squeeze(0) if unbatched else h

    def gru_cell(self, x: torch.Tensor, hx: torch.Tensor) -> torch.Tensor:
        """The GRU update for batched ``x`` and ``hx``."""
        i_r, i_z, i_n = F.linear(x, self.weight_ih, self.bias_ih).chunk(3, -1)
        h_r, h_z, h_n = F.linear(hx, self.weight_hh, self.bias_hh).chunk(3, -1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return n + z * (hx - n)


class _PythonRNN(nn.RNNBase):
    """Shared ``forward`` of the Python LSTM/GRU; subclasses give ``_initial`` (states) and ``_layer``."""

    use_scan: bool = False

    def forward(self, input: torch.Tensor, hx=None, mask: torch.Tensor | None = None):
        """Runs the layers over ``input``.

        Args:
            input: ``[N, T, F]`` (``[T, N, F]`` when ``batch_first=False``) or unbatched ``[T, F]``.
            hx: initial state(s), shaped as for the ``torch.nn`` module (zeros when omitted).
            mask (bool tensor, optional): ``[N, T]`` (``[T, N]`` when not batch first): where True, the
                state entering that step is reset to ``hx`` (a new sequence starts there).

        Returns:
            ``(output, final_state)`` exactly as the ``torch.nn`` module returns them.
        """
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            if mask is not None:
                mask = mask.unsqueeze(0 if self.batch_first else 1)
        x = input if self.batch_first else input.transpose(0, 1)
        if mask is not None and not self.batch_first:
            mask = mask.transpose(0, 1)
        n, steps = x.shape[:2]
        directions = 2 if self.bidirectional else 1
        if directions == 2 and mask is not None:
            raise ValueError(
                f"{type(self).__name__}: a reset mask needs a unidirectional recurrence (the backward direction "
                f"would cross the resets); split the sequences instead."
            )
        states = self._initial(hx, n, x, batched)
        layer_in = x
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                idx = layer * directions + d
                inits = [s[idx].unsqueeze(1).expand(n, steps, s.shape[-1]) for s in states]
                seq = layer_in.flip(1) if d else layer_in
                suffix = "_reverse" if d else ""
                per_step = self._layer(seq, layer, suffix, inits, mask)
                for f, s in zip(finals, per_step):
                    f.append(s[:, -1])
                outs.append(per_step[0].flip(1) if d else per_step[0])
            layer_in = torch.cat(outs, -1) if directions == 2 else outs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        output = layer_in if self.batch_first else layer_in.transpose(0, 1)
        final = [torch.stack(f, 0) for f in finals]
        if not batched:
            output = output.squeeze(0 if self.batch_first else 1)
            final = [f.squeeze(1) for f in final]
        return output, (tuple(final) if len(final) == 2 else final[0])


class LSTMBase(_PythonRNN):
    """A Python LSTM layer stack (see :class:`LSTM`)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "LSTM", input_size, hidden_size, num_layers=num_layers, bias=bias, batch_first=batch_first,
            dropout=dropout, bidirectional=bidirectional, proj_size=proj_size, device=device, dtype=dtype,
        )

    def _initial(self, hx, n: int, x: torch.Tensor, batched: bool):
        layers = self.num_layers * (2 if self.bidirectional else 1)
        h_size = self.proj_size or self.hidden_size
        if hx is None:
            return [x.new_zeros(layers, n, h_size), x.new_zeros(layers, n, self.hidden_size)]
        h, c = hx
        if not batched:
            h, c = h.unsqueeze(1), c.unsqueeze(1)
        return [h, c]

    def _layer(self, seq, layer, suffix, inits, mask):
        w_ih, w_hh, b_ih, b_hh, w_hr = layer_weights(self, layer, suffix)
        gi = F.linear(seq, w_ih, None if b_ih is None else b_ih + b_hh)
        if self.use_scan:
            return _lstm_scan_op(gi, w_hh, w_hr, inits, mask)
        return lstm_layer(gi, w_hh, w_hr, inits[0], inits[1], mask, self.hidden_size)


class LSTM(LSTMBase):
    """A multi-layer LSTM written in Python; same parameters and results as :class:`torch.nn.LSTM`.

    Differences: ``batch_first`` defaults to ``True``, ``forward`` accepts a per-step reset ``mask``, and
    the module runs under ``vmap``/``torch.compile``.

    Args:
        input_size, hidden_size, num_layers, batch_first, bias, dropout, bidirectional, proj_size,
        device, dtype: as in :class:`torch.nn.LSTM`.
        use_scan (bool, optional): run the loop over time through torch's ``scan`` operator (compiles
            without unrolling; slower in eager mode). Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from torchrl.modules import LSTM
        >>> lstm = LSTM(3, 4, num_layers=2)
        >>> ref = torch.nn.LSTM(3, 4, num_layers=2, batch_first=True)
        >>> _ = ref.load_state_dict(lstm.state_dict())
        >>> x = torch.randn(5, 7, 3)
        >>> torch.allclose(lstm(x)[0], ref(x)[0], atol=1e-6)
        True
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        batch_first: bool = True,
        bias: bool = True,
        dropout: float = 0.0,
        bidirectional: float = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
        use_scan: bool = False,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bool(bidirectional), proj_size, device, dtype)
        self.use_scan = bool(use_scan)


class GRUBase(_PythonRNN):
    """A Python GRU layer stack (see :class:`GRU`)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "GRU", input_size, hidden_size, num_layers=num_layers, bias=bias, batch_first=batch_first,
            dropout=dropout, bidirectional=bidirectional, device=device, dtype=dtype,
        )

    def _initial(self, hx, n: int, x: torch.Tensor, batched: bool):
        layers = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return [x.new_zeros(layers, n, self.hidden_size)]
        return [hx if batched else hx.unsqueeze(1)]

    def _layer(self, seq, layer, suffix, inits, mask):
        w_ih, w_hh, b_ih, b_hh, _ = layer_weights(self, layer, suffix)
        gi = F.linear(seq, w_ih, b_ih)
        if self.use_scan:
            return _gru_scan_op(gi, w_hh, b_hh, inits, mask)
        return (gru_layer(gi, w_hh, b_hh, inits[0], mask),)


class GRU(GRUBase):
    """A multi-layer GRU written in Python; same parameters and results as :class:`torch.nn.GRU`.

    Differences: ``batch_first`` defaults to ``True``, ``forward`` accepts a per-step reset ``mask``, and
    the module runs under ``vmap``/``torch.compile``.

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype:
            as in :class:`torch.nn.GRU`.
        use_scan (bool, optional): run the loop over time through torch's ``scan`` operator.

    Examples:
        >>> import torch
        >>> from torchrl.modules import GRU
        >>> gru = GRU(3, 4)
        >>> ref = torch.nn.GRU(3, 4, batch_first=True)
        >>> _ = ref.load_state_dict(gru.state_dict())
        >>> x = torch.randn(5, 7, 3)
        >>> torch.allclose(gru(x)[0], ref(x)[0], atol=1e-6)
        True
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
        use_scan: bool = False,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype)
        self.use_scan = bool(use_scan)


# -- scan-operator variants (use_scan=True) ----------------------------------------------------------------
def _mask_steps(mask: torch.Tensor | None, n: int, steps: int, device) -> torch.Tensor:
    if mask is None:
        mask = torch.zeros(n, steps, dtype=torch.bool, device=device)
    return mask.transpose(0, 1).unsqueeze(-1)


def _lstm_scan_op(gi, w_hh, w_hr, inits, mask):
    n, steps = gi.shape[:2]
    h_init, c_init = inits
    w_hh_t = w_hh.t()
    w_hr_t = w_hr.t() if w_hr is not None else None

    def step(carry, xs):
        h, c = carry
        g_t, m_t, h0_t, c0_t = xs
        h = torch.where(m_t, h0_t, h)
        c = torch.where(m_t, c0_t, c)
        i, f, g, o = (g_t + h @ w_hh_t).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        if w_hr_t is not None:
            h = h @ w_hr_t
        return (h, c), (h.clone(), c.clone())

    xs = (gi.transpose(0, 1), _mask_steps(mask, n, steps, gi.device), h_init.transpose(0, 1), c_init.transpose(0, 1))
    _, (hs, cs) = _scan_layer(step, (h_init[:, 0].clone(), c_init[:, 0].clone()), xs)
    return hs.transpose(0, 1), cs.transpose(0, 1)


def _gru_scan_op(gi, w_hh, b_hh, inits, mask):
    n, steps = gi.shape[:2]
    h_init = inits[0]

    def step(h, xs):
        g_t, m_t, h0_t = xs
        h = torch.where(m_t, h0_t, h)
        i_r, i_z, i_n = g_t.chunk(3, -1)
        h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        cand = torch.tanh(i_n + r * h_n)
        h = cand + z * (h - cand)
        return h, h.clone()

    xs = (gi.transpose(0, 1), _mask_steps(mask, n, steps, gi.device), h_init.transpose(0, 1))
    _, hs = _scan_layer(step, h_init[:, 0].clone(), xs)
    return (hs.transpose(0, 1),)
