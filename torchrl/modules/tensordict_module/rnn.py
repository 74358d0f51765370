"""Recurrent TensorDict modules: ``LSTMModule`` and ``GRUModule``.

A recurrent module reads an input entry, its recurrent state entries and ``is_init``; it writes its output
and the next state under ``"next"``. Two modes (see :class:`set_recurrent_mode`):

- **sequential** (default, collection): each entry is one step; the state entering it is the one stored in
  the data (put there by the env's ``TensorDictPrimer`` at resets and carried from ``("next", state)`` by
  ``step_mdp`` afterwards), or zeros where ``is_init`` is True (an episode starts: nothing carried over
  from a previous episode can leak in, e.g. across a partial reset).
- **recurrent** (training): the last batch dim is time. A new segment starts at step 0 and wherever
  ``is_init`` is True; the state entering a segment is the state *stored at that step* (zeros at a real
  episode start, since the primer writes zeros at resets; the saved state where a replay-buffer slice
  starts mid-episode, which ``SliceSampler`` marks with ``is_init``). On collected data the results equal
  the step-by-step ones.

**Missing state is an error, not zeros.** Without the primer the env drops the state between steps and a
policy would silently run without memory. So when the state entries are absent the module raises a
``KeyError`` saying how to add the primer, with one exception: data that is a fresh reset by
construction (every ``is_init`` True in sequential mode; every sequence starting with ``is_init`` in
recurrent mode), where the zero state that TorchRL documents as default is exactly right. Passing the
policy to the env (``MyEnv(policy=policy)``) or to a collector adds ``InitTracker`` and the primer
automatically (see :func:`~torchrl.modules.get_env_transforms_from_module`).

Backends for recurrent mode (``recurrent_backend``); all return the output and the recurrent state after
*every* step (TorchRL's padded kernel only returns the last one), so ``("next", state)`` entries written in
recurrent mode are exact and consistent with collection, and all agree on outputs and gradients
(``test/modules/test_rnn_backends.py``: float64 to 1e-5, float32 to 1e-4):

- ``"pad"`` (default): cuts sequences at the resets, pads the segments in groups of similar lengths and runs
  each group through ATen's fused kernels (cuDNN / oneDNN; no Python loop over time). Finding the segments
  reads them on the host (two syncs per call).
- ``"scan"``: a fixed-shape masked recurrence in eager torch (a Python loop over time; one host read per
  call to skip the masking at steps where no row restarts). Fastest forward on CPU.
- ``"triton"`` (CUDA only, needs the ``triton`` package; the constructor raises ``RuntimeError`` without it
  and the call raises for data on another device): the same recurrence with each step's elementwise work
  compiled by :func:`torch.compile` (Inductor generates Triton kernels), its backward written out, and the
  reset of the next step's state fused into it: one matmul and one fused kernel per step, no host sync.
  Its hidden-to-hidden matmul runs in ``recurrent_compute_dtype`` (float32 data only) and at
  ``recurrent_matmul_precision`` (forward and backward, whatever torch's setting is meanwhile); the other
  backends ignore both, as in TorchRL. LSTM projections (``proj_size``) run the ``"pad"`` kernel.
- ``"auto"``: the first call for each kind of problem (device, dtype, sizes, batch and length rounded to
  powers of two, grad mode) times every candidate on that call's data (``"pad"`` and ``"scan"``, plus
  ``"triton"`` on CUDA when available; one warm-up and two timed runs each, forward + backward when
  gradients are on) and keeps the fastest for the process (see ``_recurrent_auto.py``). Under
  :func:`torch.compile` it uses ``"scan"``. (TorchRL 0.14's ``"auto"`` is ``"pad"`` in eager mode.)
"""
from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from torchrl.modules.tensordict_module._recurrent_base import canonicalize_rnn_subset, RecurrentModuleBase
from torchrl.modules.tensordict_module._python_rnn import GRU, GRUCell, LSTM, LSTMCell
from torchrl.modules.tensordict_module._recurrent_mode import (
    get_recurrent_matmul_precision,
    recurrent_mode,
    RecurrentMatmulPrecision,
    RecurrentMatmulPrecisionUserMode,
    set_recurrent_matmul_precision,
    set_recurrent_mode,
)

__all__ = [
    "GRU",
    "GRUCell",
    "GRUModule",
    "LSTM",
    "LSTMCell",
    "LSTMModule",
    "RecurrentMatmulPrecision",
    "RecurrentMatmulPrecisionUserMode",
    "canonicalize_rnn_subset",
    "get_recurrent_matmul_precision",
    "recurrent_mode",
    "set_recurrent_matmul_precision",
    "set_recurrent_mode",
]

