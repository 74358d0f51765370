"""``LSTMNet``: an MLP embedding, an LSTM and a linear read-out, with hidden states TensorDict-friendly."""
from __future__ import annotations

import torch
from torch import nn

from torchrl.modules.models._mlp import MLP

__all__ = ["LSTMNet"]


def _python_lstm(lstm: nn.LSTM, x: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor]):
    """``nn.LSTM`` (batch-first) evaluated step by step with its own weights; works under ``torch.vmap``."""
    h0, c0 = hx  # (num_layers, B, H)
    hs, cs = [], []
    for layer in range(lstm.num_layers):
        w_ih = getattr(lstm, f"weight_ih_l{layer}")
        w_hh = getattr(lstm, f"weight_hh_l{layer}")
        b = getattr(lstm, f"bias_ih_l{layer}") + getattr(lstm, f"bias_hh_l{layer}") if lstm.bias else 0.0
        h, c = h0[layer], c0[layer]
        gates_x = x @ w_ih.T + b
        outs = []
        for t in range(x.shape[1]):
            i, f, g, o = (gates_x[:, t] + h @ w_hh.T).chunk(4, -1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
            outs.append(h)
        x = torch.stack(outs, 1)
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs, 0), torch.stack(cs, 0))


class LSTMNet(nn.Module):
    """An :class:`MLP` embedding, an ``nn.LSTM`` (batch first) and a linear layer to ``out_features``.

    ``forward(input, hidden0_in, hidden1_in)`` returns ``(output, hidden0_in, hidden1_in, hidden0_out,
    hidden1_out)``: the input hidden states are returned next to the new ones, as an environment returns
    the observation and the next observation. Hidden states have shape ``(batch, [time,] num_layers,
    hidden_size)``; with a time dimension, the LSTM starts from the states of the first step and the
    output states are zero-padded along time so that every entry fits a ``[batch, time]`` TensorDict. A
    2d input is one step for a batch; a 1d input one step of one sample.

    Args:
        out_features (int): output size.
        lstm_kwargs (dict): ``nn.LSTM`` arguments (``input_size``, ``hidden_size``, ``num_layers``, ...);
            ``batch_first`` is always ``True``.
        mlp_kwargs (dict): :class:`MLP` arguments of the embedding (its ``out_features`` must be the LSTM's
            ``input_size``).
        device (torch.device, optional): device of the parameters.

    Keyword Args:
        lstm_backend (str, optional): ``"torch"`` (``nn.LSTM`` kernels) or ``"torchrl"`` (a step-by-step
            evaluation with the same weights, slower but usable under ``torch.vmap``). Defaults to
            ``"torch"``.

    Raises:
        ValueError: for an unknown ``lstm_backend``.
        RuntimeError: in ``forward``, if only one of the two hidden states is given.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import LSTMNet
        >>> net = LSTMNet(10, {"input_size": 5, "hidden_size": 5}, {"out_features": 5})
        >>> y, h0_in, h1_in, h0_out, h1_out = net(torch.randn(7, 6, 4))
        >>> y.shape, h0_out.shape
        (torch.Size([7, 6, 10]), torch.Size([7, 6, 1, 5]))
    """

    def __init__(
        self, out_features: int, lstm_kwargs, mlp_kwargs, device=None, *, lstm_backend: str | None = None
    ) -> None:
        super().__init__()
        backend = "torch" if lstm_backend is None else lstm_backend
        if backend not in ("torch", "torchrl"):
            raise ValueError(f"LSTMNet: lstm_backend must be 'torch' or 'torchrl', got {lstm_backend!r}.")
        self.lstm_backend = backend
        lstm_kwargs = dict(lstm_kwargs, batch_first=True)
        self.mlp = MLP(device=device, **mlp_kwargs)
        self.lstm = nn.LSTM(device=device, **lstm_kwargs)
        self.linear = nn.LazyLinear(out_features, device=device)

    def forward(
        self, input: torch.Tensor, hidden0_in: torch.Tensor | None = None, hidden1_in: torch.Tensor | None = None
    ):  # noqa: A002 - TorchRL's argument name
        x = self.mlp(input)
        one_sample = x.ndim == 1
        if one_sample:
            x = x.unsqueeze(0)
            hidden0_in = None if hidden0_in is None else hidden0_in.unsqueeze(0)
            hidden1_in = None if hidden1_in is None else hidden1_in.unsqueeze(0)
        one_step = x.ndim == 2
        if one_step:
            x = x.unsqueeze(1)
        batch, steps = x.shape[:2]
        layers, size = self.lstm.num_layers, self.lstm.hidden_size
        if hidden0_in is None and hidden1_in is None:
            shape = (batch, layers, size) if one_step else (batch, steps, layers, size)
            hidden0_in = x.new_zeros(shape)
            hidden1_in = x.new_zeros(shape)
        elif hidden0_in is None or hidden1_in is None:
            raise RuntimeError("LSTMNet: pass both hidden0_in and hidden1_in, or neither.")
        h0 = hidden0_in if one_step else hidden0_in[:, 0]
        c0 = hidden1_in if one_step else hidden1_in[:, 0]
        hx = (h0.transpose(0, 1).contiguous(), c0.transpose(0, 1).contiguous())
        if self.lstm_backend == "torch":
            y, (h, c) = self.lstm(x, hx)
        else:
            y, (h, c) = _python_lstm(self.lstm, x, hx)
        y = self.linear(y)
        h, c = h.transpose(0, 1), c.transpose(0, 1)
        if one_step:
            y = y.squeeze(1)
        else:
            pad = h.new_zeros(batch, steps - 1, layers, size)
            h = torch.cat([pad, h.unsqueeze(1)], 1)
            c = torch.cat([pad, c.unsqueeze(1)], 1)
        out = (y, hidden0_in, hidden1_in, h, c)
        if one_sample:
            out = tuple(t.squeeze(0) for t in out)
        return out
