"""``torchrl._fast``: the engine's fast lane, and the only code allowed to touch tensordict internals.

Everything here has a general twin in tensordict's public API and gives the same result faster on the
common case (a plain ``TensorDict`` we produced or already checked, a plain ``TensorDictModule``):

- ``tensordicts``: entry access (:func:`fast_get`, :func:`fast_set`, :func:`entries`, :func:`new_td`) and
  host-side tests (:func:`any_true`);
- ``stack``: the one stacker (:func:`stack_tds`, with ``out=`` for preallocated and shared-memory batches);
- ``calls``: the one "plain module" predicate and its direct call (:func:`direct_module_call`);
- ``scalars``: cached 0-dim tensors for hot-path arithmetic (:func:`scalar`).

A global switch turns every fast path off, so that the general paths (lazily stacked agent groups,
non-tensor leaves, subclasses) can be exercised by the whole test suite: :func:`set_fast_paths` (a function
and a context manager) or ``TORCHRL_FAST_PATHS=0`` in the environment, read at import. With the switch off,
the accessors call tensordict's public API, the stacker is ``LazyStackedTensorDict.maybe_dense_stack``,
:func:`direct_module_call` returns ``None``, and callers that branch on :func:`fast_paths_enabled` take
their general branch. Results are the same either way (``test/_fast`` checks both routes).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl._fast import fast_get, fast_paths_enabled, set_fast_paths
    >>> td = TensorDict(a=torch.zeros(2), batch_size=[2])
    >>> with set_fast_paths(False):
    ...     fast_paths_enabled(), fast_get(td, "a").shape
    (False, torch.Size([2]))
    >>> fast_paths_enabled()
    True
"""
from __future__ import annotations

from torchrl._fast._switch import fast_paths_enabled, set_fast_paths
from torchrl._fast.calls import direct_module_call, hooked, plain_parts
from torchrl._fast.scalars import scalar
from torchrl._fast.tensordicts import (
    any_true,
    entries,
    fast_get,
    fast_set,
    new_td,
    shallow_dict,
    writable,
)
from torchrl._fast.stack import stack_tds

__all__ = [
    "any_true",
    "direct_module_call",
    "entries",
    "fast_get",
    "fast_paths_enabled",
    "fast_set",
    "hooked",
    "new_td",
    "plain_parts",
    "scalar",
    "set_fast_paths",
    "shallow_dict",
    "stack_tds",
    "writable",
]
