"""``recurrent_backend="auto"``: each backend timed once per kind of problem, the fastest kept.

Which kernel wins depends on the device, the dtype, the sizes and whether gradients are needed (measured on
CPU: the masked scan wins forward passes and large training batches, the padded fused kernels win small LSTM
training batches; on CUDA cuDNN's fused kernels pay for the padding and the compiled cells for one launch
per step, so the winner moves with the batch, the length and the reset rate). So the
first recurrent-mode call for a given key (:func:`problem_key`: device, dtype, LSTM/GRU and its sizes, batch
and sequence length rounded up to powers of two, grad mode) runs every candidate on that call's data: one
warm-up run, then ``repeats`` timed runs (forward, plus a backward pass to the parameters and inputs when
gradients are on; CUDA is synchronised around each run, and the random number generators are restored
afterwards, so measuring does not change a seeded run). The fastest (best of its timed runs) is cached for
the process; later calls with the same key only look it up (no host read, no timing). The measured times
stay in :attr:`BackendChooser.timings` (the GPU benchmark reports them). On CUDA the first call also pays
for compiling the ``"triton"`` cells (once per process and dtype; Inductor caches them on disk). The reset
rate is not part of the key (reading it would cost a host sync on every call).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import torch

__all__ = ["AUTO", "BackendChooser", "problem_key"]


def _bucket(value: int) -> int:
    return 1 << max(value - 1, 0).bit_length()


def problem_key(rnn, x: torch.Tensor, grad: bool) -> tuple:
    """What the choice depends on: device, dtype, the recurrence's sizes, rounded batch and length, grad mode."""
    n, steps = x.shape[:2]
    return (
        x.device.type, x.device.index, x.dtype, rnn.mode, rnn.input_size, rnn.hidden_size,
        getattr(rnn, "proj_size", 0), rnn.num_layers, _bucket(n), _bucket(steps), grad,
    )


class BackendChooser:
    """Times candidate backends on the first call for a key and remembers the fastest.

    Keyword Args:
        timer (callable, optional): returns seconds. Defaults to :func:`time.perf_counter`.
        repeats (int, optional): timed runs per candidate, after one warm-up run. Defaults to 2.

    Examples:
        >>> chooser = BackendChooser()
        >>> runs = {"slow": lambda: time.sleep(0.002), "fast": lambda: None}
        >>> chooser.choose(("cpu", "example"), runs, device=torch.device("cpu"))
        'fast'
        >>> chooser.choose(("cpu", "example"), {}, device=torch.device("cpu"))  # cached: nothing runs
        'fast'
    """

    def __init__(self, *, timer: Callable[[], float] = time.perf_counter, repeats: int = 2) -> None:
        self.timer = timer
        self.repeats = repeats
        self.choices: dict[tuple, str] = {}
        self.timings: dict[tuple, dict[str, float]] = {}

    def choose(self, key: tuple, runs: dict[str, Callable[[], object]], *, device: torch.device) -> str:
        """The cached choice for ``key``, or the fastest of ``runs`` (name -> one full run), then cached."""
        choice = self.choices.get(key)
        if choice is not None:
            return choice
        if not runs:
            raise ValueError(f"BackendChooser: no candidate backend to measure for {key}.")
        sync = torch.cuda.synchronize if device.type == "cuda" else None
        devices = [device] if device.type == "cuda" else []
        timings = {}
        with torch.random.fork_rng(devices=devices):
            for name, run in runs.items():
                timings[name] = self._time(run, sync, device)
        choice = min(timings, key=timings.__getitem__)
        self.timings[key] = timings
        self.choices[key] = choice
        return choice

    def _time(self, run: Callable[[], object], sync, device: torch.device) -> float:
        run()  # warm-up: compilation, cuDNN plans, allocator
        best = float("inf")
        for _ in range(self.repeats):
            if sync is not None:
                sync(device)
            start = self.timer()
            run()
            if sync is not None:
                sync(device)
            best = min(best, self.timer() - start)
        return best

    def clear(self) -> None:
        """Forgets every choice (the next call of each key measures again)."""
        self.choices.clear()
        self.timings.clear()


AUTO = BackendChooser()
"""The process-wide chooser used by ``LSTMModule``/``GRUModule`` with ``recurrent_backend="auto"``."""