_Backend = Literal["auto", "pad", "scan", "triton"]
_Precision = Literal["auto", "fast", "high-prec", "ieee", "tf32", "tf32x3"]


def _check_given_rnn(owner: str, rnn: nn.RNNBase, mode: str, sizes: dict) -> None:
    given = [name for name, value in sizes.items() if value is not None]
    if given:
        raise ValueError(f"{owner}: pass either a ready-made {mode.lower()} module or its sizes, not both (got {given}).")
    if not isinstance(rnn, nn.RNNBase) or rnn.mode != mode:
        raise TypeError(f"{owner}: expected a torch.nn.{mode} (or torchrl.modules.{mode}), got {type(rnn).__name__}.")
    if not rnn.batch_first:
        raise ValueError(f"{owner}: the {mode} must be built with batch_first=True.")
    if rnn.bidirectional:
        raise ValueError(f"{owner}: a bidirectional {mode} needs future steps and cannot run step by step in an env.")


class LSTMModule(RecurrentModuleBase):
    """An LSTM that reads and writes TensorDicts, step by step (collection) or along time (training).

    Keys: reads ``[in_key, "recurrent_state_h", "recurrent_state_c", "is_init"]`` and writes
    ``[out_key, ("next", "recurrent_state_h"), ("next", "recurrent_state_c")]``. States are stored as
    ``[*batch, num_layers, size]``. See :mod:`torchrl.modules.tensordict_module.rnn` for the two modes, the
    reset rule and why missing states raise.

    Args:
        input_size (int): input features (omit when passing ``lstm``).
        hidden_size (int): hidden features.
        num_layers (int, optional): stacked layers. Defaults to 1.
        bias (bool, optional): defaults to ``True``.
        batch_first (bool, optional): must be ``True`` (TensorDict data is batch first).
        dropout (float, optional): dropout between layers (training).
        proj_size (int, optional): LSTM projection size (0: none).
        bidirectional (bool, optional): must be ``False``.
        python_based (bool, optional): run the Python recurrence (vmap/compile friendly) instead of
            ATen's fused kernels. Defaults to ``False``.
        recurrent_backend ("auto", "pad", "scan", "triton", optional): the recurrent-mode kernel (see the
            module docs). Defaults to ``"pad"``.
        recurrent_compute_dtype (torch.dtype, optional): dtype of the ``"triton"`` backend's hidden-to-hidden
            matmul on float32 data (e.g. ``torch.bfloat16``; the product is cast back to float32 before the
            gates); ignored by the other backends. Defaults to ``torch.float32``.
        recurrent_recompute ("none" or "full", optional): ``"full"`` recomputes the recurrent-mode forward
            during backward instead of storing activations (activation checkpointing).
        recurrent_matmul_precision (str, optional): precision of the ``"triton"`` backend's float32 matmuls on
            CUDA (``"ieee"``, ``"tf32"``, ``"tf32x3"``, ``"fast"``, ``"high-prec"``); ``"auto"`` follows
            :func:`set_recurrent_matmul_precision`. Ignored by the other backends.

    Keyword Args:
        in_key / in_keys: the input entry, or ``[input, h_key, c_key]`` (optionally + the is_init key).
        out_key / out_keys: the output entry, or ``[output, ("next", h_key), ("next", c_key)]``.
        device: where to build the LSTM.
        lstm (nn.LSTM, optional): an existing batch-first LSTM (instead of the sizes).
        default_recurrent_mode (bool, optional): the mode outside any :class:`set_recurrent_mode`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import LSTMModule, set_recurrent_mode
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="observation", out_key="features")
        >>> step = TensorDict(observation=torch.randn(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4])
        >>> out = lstm(step)  # a fresh reset: zero states are used
        >>> out["features"].shape, out["next", "recurrent_state_h"].shape
        (torch.Size([4, 8]), torch.Size([4, 1, 8]))
        >>> lstm.make_tensordict_primer().primers["recurrent_state_c"].shape
        torch.Size([1, 8])
    """

    _STATE_NAMES = ("recurrent_state_h", "recurrent_state_c")
    _RNN_ATTR = "lstm"

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first=True,
        dropout=0,
        proj_size=0,
        bidirectional=False,
        python_based=False,
        recurrent_backend: _Backend = "pad",
        recurrent_compute_dtype: torch.dtype = torch.float32,
        recurrent_recompute: Literal["none", "full"] = "none",
        recurrent_matmul_precision: _Precision = "auto",
        *,
        in_key=None,
        in_keys=None,
        out_key=None,
        out_keys=None,
        device=None,
        lstm=None,
        default_recurrent_mode: bool | None = None,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if lstm is None:
            if input_size is None or hidden_size is None:
                raise ValueError(f"{owner}: input_size and hidden_size are required (or pass lstm=...).")
            if not batch_first:
                raise ValueError(f"{owner}: batch_first must be True (TensorDict data is batch first).")
            if bidirectional:
                raise ValueError(f"{owner}: a bidirectional LSTM needs future steps and cannot run step by step in an env.")
            cls = LSTM if python_based else nn.LSTM
            lstm = cls(
                input_size, hidden_size, num_layers=num_layers, bias=bias, batch_first=True, dropout=dropout,
                proj_size=proj_size, device=device,
            )
        else:
            _check_given_rnn(owner, lstm, "LSTM", {"input_size": input_size, "hidden_size": hidden_size})
            python_based = python_based or isinstance(lstm, LSTM)
        self.lstm = lstm
        self._setup_keys(in_key, in_keys, out_key, out_keys)
        self._setup_options(
            python_based, recurrent_backend, recurrent_compute_dtype, recurrent_recompute,
            recurrent_matmul_precision, default_recurrent_mode,
        )
        if python_based != isinstance(lstm, LSTM):
            self._swap(python=bool(python_based))


