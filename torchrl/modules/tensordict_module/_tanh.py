"""``TanhModule``: squashes entries with ``tanh`` and rescales them into ``[low, high]``."""
from __future__ import annotations


import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, dispatch
from tensordict.utils import NestedKey, unravel_key

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec

__all__ = ["TanhModule"]


def _as_keys(keys) -> list[NestedKey]:
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


def _per_key(value, out_keys: list[NestedKey], name: str) -> list:
    """One bound per out_key from a number, tensor, list (one per key) or dict (key -> bound)."""
    if isinstance(value, dict):
        return [value.get(k) for k in out_keys]
    if isinstance(value, (list, tuple)) and len(out_keys) > 1:
        if len(value) != len(out_keys):
            raise ValueError(f"TanhModule: {name} has {len(value)} entries for {len(out_keys)} out_keys {out_keys}.")
        return list(value)
    return [value] * len(out_keys)


def _spec_bound(spec, key: NestedKey, which: str):
    if spec is None:
        return None
    leaf = spec.get(key, None) if isinstance(spec, Composite) else spec
    space = getattr(leaf, "space", None)
    return getattr(space, which, None)


class TanhModule(TensorDictModuleBase):
    """Writes ``low + (high - low) * (tanh(x) + 1) / 2`` for each input entry ``x``.

    Bounds come from ``low``/``high`` when given, else from the spec's box, else ``[-1, 1]`` (plain
    ``tanh``).

    Args:
        in_keys (NestedKey or list): the entries to squash.
        out_keys (NestedKey or list, optional): where results go. Defaults to ``in_keys``.

    Keyword Args:
        spec (TensorSpec, optional): a bounded spec (or a Composite keyed by out_key) giving the bounds.
        low, high (float, tensor, list or dict, optional): the bounds (one per out_key in a list or dict).
        clamp (bool, optional): keep results strictly inside ``(low, high)`` by the dtype's resolution, so
            that inverting the squash (``atanh``) stays finite. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import TanhModule
        >>> mod = TanhModule(["x"], ["y"], low=0.0, high=10.0)
        >>> mod(TensorDict(x=torch.tensor([0.0, 100.0])))["y"]
        tensor([ 5., 10.])
    """

    def __init__(
        self,
        in_keys,
        out_keys=None,
        *,
        spec: TensorSpec | None = None,
        low=None,
        high=None,
        clamp: bool = False,
    ) -> None:
        super().__init__()
        in_keys = _as_keys(in_keys)
        out_keys = in_keys if out_keys is None else _as_keys(out_keys)
        if len(in_keys) != len(out_keys):
            raise ValueError(f"TanhModule: {len(in_keys)} in_keys {in_keys} but {len(out_keys)} out_keys {out_keys}.")
        self.in_keys = in_keys
        self.out_keys = out_keys
        if spec is not None and not isinstance(spec, Composite) and len(out_keys) > 1:
            raise ValueError(
                f"TanhModule: a single {type(spec).__name__} spec for several out_keys {out_keys}; pass a Composite."
            )
        lows = _per_key(low, out_keys, "low")
        highs = _per_key(high, out_keys, "high")
        self._plain = []
        for i, key in enumerate(out_keys):
            lo = lows[i] if lows[i] is not None else _spec_bound(spec, key, "low")
            hi = highs[i] if highs[i] is not None else _spec_bound(spec, key, "high")
            lo = torch.as_tensor(-1.0 if lo is None else lo, dtype=torch.get_default_dtype())
            hi = torch.as_tensor(1.0 if hi is None else hi, dtype=torch.get_default_dtype())
            if bool((lo >= hi).any()):
                raise ValueError(f"TanhModule: low must be < high for {key!r}, got low={lo.tolist()} high={hi.tolist()}.")
            self.register_buffer(f"_low{i}", lo.clone())
            self.register_buffer(f"_high{i}", hi.clone())
            self._plain.append(bool((lo == -1).all() and (hi == 1).all()))
        self.clamp = clamp
        self._pairs = [(unravel_key(i), unravel_key(o)) for i, o in zip(in_keys, out_keys)]
        if spec is not None and not isinstance(spec, Composite):
            spec = Composite({out_keys[0]: spec})
        self.spec = spec

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for i, (in_key, out_key) in enumerate(self._pairs):
            x = fast_get(tensordict, in_key)
            if x is None:
                raise KeyError(f"TanhModule: input {in_key!r} not found; keys: {list(tensordict.keys(True, True))}.")
            y = torch.tanh(x)
            low = getattr(self, f"_low{i}")
            high = getattr(self, f"_high{i}")
            if not self._plain[i]:
                y = low + (high - low) * (y + 1) / 2
            if self.clamp:
                eps = torch.finfo(y.dtype).resolution
                y = torch.maximum(torch.minimum(y, high - eps), low + eps)
            fast_set(tensordict, out_key, y)
        return tensordict
