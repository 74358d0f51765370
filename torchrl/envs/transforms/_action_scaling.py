"""``ActionScaling``: the policy acts in a normalised space; the env receives ``loc + scale * action``."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Bounded, Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import affine_spec
from torchrl.envs.transforms._transform import Transform

__all__ = ["ActionScaling"]


class ActionScaling(Transform):
    """Affine-scales a continuous action: the policy acts in ``[-1, 1]`` (or ``[0, 1]``), the env in its range.

    Inverse (policy -> env): ``a_env = a_norm * scale + loc`` (with ``standard_normal=False``, the
    normalised space is ``[0, 1]``: ``a_env = (2 * a_norm - 1) * scale + loc``). Forward (env -> policy
    space, e.g. on replay-buffer samples) is the reverse map. Without explicit ``loc``/``scale`` they are
    derived from the env's bounded action spec (``loc = (high + low) / 2``, ``scale = (high - low) / 2``).
    The action spec seen from outside is the env's spec mapped through the forward map (an unbounded spec
    stays ``Unbounded``).

    Args:
        in_keys_inv: the action the env reads (default ``["action"]``; one key; ``[]`` for forward-only).
        out_keys_inv: where the policy writes it (default ``in_keys_inv``).
        in_keys: forward inputs (default ``in_keys_inv``, or ``["action"]`` when forward-only).
        out_keys: forward outputs (default ``in_keys``).

    Keyword Args:
        loc: location of the affine map (with ``scale``, or neither).
        scale: scale of the affine map.
        standard_normal: ``True`` for a ``[-1, 1]`` normalised space, ``False`` for ``[0, 1]``.

    Raises:
        ValueError: only one of ``loc``/``scale`` is given, or several keys are given.
        RuntimeError: values are derived from a spec that is not bounded, or used before being set.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._action_scaling import ActionScaling
        >>> env = TransformedEnv(PendulumEnv(), ActionScaling())
        >>> env.action_spec.space.high
        tensor([1.])
        >>> env.transform.denormalize(torch.tensor([0.5]))
        tensor([1.])
    """

    def __init__(
        self,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        *,
        loc: torch.Tensor | float | None = None,
        scale: torch.Tensor | float | None = None,
        standard_normal: bool = True,
    ):
        if (loc is None) != (scale is None):
            raise ValueError("ActionScaling: loc and scale must either both be provided or both be None.")
        in_keys_inv = ["action"] if in_keys_inv is None else list(in_keys_inv)
        out_keys_inv = list(in_keys_inv) if out_keys_inv is None else list(out_keys_inv)
        if in_keys is None:
            in_keys = list(in_keys_inv) if in_keys_inv else ["action"]
        out_keys = list(in_keys) if out_keys is None else list(out_keys)
        for name, keys in (("in_keys_inv", in_keys_inv), ("out_keys_inv", out_keys_inv), ("in_keys", in_keys), ("out_keys", out_keys)):
            if len(keys) > 1:
                raise ValueError(
                    f"ActionScaling: {name} {keys} has several keys; one action per instance is supported "
                    f"(compose several ActionScaling transforms)."
                )
        if not in_keys_inv and loc is None:
            raise ValueError("ActionScaling: a forward-only instance (in_keys_inv=[]) needs explicit loc and scale.")
        if len(in_keys_inv) != len(out_keys_inv) or len(in_keys) != len(out_keys):
            raise ValueError("ActionScaling: in and out key lists differ in length.")
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.standard_normal = standard_normal
        self._explicit = loc is not None
        self.register_buffer("loc", None if loc is None else torch.as_tensor(loc, dtype=torch.get_default_dtype()))
        self.register_buffer("scale", None if scale is None else torch.as_tensor(scale, dtype=torch.get_default_dtype()))

    @classmethod
    def from_stats(
        cls,
        *,
        mean: torch.Tensor | None = None,
        std: torch.Tensor | None = None,
        low: torch.Tensor | None = None,
        high: torch.Tensor | None = None,
        eps: float = 1e-06,
        **kwargs,
    ) -> ActionScaling:
        """Builds an instance from dataset statistics: ``mean``/``std`` (``loc = mean``, ``scale = std``) or
        ``low``/``high`` (``loc = (high + low) / 2``, ``scale = (high - low) / 2``); ``scale`` is clamped to ``eps``."""
        has_normal = mean is not None and std is not None
        has_range = low is not None and high is not None
        partial = any(v is not None for v in (mean, std, low, high)) and not (has_normal or has_range)
        if has_normal == has_range or partial:
            raise ValueError("ActionScaling.from_stats: provide exactly one of (mean, std) or (low, high).")
        if has_normal:
            loc, scale = torch.as_tensor(mean), torch.as_tensor(std)
        else:
            low, high = torch.as_tensor(low), torch.as_tensor(high)
            loc, scale = (high + low) / 2, (high - low) / 2
        return cls(loc=loc, scale=scale.clamp_min(eps), **kwargs)

    @classmethod
    def from_metadata(cls, metadata, **kwargs) -> ActionScaling:
        """Builds an instance from a ``RobotDatasetMetadata``'s ``action_mean``/``action_std`` (preferred) or
        ``action_low``/``action_high``, on its ``action_key``."""
        mean, std = getattr(metadata, "action_mean", None), getattr(metadata, "action_std", None)
        low, high = getattr(metadata, "action_low", None), getattr(metadata, "action_high", None)
        if "in_keys_inv" not in kwargs and getattr(metadata, "action_key", None) is not None:
            kwargs["in_keys_inv"] = [metadata.action_key]
        if mean is not None and std is not None:
            return cls.from_stats(mean=mean, std=std, **kwargs)
        if low is not None and high is not None:
            return cls.from_stats(low=low, high=high, **kwargs)
        raise ValueError("ActionScaling.from_metadata: the metadata has neither action_mean/action_std nor action_low/action_high.")

    @property
    def initialized(self) -> bool:
        return self.loc is not None and self.scale is not None

    def _check_initialized(self) -> None:
        if not self.initialized:
            raise RuntimeError(
                "ActionScaling has not been initialized: pass explicit loc and scale, or attach it to a "
                "TransformedEnv whose action spec is bounded so that they can be derived."
            )

    def normalize(self, action: torch.Tensor) -> torch.Tensor:
        """Env action -> normalised action (the forward map)."""
        self._check_initialized()
        out = (action - self.loc) / self.scale
        return (out + 1) / 2 if not self.standard_normal else out

    def denormalize(self, action: torch.Tensor) -> torch.Tensor:
        """Normalised action -> env action (the inverse map)."""
        self._check_initialized()
        if not self.standard_normal:
            action = action * 2 - 1
        return action * self.scale + self.loc

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return self.normalize(action)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return self.denormalize(action)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # the action lives in the step's input

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def _derive(self, spec: TensorSpec) -> None:
        if not isinstance(spec, Bounded) or not (torch.isfinite(spec.low).all() and torch.isfinite(spec.high).all()):
            raise RuntimeError(
                f"ActionScaling: cannot derive loc and scale from the action spec {type(spec).__name__} "
                f"(it must be bounded with finite bounds); pass explicit loc and scale."
            )
        self.loc = (spec.high + spec.low) / 2
        self.scale = (spec.high - spec.low) / 2

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        if not self._explicit:
            self._derive(action_spec)
        return affine_spec(action_spec, self.normalize)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if not self.in_keys_inv:
            return input_spec
        key = self.in_keys_inv[0]
        key = ("full_action_spec", *((key,) if isinstance(key, str) else key))
        spec = input_spec.get(key, None)
        if spec is None:
            raise KeyError(f"ActionScaling: in_keys_inv {self.in_keys_inv} is not in the env's action spec.")
        new = self.transform_action_spec(spec)
        out_key = self.out_keys_inv[0]
        out_key = ("full_action_spec", *((out_key,) if isinstance(out_key, str) else out_key))
        if out_key != key:
            del input_spec[key]
        input_spec[out_key] = new
        return input_spec

    def __repr__(self) -> str:
        def fmt(v):
            return None if v is None else (v.item() if v.numel() == 1 else v)

        return (
            f"ActionScaling(loc={fmt(self.loc)}, scale={fmt(self.scale)}, standard_normal={self.standard_normal}, "
            f"in_keys_inv={self.in_keys_inv})"
        )
