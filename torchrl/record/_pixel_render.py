"""``PixelRenderTransform``: adds the env's ``render()`` output to each step's data."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import NonTensorData, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Bounded, NonTensor, TensorSpec, Unbounded
from torchrl.envs.transforms import Transform

__all__ = ["PixelRenderTransform"]


def _as_array(value: Any) -> np.ndarray | torch.Tensor | None:
    if value is None or isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):  # one frame per sub-env
        return np.stack([np.asarray(v) for v in value])
    return np.asarray(value)


class PixelRenderTransform(Transform):
    """Calls ``render`` on the parent environment and registers the image in the tensordict.

    An alternative to ``from_pixels=True`` when an env renders but does not offer it, or when rendering
    is only wanted sometimes (see :meth:`switch`). The image is rendered after every reset and step.

    Args:
        out_keys: where the image goes. Defaults to ``["pixels"]``.
        preproc: applied to the rendered output before it is written (reshape, crop, ...).
        as_non_tensor: write the output as non-tensor data (no shape constraint). Defaults to inferring
            it: arrays/tensors whose leading dims match the env batch size are written as tensors.
        render_method: the name of the env method to call. Defaults to ``"render"``.
        pass_tensordict: call ``render(tensordict)`` (for stateless envs). Defaults to ``False``.
        **kwargs: keyword arguments of the render method.

    Examples:
        >>> import numpy as np
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.record import PixelRenderTransform
        >>> class Rendered(PendulumEnv):
        ...     def render(self):
        ...         return np.zeros((4, 4, 3), np.uint8)
        >>> env = TransformedEnv(Rendered(), PixelRenderTransform())
        >>> env.rollout(3)["next", "pixels"].shape
        torch.Size([3, 4, 4, 3])
    """

    def __init__(
        self,
        out_keys: list[NestedKey] = None,
        preproc: Callable[[np.ndarray | torch.Tensor], np.ndarray | torch.Tensor] = None,
        as_non_tensor: bool | None = None,
        render_method: str = "render",
        pass_tensordict: bool = False,
        **kwargs,
    ) -> None:
        if out_keys is None:
            out_keys = ["pixels"]
        super().__init__(in_keys=[], out_keys=out_keys)
        if len(self.out_keys) != 1:
            raise ValueError(f"PixelRenderTransform: expected one out_key, got {self.out_keys}.")
        self.preproc = preproc
        self.as_non_tensor = as_non_tensor
        self.render_method = render_method
        self.pass_tensordict = bool(pass_tensordict)
        self.render_kwargs = kwargs
        self._enabled = True

    @property
    def enabled(self) -> bool:
        return self._enabled

    def switch(self, mode: str | bool = None):
        """Turns rendering on (``True``/``"on"``), off (``False``/``"off"``) or toggles it (``None``)."""
        if mode is None:
            self._enabled = not self._enabled
        elif isinstance(mode, str):
            if mode not in ("on", "off"):
                raise ValueError(
                    f"PixelRenderTransform.switch: mode must be 'on', 'off', a bool or None, got {mode!r}."
                )
            self._enabled = mode == "on"
        else:
            self._enabled = bool(mode)
        return self

    def set_container(self, container) -> None:
        """Attaches to ``container``; when that is an env, checks it has the render method."""
        super().set_container(container)
        if not isinstance(container, Transform):  # inside a Compose, the env is checked on first render
            self._render_fn(self.parent)

    def _render_fn(self, parent) -> Callable:
        method = getattr(parent, self.render_method, None)
        if not callable(method):
            raise AttributeError(
                f"PixelRenderTransform: the parent env {type(parent).__name__} has no {self.render_method!r} method; "
                f"pass render_method= to name the one to call."
            )
        return method

    def _render(self, tensordict: TensorDictBase | None):
        parent = self.parent
        if parent is None:
            raise RuntimeError("PixelRenderTransform must be used inside a TransformedEnv (it calls the env's render).")
        method = self._render_fn(parent)
        out = method(tensordict, **self.render_kwargs) if self.pass_tensordict else method(**self.render_kwargs)
        if self.preproc is not None:
            out = self.preproc(out)
        return _as_array(out)

    def _non_tensor(self, value, batch_size: torch.Size) -> bool:
        if self.as_non_tensor is not None:
            return self.as_non_tensor
        is_array = isinstance(value, (np.ndarray, torch.Tensor))
        return not (is_array and tuple(value.shape[: len(batch_size)]) == tuple(batch_size))

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self._enabled:
            return next_tensordict
        value = self._render(next_tensordict)
        key = self.out_keys[0]
        if self._non_tensor(value, next_tensordict.batch_size):
            next_tensordict.set(key, NonTensorData(value, batch_size=next_tensordict.batch_size))
        else:
            next_tensordict.set(key, torch.as_tensor(value, device=next_tensordict.device))
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        batch, device = observation_spec.shape, observation_spec.device
        key = self.out_keys[0]
        if self.as_non_tensor:
            observation_spec[key] = NonTensor(shape=batch, device=device)
            return observation_spec
        value = self._render(None) if not self.pass_tensordict else None
        if value is None:  # many envs render nothing before their first reset
            parent = self.parent
            state = parent.reset()
            value = self._render(state)
        if self._non_tensor(value, batch):
            observation_spec[key] = NonTensor(shape=batch, device=device)
        elif value.dtype in (np.uint8, torch.uint8):
            observation_spec[key] = Bounded(0, 255, shape=tuple(value.shape), dtype=torch.uint8, device=device)
        else:
            tensor = torch.as_tensor(value)
            observation_spec[key] = Unbounded(shape=tuple(tensor.shape), dtype=tensor.dtype, device=device)
        return observation_spec

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(out_keys={self.out_keys}, render_method={self.render_method!r}, enabled={self._enabled})"
