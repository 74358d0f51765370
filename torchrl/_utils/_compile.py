"""``compile_with_warmup``: run eagerly for the first call(s), then switch to ``torch.compile``."""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

__all__ = ["compile_with_warmup"]


def compile_with_warmup(
    model: Callable | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable | None = None,
    mode: str | None = None,
    options: dict | None = None,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    shapes_spec: Any = None,
    warmup: int = 1,
):
    """Compiles ``model`` with ``torch.compile`` after ``warmup`` eager calls.

    Lazy modules and first-call initialisation (spec checks, buffer allocation) run eagerly; the compiled
    version takes over from call ``warmup + 1``. Used as ``compile_with_warmup(fn)`` or as a decorator
    factory ``compile_with_warmup(mode="reduce-overhead")(fn)``.

    Args:
        model: the callable to compile; if ``None`` a decorator is returned.

    Keyword Args:
        fullgraph, dynamic, backend, mode, options, disable: forwarded to ``torch.compile``.
        name: a label kept on the wrapper (``wrapper.compile_name``) for logs.
        recompile_limit: sets ``torch._dynamo.config.recompile_limit`` when given.
        isolate_recompiles: accepted for TorchRL compatibility (dynamo caches are per code object here).
        shapes_spec: accepted for TorchRL compatibility; ``dynamic`` controls shape specialisation.
        warmup: number of eager calls before compiling.

    Examples:
        >>> import torch
        >>> from torchrl import compile_with_warmup
        >>> f = compile_with_warmup(lambda x: x + 1, disable=True)
        >>> f(torch.zeros(2)).tolist()
        [1.0, 1.0]
    """
    compile_kwargs = {"fullgraph": fullgraph, "dynamic": dynamic, "mode": mode, "options": options, "disable": disable}
    if backend is not None:
        compile_kwargs["backend"] = backend

    def decorate(fn: Callable) -> Callable:
        state = {"calls": 0, "compiled": None}

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if state["compiled"] is None:
                if state["calls"] < warmup:
                    state["calls"] += 1
                    return fn(*args, **kwargs)
                if recompile_limit is not None:
                    torch._dynamo.config.recompile_limit = recompile_limit
                state["compiled"] = torch.compile(fn, **compile_kwargs)
            return state["compiled"](*args, **kwargs)

        wrapper.compile_name = name
        return wrapper

    return decorate if model is None else decorate(model)
