"""Value checks of step data against an env's specs: the ``run_type_checks`` / check-mode path.

:meth:`EnvBase._type_check <torchrl.envs.EnvBase>` calls :func:`check_entries`, which raises ``ValueError``
naming the env, the full nested key, what the spec expects and what was received::

    PendulumEnv.step: action 'action' is out of bounds [-2.0, 2.0]: got max 3.5.
    PendulumEnv.step: action 'action' has dtype torch.int64, expected torch.float32.
    PendulumEnv.step: action 'action' contains NaN (1 of 1 values).

These checks read every value (a host synchronisation on accelerators), so they only run when asked for:
``env.run_type_checks = True``, or check mode (:func:`torchrl.set_check_mode`, ``TORCHRL_CHECK_MODE=1``)
for actions.
"""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.data.tensor_specs import Binary, Bounded, Categorical, Composite, MultiCategorical, OneHot, TensorSpec
from torchrl.data.tensor_specs._utils import _shapes_compatible

__all__ = ["check_entries"]


def check_entries(
    data: TensorDictBase, spec: Composite, where: str, *, prefix: tuple = (), actions: bool = False
) -> None:
    """Checks the tensor entries of ``data`` that ``spec`` declares (entries absent or not tensors are skipped).

    Args:
        data: the TensorDict read (e.g. a step's input, or its ``"next"`` output).
        spec: the Composite whose leaves ``data`` must belong to.
        where: the message's prefix, e.g. ``"PendulumEnv.step"``.

    Keyword Args:
        prefix: a key prefix of ``spec``'s entries inside ``data`` (e.g. ``("next",)``).
        actions: the entries are actions: they are named "action ..." and NaN/infinite values are rejected
            even where the spec would accept them (an unbounded action).

    Raises:
        ValueError: an entry has the wrong dtype or shape, holds NaN/inf (actions), or lies outside its spec.
    """
    for key, leaf in spec.items(True, True):
        full = prefix + ((key,) if isinstance(key, str) else tuple(key))
        full = full if len(full) > 1 else full[0]
        value = data.get(full, None)
        if value is None or not isinstance(value, torch.Tensor):
            continue
        what = f"{where}: {'action ' if actions else ''}{full!r}"
        if value.dtype != leaf.dtype:
            raise ValueError(f"{what} has dtype {value.dtype}, expected {leaf.dtype}.")
        if not _shapes_compatible(value.shape, leaf.shape):
            raise ValueError(f"{what} has shape {tuple(value.shape)}, expected a shape ending with {tuple(leaf.shape)}.")
        if actions and value.is_floating_point():
            _check_finite(value, what)
        if not leaf.is_in(value):
            if value.is_floating_point():
                _check_finite(value, what)
            raise ValueError(f"{what} {_outside(leaf, value)}")


def _check_finite(value: torch.Tensor, what: str) -> None:
    for name, bad in (("NaN", torch.isnan(value)), ("inf", torch.isinf(value))):
        count = int(bad.sum())
        if count:
            raise ValueError(f"{what} contains {name} ({count} of {value.numel()} values).")


def _number(x: torch.Tensor) -> float | int | bool:
    return x.item()


def _uniform(bound: torch.Tensor) -> bool:
    return bound.numel() == 1 or bool((bound == bound.reshape(-1)[0]).all())


def _extremes(value: torch.Tensor, below: torch.Tensor, above: torch.Tensor) -> str:
    parts = []
    if bool(below.any()):
        parts.append(f"min {_number(value.min())}")
    if bool(above.any()):
        parts.append(f"max {_number(value.max())}")
    return " and ".join(parts)


def _outside(leaf: TensorSpec, value: torch.Tensor) -> str:
    """Why ``value`` (of the right dtype and shape) is not in ``leaf``, as the end of a sentence."""
    if isinstance(leaf, Bounded):
        low, high = leaf.low, leaf.high
        got = _extremes(value, value < low, value > high)
        if _uniform(low) and _uniform(high):
            return f"is out of bounds [{_number(low.reshape(-1)[0])}, {_number(high.reshape(-1)[0])}]: got {got}."
        return f"is out of its per-element bounds ({got}).{leaf._explain_values(value)}"
    if isinstance(leaf, Binary):
        return f"is not binary (0 or 1).{leaf._explain_values(value)}"
    if isinstance(leaf, Categorical) and not isinstance(leaf, MultiCategorical):
        n = leaf.space.n
        if n >= 0 and (bool((value < 0).any()) or bool((value >= n).any())):
            return (f"is out of range: expected integers in [0, {n - 1}] ({type(leaf).__name__}(n={n})): got "
                    f"min {_number(value.min())}, max {_number(value.max())}.")
        return f"is a masked-out choice: the spec's mask does not allow {_masked_example(leaf, value)}."
    if isinstance(leaf, OneHot):
        return f"is not a valid one-hot vector ({type(leaf).__name__}(n={leaf.space.n})).{leaf._explain_values(value)}"
    return f"is outside its spec {type(leaf).__name__}.{leaf._explain_values(value)}"


def _masked_example(leaf: Categorical, value: torch.Tensor) -> str:
    mask = leaf.mask.expand(*value.shape, leaf.space.n)
    allowed = mask.gather(-1, value.long().unsqueeze(-1)).squeeze(-1)
    bad = (~allowed).nonzero()
    if not len(bad):
        return "one of the values"
    where = tuple(bad[0].tolist())
    return f"value {_number(value[where])} at index {where}"
