"""The machinery shared by ``LSTMModule`` and ``GRUModule``: keys, modes, backends and the forward pass.

See :mod:`torchrl.modules.tensordict_module.rnn` for the semantics (modes, state handling, backends).
"""
from __future__ import annotations

import importlib.util

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase, dispatch
from tensordict.utils import NestedKey, unravel_key
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchrl._fast import fast_get, fast_set, new_td
from torchrl.data.tensor_specs import Unbounded
from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer
from torchrl.modules.tensordict_module._python_rnn import GRU, LSTM
from torchrl.modules.tensordict_module._recurrent_auto import AUTO, problem_key
from torchrl.modules.tensordict_module._recurrent_mode import _check_mode, _resolve_precision, recurrent_mode
from torchrl.modules.tensordict_module._rnn_core import _flat_weights, padded_run, scan_run
from torchrl.modules.tensordict_module._rnn_triton import triton_run

__all__ = ["RecurrentModuleBase", "canonicalize_rnn_subset"]

_BACKENDS = ("auto", "pad", "scan", "triton")


_TRITON = importlib.util.find_spec("triton") is not None  # optional: the "triton" backend on CUDA


def _has_triton() -> bool:
    return _TRITON


def _missing_state_error(module, keys: list[NestedKey], recurrent: bool) -> KeyError:
    owner = type(module).__name__
    where = (
        "the first step of every sequence is not an episode start (is_init False)"
        if recurrent
        else "this is not a fresh reset (is_init is missing or False somewhere)"
    )
    return KeyError(
        f"{owner}: recurrent state {keys} not found in the input and {where}, so zeros would silently erase "
        f"the policy's memory. The env must carry the state between steps: build it with policy=... "
        f"(e.g. GymEnv(..., policy=policy)), or add the transforms yourself with "
        f"env.append_transform(policy_module.make_tensordict_primer()) and env.append_transform(InitTracker()) "
        f"(torchrl.modules.get_env_transforms_from_module(policy) returns both). For data that should start "
        f"from zero states (e.g. an offline dataset), write zeros at those keys explicitly."
    )


