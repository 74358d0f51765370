"""``ModuleTransform``: runs a module (a ``TensorDictModule``, an ``nn.Module`` or a callable) as a transform."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["ModuleTransform"]

_SPEC_OPTIONS = (
    "observation_spec_transform",
    "done_spec_transform",
    "reward_spec_transform",
    "state_spec_transform",
    "action_spec_transform",
)
_OPTIONS = {
    "module": None,
    "module_factory": None,
    "no_grad": False,
    "inverse": False,
    "device": None,
    "num_gpus": None,
    "num_cpus": None,
    "actor_name": None,
    **{name: None for name in _SPEC_OPTIONS},
}


def _keys_of(module: Any, name: str) -> list[NestedKey]:
    return _key_list(getattr(module, name, None))


def _edit(spec: TensorSpec, edit: TensorSpec | Callable[[TensorSpec], TensorSpec] | None) -> TensorSpec:
    if edit is None:
        return spec
    if isinstance(edit, TensorSpec):
        return edit.clone()
    out = edit(spec)
    return spec if out is None else out


class ModuleTransform(Transform):
    """Runs a module on the data as a transform: on every env step and reset output, on replay-buffer
    samples, or (``inverse=True``) on the inputs of each step.

    The module reads its ``in_keys`` and writes its ``out_keys`` (those of a
    :class:`~tensordict.nn.TensorDictModule`); they are this transform's ``in_keys``/``out_keys`` (or, with
    ``inverse=True``, its ``out_keys_inv``/``in_keys_inv``: the outside writes the module's inputs and the
    module writes what the base env reads). A plain ``nn.Module`` or callable is called on the whole
    TensorDict and should return it (or ``None``); its keys are then those it declares, if any.

    Specs: each ``*_spec_transform`` option is either the new spec of that part of the env (a
    :class:`~torchrl.data.Composite`) or a function editing the current one. Without
    ``observation_spec_transform``, the specs of the module's outputs are inferred once, when the env
    builds its specs: the module is run (without gradients) on zeros drawn from the observation, reward
    and done specs, and each output written outside the reward and done specs gets an
    :class:`~torchrl.data.Unbounded` observation spec of the output's shape and dtype. The module runs on
    resets too; when it reads entries a reset does not produce (e.g. the reward), the reset output holds
    zeros for those inferred outputs.

    Keyword Args:
        module: the module to wrap. Exactly one of ``module`` and ``module_factory`` must be given.
        module_factory: a callable without arguments building the module.
        no_grad: run the module under ``torch.no_grad()``. Defaults to ``False``.
        inverse: run the module on the step inputs (the inverse path) instead of the outputs. Defaults to
            ``False``.
        device: the module is moved there at construction, and incoming data is moved there for the call
            (the outputs are copied back to the data's device). ``transform.to(device)`` updates it.
            Defaults to ``None`` (nothing is moved).
        num_gpus, num_cpus, actor_name: options of the Ray service backend; accepted and ignored here.
        observation_spec_transform, done_spec_transform, reward_spec_transform, state_spec_transform,
            action_spec_transform: a spec, or a ``Callable[[TensorSpec], TensorSpec]``, for that part of the
            env's specs. Default: unchanged (observation specs of new outputs are inferred, see above).
        use_ray_service, service_backend, service_backend_options: running the module in a service
            process is not supported by this implementation (see Raises).

    Raises:
        ValueError: neither or both of ``module`` and ``module_factory``, or a service backend requested.
        TypeError: positional arguments or unknown keyword arguments.
        RuntimeError: when the output specs must be inferred and the module fails on zero inputs (pass
            ``observation_spec_transform`` then).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import ModuleTransform
        >>> double = TensorDictModule(lambda th: 2 * th, in_keys=["th"], out_keys=["th2"])
        >>> t = ModuleTransform(module=double)
        >>> t(TensorDict(th=torch.tensor(1.5)))["th2"].item()
        3.0
        >>> env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=double))
        >>> env.observation_spec["th2"].shape
        torch.Size([])
        >>> data = env.rollout(3)
        >>> bool((data["next", "th2"] == 2 * data["next", "th"]).all())
        True
    """

    def __init__(
        self,
        *args,
        use_ray_service=False,
        service_backend=None,
        service_backend_options=None,
        **kwargs,
    ) -> None:
        if args:
            raise TypeError(
                f"ModuleTransform takes keyword arguments only (module=... or module_factory=...); got {len(args)} "
                f"positional argument(s)."
            )
        if use_ray_service or service_backend is not None or service_backend_options is not None:
            raise ValueError(
                "ModuleTransform: running the module in a service (use_ray_service / service_backend) is not "
                "supported by this implementation; the module runs in the transform's process."
            )
        unknown = sorted(set(kwargs) - set(_OPTIONS))
        if unknown:
            raise TypeError(f"ModuleTransform got unexpected keyword argument(s) {unknown}; accepted: {sorted(_OPTIONS)}.")
        options = {**_OPTIONS, **kwargs}
        module, factory = options["module"], options["module_factory"]
        if module is None and factory is None:
            raise ValueError("ModuleTransform: at least one of `module` or `module_factory` must be provided.")
        if module is not None and factory is not None:
            raise ValueError("ModuleTransform: only one of `module` or `module_factory` must be provided.")
        if module is None:
            module = factory()
        if not callable(module):
            raise TypeError(f"ModuleTransform: the module must be callable, got {type(module).__name__}.")
        device = options["device"]
        device = torch.device(device) if device is not None else None
        if device is not None and isinstance(module, nn.Module):
            module = module.to(device)
        super().__init__()
        self.module = module
        self.no_grad = bool(options["no_grad"])
        self.inverse = bool(options["inverse"])
        self._device = device
        self._ray_options = {k: options[k] for k in ("num_gpus", "num_cpus", "actor_name")}
        self._spec_edits = {name: options[name] for name in _SPEC_OPTIONS}
        self._inferred: dict[NestedKey, TensorSpec] = {}  # out_key -> inferred spec (zeros at resets without inputs)

    # -- keys: those of the module ----------------------------------------------------------------------
    @property
    def in_keys(self) -> list[NestedKey]:
        return [] if self.inverse else _keys_of(self.module, "in_keys")

    @in_keys.setter
    def in_keys(self, value) -> None:
        pass  # the module's keys are the transform's keys

    @property
    def out_keys(self) -> list[NestedKey]:
        return [] if self.inverse else _keys_of(self.module, "out_keys")

    @out_keys.setter
    def out_keys(self, value) -> None:
        pass

    @property
    def in_keys_inv(self) -> list[NestedKey]:
        return _keys_of(self.module, "out_keys") if self.inverse else []

    @in_keys_inv.setter
    def in_keys_inv(self, value) -> None:
        pass

    @property
    def out_keys_inv(self) -> list[NestedKey]:
        return _keys_of(self.module, "in_keys") if self.inverse else []

    @out_keys_inv.setter
    def out_keys_inv(self, value) -> None:
        pass

    @property
    def device(self) -> torch.device | None:
        """Where incoming data is moved for the module call (``None``: not moved)."""
        return self._device

    # -- data ---------------------------------------------------------------------------------------------
    def _run(self, tensordict: TensorDictBase) -> TensorDictBase:
        grad = torch.no_grad() if self.no_grad else contextlib.nullcontext()
        device = self._device
        if device is None or tensordict.device == device:
            with grad:
                out = self.module(tensordict)
            return tensordict if out is None else out
        moved = tensordict.to(device)
        with grad:
            out = self.module(moved)
        out = moved if out is None else out
        keys = _keys_of(self.module, "out_keys")
        if not keys:  # a module without declared outputs: the whole result comes back
            return out.to(tensordict.device) if tensordict.device is not None else out.to("cpu")
        back = tensordict.device
        for key in keys:
            value = out.get(key)
            if back is None:
                src = tensordict.get(key, None)
                back = src.device if isinstance(src, torch.Tensor) else torch.device("cpu")
            tensordict.set(key, value.to(back))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return next_tensordict
        return self._run(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return tensordict_reset
        if any(key not in tensordict_reset.keys(True) for key in self.in_keys):
            # a module reading entries absent at reset (e.g. the reward) only runs on steps; the reset output
            # holds zeros for the outputs whose specs were inferred, so that it matches the specs
            for key, spec in self._inferred.items():
                tensordict_reset.set(key, spec.zero().to(tensordict_reset.device) if tensordict_reset.device else spec.zero())
            return tensordict_reset
        return self._run(tensordict_reset)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.inverse:
            return tensordict
        missing = [key for key in self.out_keys_inv if key not in tensordict.keys(True)]
        if missing:
            raise KeyError(
                f"ModuleTransform (inverse): the module reads {missing}, not found in the step input; available "
                f"keys: {sorted(map(str, tensordict.keys(True, True)))}. Expose them in the action spec with "
                f"action_spec_transform."
            )
        return self._run(tensordict)

    @property
    def _has_inverse(self) -> bool:
        return self.inverse

    # -- specs --------------------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return _edit(observation_spec, self._spec_edits["observation_spec_transform"])

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return _edit(reward_spec, self._spec_edits["reward_spec_transform"])

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return _edit(done_spec, self._spec_edits["done_spec_transform"])

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        return _edit(state_spec, self._spec_edits["state_spec_transform"])

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        return _edit(action_spec, self._spec_edits["action_spec_transform"])

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        output_spec = super().transform_output_spec(output_spec)
        if not self.inverse and self._spec_edits["observation_spec_transform"] is None and self.out_keys:
            self._infer_output_specs(output_spec)
        return output_spec

    def _infer_output_specs(self, output_spec: Composite) -> None:
        observation = output_spec["full_observation_spec"]
        reward, done = output_spec["full_reward_spec"], output_spec["full_done_spec"]
        sample = TensorDict(batch_size=observation.shape, device=observation.device)
        for part in (observation, reward, done):
            sample.update(part.zero())
        missing = [key for key in self.in_keys if key not in sample.keys(True)]
        parent = self.parent if missing else None
        state = parent.full_state_spec if parent is not None else None
        for key in list(missing):
            if state is not None and key in state.keys(True):  # e.g. a recurrent state written by a primer
                sample.set(key, state[key].zero())
                missing.remove(key)
        if missing:
            raise KeyError(
                f"ModuleTransform: the module reads {missing}, which the env does not produce; available entries: "
                f"{sorted(map(str, sample.keys(True, True)))}."
            )
        try:
            with torch.no_grad():
                result = self._run(sample)
        except Exception as err:
            raise RuntimeError(
                f"ModuleTransform: could not infer the specs of the module's outputs {self.out_keys} by running it "
                f"on zeros of the env's observation, reward and done specs ({type(err).__name__}: {err}). Pass "
                f"observation_spec_transform=... to describe them."
            ) from err
        for key in self.out_keys:
            if key in reward.keys(True) or key in done.keys(True):
                continue
            value = result.get(key, None)
            if not isinstance(value, torch.Tensor):
                continue
            observation[key] = self._inferred[key] = Unbounded(
                shape=value.shape, dtype=value.dtype, device=observation.device
            )

    # -- placement ----------------------------------------------------------------------------------------
    def to(self, *args, **kwargs) -> ModuleTransform:
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        super().to(*args, **kwargs)
        if device is not None:
            self._device = device
        return self

    def clone(self) -> ModuleTransform:
        """A copy not attached to any container that shares the wrapped module (and its weights)."""
        module = self.module
        if isinstance(module, nn.Module):
            del self._modules["module"]
        else:
            del self.__dict__["module"]
        try:
            out = super().clone()
        finally:
            self.module = module
        out.module = module
        return out

    def __repr__(self) -> str:
        inverse = ", inverse=True" if self.inverse else ""
        return f"ModuleTransform(module={self.module!r}{inverse})"
