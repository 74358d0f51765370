"""``SafeModule`` (a ``TensorDictModule`` with output specs) and ``VmapModule``.

A *safe* module knows the spec of what it writes. With ``safe=True`` every output that falls outside its
spec is projected back onto it (``spec.project``) right after the forward pass; the (key, spec) pairs are
resolved once, when the spec is registered, so the check costs one ``is_in`` per output per call.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from tensordict.utils import NestedKey, unravel_key

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl._fast.calls import forward_direct, plain

__all__ = ["SafeModule", "VmapModule"]


# -- spec helpers shared by every safe module ------------------------------------------------------------
def _spec_for_out_keys(owner: str, spec: TensorSpec | None, out_keys: Sequence[NestedKey]) -> Composite:
    """Normalises ``spec`` into a Composite with one entry (possibly ``None``) per output key.

    A bare (non-Composite) spec describes the only output; with several outputs it is ambiguous.
    """
    if spec is None:
        spec = Composite()
    elif not isinstance(spec, TensorSpec):
        raise TypeError(f"{owner}: spec must be a TensorSpec (or None), got {type(spec).__name__}.")
    elif not isinstance(spec, Composite):
        if len(out_keys) != 1:
            raise RuntimeError(
                f"{owner}: got a single {type(spec).__name__} spec for several out_keys {list(out_keys)}; "
                f"pass a Composite keyed by out_key (e.g. Composite({{{out_keys[0]!r}: spec}})) or no spec."
            )
        spec = Composite({out_keys[0]: spec})
    else:
        spec = spec.clone()
    keys = set(spec.keys(True, True))
    for key in out_keys:
        if unravel_key(key) not in keys and key != "_":
            try:
                spec[key] = None
            except (KeyError, ValueError, TypeError):
                # a parent of ``key`` is a leaf spec: nothing to add
                pass
    return spec


def _spec_leaves(spec: Composite | None, keys: Iterable[NestedKey]) -> list[tuple[NestedKey, TensorSpec]]:
    """``[(key, leaf_spec)]`` for the keys of ``keys`` that have a (non-None) spec."""
    if spec is None:
        return []
    out = []
    for key in keys:
        leaf = spec.get(key, None)
        if leaf is not None and not isinstance(leaf, Composite):
            out.append((key, leaf))
    return out


def _project_outputs(leaves: list[tuple[NestedKey, TensorSpec]], tensordict: TensorDictBase) -> TensorDictBase:
    for key, leaf in leaves:
        value = tensordict.get(key, None)
        if value is None:
            continue
        projected = leaf.project(value)
        if projected is not value:
            tensordict.set(key, projected)
    return tensordict


def _rand_for_batch(leaf: TensorSpec, batch: torch.Size) -> torch.Tensor:
    """A random value of ``leaf`` for data of batch size ``batch`` (the spec may already hold the batch)."""
    if not batch or leaf.shape[: len(batch)] == batch:
        return leaf.rand()
    return leaf.rand(batch)


def _safe_hook(module, args, output):
    if isinstance(output, TensorDictBase):
        _project_outputs(module._safe_leaves, output)
    return output


class _SpecMixin:
    """``spec``/``safe`` handling shared by ``SafeModule`` and ``SafeProbabilisticModule``."""

    _spec = None  # the output Composite (see register_spec)
    safe = False
    _safe_leaves: list = []  # (key, leaf spec) pairs projected by the safe hook
    _safe_handle = None  # the safe hook's handle

    def _spec_keys(self) -> list[NestedKey]:
        return list(self.out_keys)

    def register_spec(self, safe: bool, spec: TensorSpec | None) -> None:
        """Sets the output spec (and ``safe``); with ``safe=True`` outputs are projected into it.

        Raises:
            RuntimeError: ``safe=True`` without a spec for any output.
        """
        name = type(self).__name__
        composite = _spec_for_out_keys(name, spec, self._spec_keys())
        leaves = _spec_leaves(composite, self._spec_keys())
        if safe and not leaves:
            raise RuntimeError(
                f"{name}(spec=None, safe=True) is not a valid configuration: safe=True projects outputs onto "
                f"their spec, so pass a spec for at least one of {self._spec_keys()}."
            )
        self._spec = composite
        self.safe = bool(safe)
        self._safe_leaves = leaves
        if self._safe_handle is not None:
            self._safe_handle.remove()
        self._safe_handle = self.register_forward_hook(_safe_hook) if safe else None

    @property
    def spec(self) -> Composite:
        """The output spec (a Composite keyed by output key; unknown outputs map to ``None``)."""
        return self._spec

    @spec.setter
    def spec(self, spec: TensorSpec | None) -> None:
        self.register_spec(safe=self.safe, spec=spec)

    def random(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes a random value (drawn from the spec) for every output that has a spec."""
        batch = tensordict.batch_size
        for key, leaf in _spec_leaves(self.spec, self._spec_keys()):
            tensordict.set(key, _rand_for_batch(leaf, batch))
        return tensordict

    def random_sample(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Same as :meth:`random`."""
        return self.random(tensordict)

    def to(self, dest=None, *args, **kwargs):
        """Moves the parameters (``nn.Module.to``) and, for a device move, the spec."""
        if dest is not None:
            args = (dest, *args)
        out = super().to(*args, **kwargs)
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        spec = self._spec
        if spec is not None and device is not None:
            self.register_spec(safe=self.safe, spec=spec.to(device))
        return out


class SafeModule(_SpecMixin, TensorDictModule):
    """A :class:`~tensordict.nn.TensorDictModule` that knows the specs of its outputs.

    Args:
        module (nn.Module or callable): the wrapped module (called with the ``in_keys`` values).
        in_keys (list of NestedKey): the entries read.
        out_keys (list of NestedKey): the entries written.
        spec (TensorSpec, optional): the spec of the outputs; a bare spec describes the only output.
        safe (bool, optional): project every output that is outside its spec back onto it. Requires a
            spec. Defaults to ``False``.
        inplace (bool or str, optional): see :class:`~tensordict.nn.TensorDictModule`.

    Raises:
        RuntimeError: ``safe=True`` without a spec, or a bare spec for several outputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.modules import SafeModule
        >>> module = SafeModule(lambda x: x * 10, in_keys=["obs"], out_keys=["action"],
        ...                     spec=Bounded(-1.0, 1.0, shape=(2,)), safe=True)
        >>> module(TensorDict(obs=torch.ones(2)))["action"]
        tensor([1., 1.])
    """

    def __init__(
        self,
        module,
        in_keys: Iterable[NestedKey],
        out_keys: Iterable[NestedKey],
        spec: TensorSpec | None = None,
        safe: bool = False,
        inplace: bool | str = True,
    ) -> None:
        super().__init__(module, in_keys=in_keys, out_keys=out_keys, inplace=inplace)
        self.register_spec(safe=safe, spec=spec)

    def forward(self, *args, **kwargs) -> TensorDictBase:
        if len(args) == 1 and not kwargs and plain(self):
            out = forward_direct(self, args[0])
            if out is not None:
                return out
        return TensorDictModule.forward(self, *args, **kwargs)

    forward._fast_forward = True


class VmapModule(TensorDictModuleBase):
    """Runs a TensorDict module under :func:`torch.vmap` over one batch dim of its input.

    The wrapped module sees data with one batch dimension less, as if called once per slice.

    Args:
        module (TensorDictModuleBase): the module to map.
        vmap_dim (int, optional): the mapped (input and output) dim. Defaults to the last batch dim.
        mock (bool, optional): replace ``vmap`` by an explicit loop over slices (slower; useful to debug
            modules that ``vmap`` cannot run). Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import VmapModule
        >>> first = TensorDictModule(lambda x: x[0], in_keys=["x"], out_keys=["y"])
        >>> td = TensorDict(x=torch.arange(6.0).reshape(3, 2), batch_size=[3])
        >>> VmapModule(first, 0)(td)["y"]
        tensor([0., 2., 4.])
    """

    def __init__(self, module: TensorDictModuleBase, vmap_dim: int | None = None, mock: bool = False) -> None:
        super().__init__()
        if not TensorDictModuleBase.is_tdmodule_compatible(module):
            raise TypeError(f"VmapModule: module must have in_keys and out_keys (a TensorDict module), got {type(module).__name__}.")
        self.in_keys = module.in_keys
        self.out_keys = module.out_keys
        self.module = module
        self.vmap_dim = vmap_dim
        self.mock = bool(mock)

    def mock_(self, value: bool = True) -> VmapModule:
        """Switches between ``vmap`` (``False``) and an explicit loop over slices (``True``)."""
        self.mock = bool(value)
        return self

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims == 0:
            raise RuntimeError("VmapModule: the input needs at least one batch dimension to map over.")
        dim = tensordict.batch_dims - 1 if self.vmap_dim is None else self.vmap_dim
        if dim < 0:
            dim += tensordict.batch_dims
        if self.mock:
            out = torch.stack([self.module(td.copy()) for td in tensordict.unbind(dim)], dim)
        else:
            out = torch.vmap(self.module, (dim,), (dim,), randomness="different")(tensordict.copy())
        for key in self.out_keys:
            value = out.get(key, None)
            if value is not None:
                tensordict.set(key, value)
        return tensordict