class RecurrentModuleBase(TensorDictModuleBase):
    """Keys, modes, backends and the forward pass shared by ``LSTMModule`` and ``GRUModule``."""

    _STATE_NAMES: tuple[str, ...] = ()
    _RNN_ATTR = ""
    _next_names = None  # plain names of the next-state keys under "next" (None for deeper keys); see _write_next

    # -- construction -------------------------------------------------------------------------------------
    def _setup_keys(self, in_key, in_keys, out_key, out_keys) -> None:
        owner = type(self).__name__
        n_states = len(self._STATE_NAMES)
        if in_key is not None and in_keys is not None:
            raise ValueError(f"{owner}: pass either in_key or in_keys, not both.")
        if out_key is not None and out_keys is not None:
            raise ValueError(f"{owner}: pass either out_key or out_keys, not both.")
        if in_key is not None:
            in_keys = [in_key, *self._STATE_NAMES]
        if in_keys is None:
            raise ValueError(f"{owner}: the input entry is required: pass in_key='observation' (or in_keys=[...]).")
        in_keys = [in_keys] if isinstance(in_keys, (str, tuple)) else list(in_keys)
        if len(in_keys) == n_states + 2:
            is_init_key = in_keys[-1]
            in_keys = in_keys[:-1]
        elif len(in_keys) == n_states + 1:
            is_init_key = "is_init"
        else:
            raise ValueError(
                f"{owner}: in_keys must be [input, {', '.join(self._STATE_NAMES)}] optionally followed by the "
                f"is_init key; got {in_keys}."
            )
        state_keys = [unravel_key(k) for k in in_keys[1:]]
        if out_key is not None:
            out_keys = [out_key, *[("next", *((k,) if isinstance(k, str) else k)) for k in state_keys]]
        if out_keys is None:
            raise ValueError(f"{owner}: the output entry is required: pass out_key='features' (or out_keys=[...]).")
        out_keys = [out_keys] if isinstance(out_keys, (str, tuple)) else list(out_keys)
        if len(out_keys) != n_states + 1:
            raise ValueError(f"{owner}: out_keys must be [output, {n_states} next-state key(s)]; got {out_keys}.")
        out_states = []
        for key in out_keys[1:]:
            key = unravel_key(key)
            if not (isinstance(key, tuple) and key[0] == "next"):
                key = ("next", *((key,) if isinstance(key, str) else key))
            out_states.append(key)
        for read, written in zip(state_keys, out_states):
            if unravel_key(written[1:]) != read:
                raise ValueError(
                    f"{owner}: the state is read from {read!r} but written to {written!r}; step_mdp moves "
                    f"('next', k) to k, so the written key must be ('next', {read!r}) or the memory is lost."
                )
        self._in_key = unravel_key(in_keys[0])
        self._out_key = unravel_key(out_keys[0])
        self._state_keys = state_keys
        self._next_state_keys = out_states
        self._is_init_key = unravel_key(is_init_key)
        self.in_keys = [self._in_key, *state_keys, self._is_init_key]
        self.out_keys = [self._out_key, *out_states]

    def _setup_options(self, python_based, recurrent_backend, compute_dtype, recompute, matmul_precision, default_mode):
        owner = type(self).__name__
        if recurrent_backend not in _BACKENDS:
            raise ValueError(f"{owner}: recurrent_backend must be one of {list(_BACKENDS)}, got {recurrent_backend!r}.")
        if recompute not in ("none", "full"):
            raise ValueError(f"{owner}: recurrent_recompute must be 'none' or 'full', got {recompute!r}.")
        _check_mode(matmul_precision)
        if not (isinstance(compute_dtype, torch.dtype) and compute_dtype.is_floating_point):
            raise ValueError(f"{owner}: recurrent_compute_dtype must be a floating torch.dtype, got {compute_dtype!r}.")
        if recurrent_backend == "triton" and not _has_triton():
            raise RuntimeError(
                f"{owner}: recurrent_backend='triton' requires the triton package (pip install triton) and runs on "
                f"CUDA only; use recurrent_backend='auto', 'pad' or 'scan'."
            )
        self.python_based = bool(python_based)
        self.recurrent_backend = recurrent_backend
        self.recurrent_compute_dtype = compute_dtype
        self.recurrent_recompute = recompute
        self.recurrent_matmul_precision = matmul_precision
        self._recurrent_mode = None if default_mode is None else bool(default_mode)

    @property
    def rnn(self) -> nn.RNNBase:
        return getattr(self, self._RNN_ATTR)

    # -- modes ----------------------------------------------------------------------------------------------
    @property
    def recurrent_mode(self) -> bool:
        """``True`` when sequences are processed along time (the global switch wins over the default)."""
        mode = recurrent_mode()
        if mode is None:
            return bool(self._recurrent_mode)
        return mode

    @recurrent_mode.setter
    def recurrent_mode(self, value: bool) -> None:
        raise RuntimeError(
            f"{type(self).__name__}.recurrent_mode cannot be changed in place; use `with set_recurrent_mode(True):` "
            f"or build the module with default_recurrent_mode=True."
        )

    @property
    def temporal_mode(self) -> bool:
        """Same as :attr:`recurrent_mode`."""
        return self.recurrent_mode

    def set_recurrent_mode(self, mode: bool = True):
        """Removed API (TorchRL removed it in v0.8): raises ``RuntimeError``.

        Use the :class:`~torchrl.modules.set_recurrent_mode` context manager, or build the module with
        ``default_recurrent_mode=True``.
        """
        raise RuntimeError(
            f"{type(self).__name__}.set_recurrent_mode() was removed (as in TorchRL >= 0.8). To set the recurrent "
            f"mode, use the set_recurrent_mode context manager (`with set_recurrent_mode(True): ...`) or the "
            f"default_recurrent_mode keyword argument of the constructor (mode requested: {mode!r})."
        )

    # -- keys, primers, layout ----------------------------------------------------------------------------------
    def _state_shapes(self) -> list[tuple[int, int]]:
        """``[(layers, size)]`` per state entry: ``h`` (and ``c`` for an LSTM)."""
        rnn = self.rnn
        if rnn.mode == "LSTM":
            return [(rnn.num_layers, rnn.proj_size or rnn.hidden_size), (rnn.num_layers, rnn.hidden_size)]
        return [(rnn.num_layers, rnn.hidden_size)]

    def make_tensordict_primer(self) -> TensorDictPrimer:
        """The ``TensorDictPrimer`` that writes zero states at every reset (append it to the env)."""
        specs = {key: Unbounded(shape=shape) for key, shape in zip(self._state_keys, self._state_shapes())}
        return TensorDictPrimer(specs, expand_specs=True)

    @property
    def canonical_keys(self) -> list[NestedKey]:
        """The entries this module reads or writes (the subset :meth:`canonicalize` touches)."""
        return [*self.in_keys, *self.out_keys]

    def canonicalize(self, data: TensorDictBase, *, inplace: bool = False) -> TensorDictBase:
        """Makes this module's entries of ``data`` contiguous (views, expanded or strided slices copied once)."""
        return canonicalize_rnn_subset(data, [self], inplace=inplace)

    def make_python_based(self):
        """Swaps the fused recurrence for the Python one (same parameters); returns ``self``."""
        self._swap(python=True)
        return self

    def make_cudnn_based(self):
        """Swaps the Python recurrence for the fused ``torch.nn`` one (same parameters); returns ``self``."""
        self._swap(python=False)
        return self

    def _swap(self, python: bool) -> None:
        old = self.rnn
        if python == isinstance(old, (LSTM, GRU)):
            self.python_based = python
            return
        kwargs = {"num_layers": old.num_layers, "bias": old.bias, "batch_first": True, "dropout": old.dropout}
        if old.mode == "LSTM" and old.proj_size:
            kwargs["proj_size"] = old.proj_size
        cls = (LSTM if old.mode == "LSTM" else GRU) if python else (nn.LSTM if old.mode == "LSTM" else nn.GRU)
        ref = old.weight_ih_l0
        new = cls(old.input_size, old.hidden_size, device=ref.device, dtype=ref.dtype, **kwargs)
        new.load_state_dict(old.state_dict())
        new.train(old.training)
        setattr(self, self._RNN_ATTR, new)
        self.python_based = python

    # -- forward --------------------------------------------------------------------------------------------------
    def _read(self, tensordict: TensorDictBase, recurrent: bool):
        x = fast_get(tensordict, self._in_key)
        if x is None:
            raise KeyError(
                f"{type(self).__name__}: input {self._in_key!r} not found; keys: {list(tensordict.keys(True, True))}."
            )
        states = [fast_get(tensordict, k) for k in self._state_keys]
        is_init = fast_get(tensordict, self._is_init_key)
        present = [s is not None for s in states]
        if all(present):
            return x, states, is_init
        if any(present):
            missing = [k for k, p in zip(self._state_keys, present) if not p]
            raise KeyError(f"{type(self).__name__}: recurrent state {missing} missing while {self._state_keys} are needed together.")
        if is_init is not None:
            fresh = is_init.reshape(*tensordict.batch_size, -1).any(-1)
            if recurrent:
                fresh = fresh[..., 0]
            if bool(fresh.all()):
                return x, None, is_init
        raise _missing_state_error(self, self._state_keys, recurrent)

    def _backend(self, seq: torch.Tensor, h_init, c_init, starts) -> str:
        """The kernel of this call; ``"auto"`` measures the candidates once per kind of problem (see
        :mod:`~torchrl.modules.tensordict_module._recurrent_auto`)."""
        backend = self.recurrent_backend
        if self.python_based and backend != "triton":
            return "scan"
        if backend == "triton" and seq.device.type != "cuda":
            raise RuntimeError(
                f"{type(self).__name__}: recurrent_backend='triton' runs on CUDA only (got {seq.device.type} data); "
                f"use recurrent_backend='auto', 'pad' or 'scan'."
            )
        if backend != "auto":
            return backend
        if torch.compiler.is_compiling():
            return "scan"  # no data-dependent shapes, no measuring inside a graph
        params = [p for p in self.rnn.parameters() if p.requires_grad]
        grad = torch.is_grad_enabled() and (seq.requires_grad or bool(params))
        key = problem_key(self.rnn, seq, grad)
        choice = AUTO.choices.get(key)
        if choice is None:
            choice = AUTO.choose(key, self._trial_runs(seq, h_init, c_init, starts, params, grad), device=seq.device)
        return choice

    def _trial_runs(self, seq, h_init, c_init, starts, params, grad) -> dict:
        """One full run per candidate backend on detached copies of this call's data (forward + backward
        when ``grad``), for :class:`~torchrl.modules.tensordict_module._recurrent_auto.BackendChooser`."""
        candidates = ["pad", "scan"]
        if seq.device.type == "cuda" and _has_triton():
            candidates.append("triton")
        x = seq.detach().requires_grad_(seq.requires_grad and grad)
        h0 = None if h_init is None else h_init.detach()
        c0 = None if c_init is None else c_init.detach()
        inputs = params + ([x] if x.requires_grad else [])

        def trial(backend):
            def run():
                with torch.set_grad_enabled(grad):
                    _, h, c = self._kernel(backend, x, h0, c0, starts)
                    if grad:
                        loss = h.sum() if c is None else h.sum() + c.sum()
                        torch.autograd.grad(loss, inputs, allow_unused=True)
            return run

        return {backend: trial(backend) for backend in candidates}

    def _kernel(self, backend: str, x, h_init, c_init, starts):
        if self.recurrent_recompute == "full" and torch.is_grad_enabled():
            return checkpoint(self._run, backend, x, h_init, c_init, starts, use_reentrant=False)
        return self._run(backend, x, h_init, c_init, starts)

    def _run(self, backend: str, x, h_init, c_init, starts):
        rnn = self.rnn
        if backend == "scan":
            return scan_run(rnn, x, h_init, c_init, starts)
        if backend == "triton" and not getattr(rnn, "proj_size", 0):
            precision = _resolve_precision(self.recurrent_matmul_precision, x.device)
            dtype = self.recurrent_compute_dtype
            return triton_run(rnn, x, h_init, c_init, starts, matmul_dtype=dtype, precision=precision)
        return padded_run(rnn, x, h_init, c_init, starts)  # "pad" (and "triton" with an LSTM projection)

    def _step(self, x, states):
        """One step for ``x [N, F]``; ``states``: list of ``[N, L, H]`` (or None). Returns output and states."""
        rnn = self.rnn
        n = x.shape[0]
        if self.python_based:
            inits = [None, None] if states is None else [s.unsqueeze(1) for s in states] + [None]
            y, h, c = scan_run(rnn, x.unsqueeze(1), inits[0], inits[1], None)
            return y[:, 0], [h[:, 0]] + ([c[:, 0]] if c is not None else [])
        if states is None:
            hx = [x.new_zeros(shape[0], n, shape[1]) for shape in self._state_shapes()]
        else:
            hx = [s.transpose(0, 1).contiguous() for s in states]
        weights = _flat_weights(rnn, None)
        if rnn.mode == "LSTM":
            out, h, c = torch.lstm(x.unsqueeze(1), (hx[0], hx[1]), weights, rnn.bias, rnn.num_layers, float(rnn.dropout), rnn.training, False, True)
            return out[:, 0], [h.transpose(0, 1), c.transpose(0, 1)]
        out, h = torch.gru(x.unsqueeze(1), hx[0], weights, rnn.bias, rnn.num_layers, float(rnn.dropout), rnn.training, False, True)
        return out[:, 0], [h.transpose(0, 1)]

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        recurrent = self.recurrent_mode
        if recurrent and tensordict.batch_dims == 0:
            raise ValueError(
                f"{type(self).__name__}: recurrent mode needs a time dimension (the last batch dim); got a TensorDict "
                f"with batch size []. Use sequential mode for single steps."
            )
        x, states, is_init = self._read(tensordict, recurrent)
        batch = tensordict.batch_size
        if not recurrent:
            y, new_states = self._forward_step(x, states, is_init, batch)
        else:
            y, new_states = self._forward_sequence(x, states, is_init, batch)
        fast_set(tensordict, self._out_key, y)
        self._write_next(tensordict, new_states)
        return tensordict

    def _write_next(self, tensordict: TensorDictBase, values: list[torch.Tensor]) -> None:
        """Writes the next states; plain ``("next", name)`` keys go straight into the ``"next"`` TensorDict."""
        names = self._next_names
        if names is None:
            names = self._next_names = [k[1] if len(k) == 2 else None for k in self._next_state_keys]
        if type(tensordict) is TensorDict and None not in names:
            nxt = fast_get(tensordict, "next")
            if nxt is None:
                nxt = new_td({}, tensordict.batch_size, tensordict.device)
                fast_set(tensordict, "next", nxt)
            if type(nxt) is TensorDict and nxt.batch_size == tensordict.batch_size:
                for name, value in zip(names, values):
                    fast_set(nxt, name, value)
                return
        for key, value in zip(self._next_state_keys, values):
            tensordict.set(key, value)

    def _forward_step(self, x, states, is_init, batch):
        n = batch.numel()
        flat_states = None if states is None else [s.reshape(n, *s.shape[-2:]) for s in states]
        # an episode starts where is_init is set: zero state, whatever the data carried over (e.g. across a
        # partial reset). On CPU one host read skips the masking when no row starts; elsewhere that read would
        # stall the stream, so the rows are always masked.
        if flat_states is not None and is_init is not None and (is_init.device.type != "cpu" or bool(is_init.any())):
            fresh = is_init.reshape(n, -1).any(-1)[:, None, None]
            flat_states = [s.masked_fill(fresh, 0) for s in flat_states]
        y, new = self._step(x.reshape(n, x.shape[-1]), flat_states)
        return y.reshape(*batch, y.shape[-1]), [s.reshape(*batch, *s.shape[-2:]) for s in new]

    def _forward_sequence(self, x, states, is_init, batch):
        if is_init is None:
            raise KeyError(
                f"{type(self).__name__}: recurrent mode needs {self._is_init_key!r} to find where episodes start "
                f"inside the sequences; collect with InitTracker() in the env (or policy=... at env construction), "
                f"or set it (True at each episode's first step)."
            )
        steps = batch[-1]
        n = batch[:-1].numel()
        starts = is_init.reshape(n, steps, -1).any(-1)
        seq = x.reshape(n, steps, x.shape[-1])
        inits = [None, None] if states is None else [s.reshape(n, steps, *s.shape[-2:]) for s in states] + [None]
        backend = self._backend(seq, inits[0], inits[1], starts)
        y, h, c = self._kernel(backend, seq, inits[0], inits[1], starts)
        new = [h] + ([c] if c is not None else [])
        return y.reshape(*batch, y.shape[-1]), [s.reshape(*batch, *s.shape[-2:]) for s in new]


def canonicalize_rnn_subset(data: TensorDictBase, modules, *, inplace: bool = False) -> TensorDictBase:
    """Makes contiguous the entries that any of ``modules`` reads or writes; other entries are untouched.

    Args:
        data (TensorDictBase): the data.
        modules (iterable of LSTMModule / GRUModule): the recurrent modules fed from ``data``.

    Keyword Args:
        inplace (bool, optional): modify ``data`` instead of a shallow copy. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import LSTMModule, canonicalize_rnn_subset
        >>> lstm = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="h")
        >>> td = TensorDict(obs=torch.zeros(5, 2, 3).transpose(0, 1), batch_size=[2, 5])
        >>> canonicalize_rnn_subset(td, [lstm])["obs"].is_contiguous()
        True
    """
    out = data if inplace else data.copy()
    seen = set()
    for module in modules:
        for key in module.canonical_keys:
            key = unravel_key(key)
            if key in seen:
                continue
            seen.add(key)
            value = out.get(key, None)
            if isinstance(value, torch.Tensor) and not value.is_contiguous():
                out.set(key, value.contiguous())
    return out
