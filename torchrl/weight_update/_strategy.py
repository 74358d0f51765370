"""How weights are taken out of a model and put back into one: :class:`WeightStrategy`."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl._utils._check_mode import check_mode

__all__ = ["WeightStrategy", "as_weights", "copy_weights"]


def as_weights(policy_or_weights: Any) -> TensorDictBase | None:
    """The weights carried by ``policy_or_weights`` as a TensorDict of plain tensors (``None`` stays ``None``).

    Accepts a module (its parameters and buffers), a TensorDict, or a ``state_dict``-like mapping whose
    dotted keys are nested.

    Raises:
        TypeError: for any other type.
    """
    if policy_or_weights is None:
        return None
    if isinstance(policy_or_weights, nn.Module):
        return TensorDict.from_module(policy_or_weights).data
    if isinstance(policy_or_weights, TensorDictBase):
        return policy_or_weights.data if policy_or_weights.requires_grad else policy_or_weights
    if isinstance(policy_or_weights, Mapping):
        flat = {k: (v.data if isinstance(v, torch.Tensor) else v) for k, v in policy_or_weights.items()}
        return TensorDict(flat, batch_size=[]).unflatten_keys(".")
    raise TypeError(
        f"expected weights as an nn.Module, a TensorDict or a state_dict, got {type(policy_or_weights).__name__}."
    )


def copy_weights(dest: TensorDictBase, src: TensorDictBase, *, where: str, partial: bool = False) -> None:
    """Copies ``src`` into ``dest`` in place (skipping leaves that already share memory).

    Args:
        partial: weights missing from ``src`` keep their values (else they raise).

    Raises:
        KeyError: ``src`` lacks a weight that ``dest`` has, without ``partial`` (the message names it).
    """
    for key, target in dest.items(include_nested=True, leaves_only=True):
        value = src.get(key, None)
        if value is None:
            if partial:
                continue
            raise KeyError(
                f"{where}: the new weights have no entry {key!r}; expected the keys of "
                f"TensorDict.from_module(model) (e.g. {list(dest.keys(True, True))[:4]})."
            )
        if value.data_ptr() == target.data_ptr() and value.shape == target.shape:
            continue
        with torch.no_grad():
            target.copy_(value)


class WeightStrategy:
    """The format weights travel in, and how they are read from and written to a model.

    Args:
        extract_as: ``"tensordict"`` (default): a :class:`~tensordict.TensorDict` nested like the module
            (``TensorDict.from_module``); ``"state_dict"``: an ordered mapping with dotted keys.

    Examples:
        >>> from torch import nn
        >>> strategy = WeightStrategy()
        >>> source, dest = nn.Linear(2, 1), nn.Linear(2, 1)
        >>> weights = strategy.extract_weights(source)
        >>> sorted(weights.keys())
        ['bias', 'weight']
        >>> strategy.apply_weights(dest, weights)
        >>> bool((dest.weight == source.weight).all())
        True
    """

    def __init__(self, extract_as: Literal["tensordict", "state_dict"] = "tensordict") -> None:
        if extract_as not in ("tensordict", "state_dict"):
            raise ValueError(f"WeightStrategy: extract_as must be 'tensordict' or 'state_dict', got {extract_as!r}.")
        self.extract_as = extract_as

    def extract_weights(self, source: Any) -> TensorDictBase | dict | None:
        """The weights of ``source`` (a module, a TensorDict or a state_dict) in this strategy's format;
        ``None`` for a source that holds no weights (``None`` or a plain callable)."""
        if source is None:
            return None
        if isinstance(source, nn.Module):
            if self.extract_as == "state_dict":
                return source.state_dict()
            return TensorDict.from_module(source)
        if isinstance(source, TensorDictBase):
            if self.extract_as == "state_dict":
                return dict(source.flatten_keys(".").items())
            return source
        if isinstance(source, Mapping):
            if self.extract_as == "state_dict":
                return source
            return as_weights(source)
        return None

    def apply_weights(self, destination: Any, weights: Any, inplace: bool = True) -> None:
        """Writes ``weights`` (either format) into ``destination`` (a module or a TensorDict of weights).

        With ``inplace=True`` (default) the destination's tensors are overwritten, so every view of them
        (shared memory, a running policy) sees the new values; ``inplace=False`` rebinds a module's
        parameters to copies of the new tensors. As in TorchRL, ``weights`` may hold a part of the
        destination's weights (the others keep their values) and entries the destination lacks are ignored;
        in check mode (:func:`torchrl.set_check_mode`) a missing weight raises instead.

        Raises:
            KeyError: in check mode, a weight of the destination is missing from ``weights``.
            TypeError: ``destination`` is neither a module nor a TensorDict.
        """
        if weights is None:
            return
        new = as_weights(weights)
        if isinstance(destination, nn.Module):
            if not inplace:
                new.clone().to_module(destination)
                return
            copy_weights(TensorDict.from_module(destination), new, where="WeightStrategy.apply_weights",
                         partial=not check_mode())
        elif isinstance(destination, TensorDictBase):
            if not inplace:
                destination.update(new.clone())
                return
            copy_weights(destination, new, where="WeightStrategy.apply_weights", partial=not check_mode())
        else:
            raise TypeError(
                f"WeightStrategy.apply_weights: cannot write weights into a {type(destination).__name__}; pass an "
                f"nn.Module or a TensorDict of weights."
            )
