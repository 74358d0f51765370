"""``BurnInTransform``: refresh the recurrent states of sampled sequences by burning in their first steps."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["BurnInTransform"]


class BurnInTransform(Transform):
    """Burns in the first ``burn_in`` steps of sampled sequences to get up-to-date recurrent states.

    Stored recurrent states were written by an older policy. On each sampled batch (time = last batch
    dim), the transform runs ``modules`` over the first ``burn_in`` steps without gradients, reads the
    states they produce for the next step (their ``("next", key)`` outputs at step ``burn_in - 1``), and
    returns the remaining ``T - burn_in`` steps with those states written at their first step (the other
    steps keep their stored states). R2D2 (Kapturowski et al., 2019).

    The modules run as they are configured: recurrent modules (:class:`~torchrl.modules.LSTMModule`,
    :class:`~torchrl.modules.GRUModule`) process the whole burn-in sequence only in recurrent mode
    (``default_recurrent_mode=True`` or within ``set_recurrent_mode(True)``), as in TorchRL; in step mode
    each burn-in step starts from its stored state. The modules are used, not owned: they are not part of
    the transform's ``state_dict``.

    This is a replay-buffer transform: in an environment, a reset or a step raises ``RuntimeError``.

    Args:
        modules (sequence of TensorDictModule): the modules to run (one module is accepted as is).
        burn_in (int): the number of steps to burn in (``0`` returns the data unchanged).
        out_keys (sequence of NestedKey, optional): the states to refresh. Defaults to every out_key of the
            modules under ``"next"``, without the ``"next"`` (``("next", "hidden")`` gives ``"hidden"``).

    Raises:
        ValueError: ``burn_in`` is not a non-negative int; the modules are not TensorDict modules; the data
            have no batch dim.
        IndexError: the sequences are not longer than ``burn_in``.
        KeyError: the modules did not write ``("next", out_key)``.
        RuntimeError: used in an environment.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import BurnInTransform
        >>> from torchrl.modules import GRUModule
        >>> gru = GRUModule(input_size=2, hidden_size=3, in_keys=["observation", "hidden"],
        ...     out_keys=["intermediate", ("next", "hidden")], default_recurrent_mode=True)
        >>> transform = BurnInTransform([gru], burn_in=3)
        >>> transform.in_keys, transform.out_keys
        (['observation', 'hidden', 'is_init'], ['hidden'])
        >>> data = TensorDict(observation=torch.randn(4, 10, 2), hidden=torch.zeros(4, 10, 1, 3),
        ...     is_init=torch.zeros(4, 10, 1, dtype=torch.bool), batch_size=[4, 10])
        >>> out = transform(data)
        >>> out.shape, bool((out["hidden"][:, 0] != 0).all()), bool((out["hidden"][:, 1:] == 0).all())
        (torch.Size([4, 7]), True, True)
    """

    _in_keys_are_env_keys = False  # the modules' inputs (recurrent states) need not be env entries

    def __init__(
        self,
        modules: Sequence[TensorDictModuleBase],
        burn_in: int,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        if isinstance(modules, TensorDictModuleBase):
            modules = [modules]
        modules = list(modules)
        bad = [type(m).__name__ for m in modules if not isinstance(m, TensorDictModuleBase)]
        if bad or not modules:
            raise ValueError(
                f"BurnInTransform: modules must be a non-empty sequence of TensorDict modules (e.g. LSTMModule, "
                f"GRUModule); got {bad or 'an empty sequence'}."
            )
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
            raise ValueError(f"BurnInTransform: burn_in must be a non-negative int, got {burn_in!r}.")
        in_keys: list[NestedKey] = []
        for module in modules:
            for key in module.in_keys:
                if key not in in_keys:
                    in_keys.append(key)
        if out_keys is None:
            out_keys = []
            for module in modules:
                for key in module.out_keys:
                    parts = as_tuple(key)
                    if parts[0] == "next" and len(parts) > 1 and from_tuple(parts[1:]) not in out_keys:
                        out_keys.append(from_tuple(parts[1:]))
        super().__init__(in_keys=in_keys, out_keys=_key_list(out_keys))
        # used, not owned: a plain list keeps the policy's weights out of this transform's state_dict
        self.__dict__["_modules_list"] = modules
        self.burn_in = burn_in

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.ndim == 0:
            raise ValueError(
                "BurnInTransform: the data need a time dimension (their last batch dim); got a TensorDict with "
                "batch_size=torch.Size([])."
            )
        burn_in = self.burn_in
        if burn_in == 0:
            return tensordict
        time_dim = tensordict.ndim - 1
        length = tensordict.shape[time_dim]
        if length <= burn_in:
            raise IndexError(
                f"BurnInTransform: the sequences have {length} steps, which leaves none after a burn-in of "
                f"{burn_in} steps; sample longer slices (e.g. SliceSampler(slice_len=...)) or lower burn_in."
            )
        burnt = tensordict[..., :burn_in].copy()
        with torch.no_grad():
            for module in self._modules_list:
                out = module(burnt)
                burnt = burnt if out is None else out
        rest = tensordict[..., burn_in:]
        for key in self.out_keys:
            next_key = ("next",) + as_tuple(key)
            state = burnt.get(next_key, None)
            if state is None:
                raise KeyError(
                    f"BurnInTransform: the modules wrote no {next_key} entry to burn in {key!r}; their out_keys: "
                    f"{[k for m in self._modules_list for k in m.out_keys]}."
                )
            stored = rest.get(key, None)
            if stored is None:
                stored = torch.zeros(rest.shape + state.shape[tensordict.ndim:], dtype=state.dtype, device=state.device)
            else:
                stored = stored.clone()
            stored.select(time_dim, 0).copy_(state.select(time_dim, burn_in - 1))
            rest.set(key, stored)
        return rest

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def _refuse_env(self):
        raise RuntimeError(
            "BurnInTransform can only be appended to a ReplayBuffer (ReplayBuffer(..., transform=BurnInTransform"
            "(...))): it shortens sampled sequences and cannot run in an environment."
        )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_env()

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._refuse_env()

    def __repr__(self) -> str:
        return f"BurnInTransform(burn_in={self.burn_in}, in_keys={self.in_keys}, out_keys={self.out_keys})"