class GRUModule(RecurrentModuleBase):
    """A GRU that reads and writes TensorDicts, step by step (collection) or along time (training).

    Keys: reads ``[in_key, "recurrent_state", "is_init"]`` and writes ``[out_key, ("next",
    "recurrent_state")]``; the state is stored as ``[*batch, num_layers, hidden_size]``. Arguments as in
    :class:`LSTMModule` (``gru=`` instead of ``lstm=``, no ``proj_size``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import GRUModule, set_recurrent_mode
        >>> gru = GRUModule(input_size=3, hidden_size=8, num_layers=2, in_key="observation", out_key="features")
        >>> data = TensorDict(observation=torch.randn(2, 6, 3), is_init=torch.zeros(2, 6, 1, dtype=torch.bool),
        ...                   recurrent_state=torch.zeros(2, 6, 2, 8), batch_size=[2, 6])
        >>> data["is_init"][:, 0] = True
        >>> with set_recurrent_mode(True):
        ...     out = gru(data)
        >>> out["features"].shape, out["next", "recurrent_state"].shape
        (torch.Size([2, 6, 8]), torch.Size([2, 6, 2, 8]))
    """

    _STATE_NAMES = ("recurrent_state",)
    _RNN_ATTR = "gru"

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first=True,
        dropout=0,
        bidirectional=False,
        python_based=False,
        recurrent_backend: _Backend = "pad",
        recurrent_compute_dtype: torch.dtype = torch.float32,
        recurrent_recompute: Literal["none", "full"] = "none",
        recurrent_matmul_precision: _Precision = "auto",
        *,
        in_key=None,
        in_keys=None,
        out_key=None,
        out_keys=None,
        device=None,
        gru=None,
        default_recurrent_mode: bool | None = None,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if gru is None:
            if input_size is None or hidden_size is None:
                raise ValueError(f"{owner}: input_size and hidden_size are required (or pass gru=...).")
            if not batch_first:
                raise ValueError(f"{owner}: batch_first must be True (TensorDict data is batch first).")
            if bidirectional:
                raise ValueError(f"{owner}: a bidirectional GRU needs future steps and cannot run step by step in an env.")
            cls = GRU if python_based else nn.GRU
            gru = cls(input_size, hidden_size, num_layers=num_layers, bias=bias, batch_first=True, dropout=dropout, device=device)
        else:
            _check_given_rnn(owner, gru, "GRU", {"input_size": input_size, "hidden_size": hidden_size})
            python_based = python_based or isinstance(gru, GRU)
        self.gru = gru
        self._setup_keys(in_key, in_keys, out_key, out_keys)
        self._setup_options(
            python_based, recurrent_backend, recurrent_compute_dtype, recurrent_recompute,
            recurrent_matmul_precision, default_recurrent_mode,
        )
        if python_based != isinstance(gru, GRU):
            self._swap(python=bool(python_based))
