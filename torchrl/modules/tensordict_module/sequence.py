"""``SafeSequential``: a ``TensorDictSequential`` whose spec is the union of its modules' specs."""
from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite
from torchrl._fast.calls import direct_input, run_module
from torchrl.modules.tensordict_module.common import SafeModule

__all__ = ["SafeSequential"]


def _merged_spec(modules, out_keys: list[NestedKey]) -> Composite:
    """The union of the submodules' output specs, with ``None`` for outputs nobody describes."""
    spec = Composite()
    for module in modules:
        sub = getattr(module, "spec", None)
        if isinstance(sub, Composite):
            for key, leaf in sub.items(True, True):
                if leaf is not None or key not in spec.keys(True, True):
                    spec[key] = leaf
    known = set(spec.keys(True, True))
    for key in out_keys:
        if key not in known:
            try:
                spec[key] = None
            except (KeyError, ValueError, TypeError):
                pass
    return spec


class SafeSequential(TensorDictSequential, SafeModule):
    """A :class:`~tensordict.nn.TensorDictSequential` of modules, with the merged spec of their outputs.

    Args:
        *modules (TensorDictModule): the modules, run in order.

    Keyword Args:
        partial_tolerant (bool, optional): skip modules whose inputs are missing (lazy stacks). Defaults
            to ``False``.
        inplace (bool or str, optional): see :class:`~tensordict.nn.TensorDictSequential`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Unbounded
        >>> from torchrl.modules import SafeModule, SafeSequential
        >>> first = SafeModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], spec=Unbounded(1))
        >>> second = SafeModule(lambda y: y * 2, in_keys=["y"], out_keys=["z"], spec=Unbounded(1))
        >>> seq = SafeSequential(first, second)
        >>> seq(TensorDict(x=torch.ones(1)))["z"]
        tensor([4.])
        >>> sorted(seq.spec.keys())
        ['y', 'z']
    """

    def __init__(
        self,
        *modules: TensorDictModule,
        partial_tolerant: bool = False,
        inplace: bool | str | None = None,
        **kwargs,
    ) -> None:
        # ``TensorDictSequential.__init__`` reaches ``SafeModule.__init__`` through ``super()``; the
        # merged spec is set once the module list exists.
        TensorDictSequential.__init__(self, *modules, partial_tolerant=partial_tolerant, inplace=inplace, **kwargs)
        self._refresh_spec()

    def _fast_sequence(self) -> bool:
        return not self._select_before_return and self.inplace in (None, True)

    def forward(self, *args, **kwargs) -> TensorDictBase:
        if direct_input(args, kwargs) and self._fast_sequence():
            tensordict = args[0]
            for module in self.module._modules.values():
                tensordict = run_module(module, tensordict)
            return tensordict
        return TensorDictSequential.forward(self, *args, **kwargs)

    forward._fast_forward = False

    def _refresh_spec(self) -> None:
        mods = self.module.values() if hasattr(self.module, "values") else list(self.module)
        self.register_spec(safe=False, spec=_merged_spec(mods, list(self.out_keys)))
