"""``TransformedEnv``: an environment seen through a transform (usually a ``Compose``)."""
from __future__ import annotations

from collections import OrderedDict

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._utils._auto_unwrap import auto_unwrap_transformed_env
from torchrl.data.tensor_specs import Composite
from torchrl.envs._step_mdp import structure_copy
from torchrl.envs.common import EnvBase, register_env_hook
from torchrl.envs.transforms._append_checks import check_transform_keys
from torchrl.envs.transforms._compose import Compose, _as_transform, _CallableTransform
from torchrl.envs.transforms._partial_step import partial_step, remember_output
from torchrl.envs.transforms._transform import Transform

__all__ = ["TransformedEnv"]


def _flat(transform: Transform) -> list[Transform]:
    if isinstance(transform, Compose):
        return [leaf for t in transform for leaf in _flat(t)]
    return [transform]


class TransformedEnv(EnvBase):
    """Wraps ``env``: outputs go through ``transform``, inputs through its inverse, specs are transformed.

    Args:
        env: the base environment. A ``TransformedEnv`` is flattened (``TransformedEnv(base,
            Compose(old, new))``, with copies of the old transforms) unless ``auto_unwrap=False``.
        transform: a ``Transform`` (often a ``Compose``); ``None`` for an empty ``Compose``.
        cache_specs: compute the transformed specs once (recomputed when the transforms change).

    Keyword Args:
        auto_unwrap: see above; default from :func:`torchrl.auto_unwrap_transformed_env`.

    Attribute lookups that fail on the transformed env fall through to the base env
    (``TransformedEnv(PendulumEnv(), ...).gen_params`` works).

    Examples:
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=200))
        >>> env.rollout(3)["next", "step_count"].squeeze(-1).tolist()
        [1, 2, 3]
    """

    def __init__(self, env: EnvBase, transform: Transform | None = None, cache_specs: bool = True, *, auto_unwrap: bool | None = None, **kwargs) -> None:
        if auto_unwrap is None:
            auto_unwrap = auto_unwrap_transformed_env()
        if auto_unwrap and isinstance(env, TransformedEnv):
            previous = env.transform.clone()
            env = env.base_env
            if transform is None:
                transform = previous
            else:
                transform = Compose(*(list(previous) if isinstance(previous, Compose) else [previous]), transform)
        if transform is None:
            transform = Compose()
        elif not isinstance(transform, Transform):
            transform = Compose(_as_transform(transform, "TransformedEnv"))
        super().__init__(device=env.device, batch_size=env.batch_size, **kwargs)
        self.base_env = env
        # env and transform are modules: written to the instance dict, nn.Module.__setattr__ would register
        # them a second time (base_env and transform are the registered names)
        self.__dict__["_base"] = env
        self.__dict__["_transform_ref"] = None
        self._cache_specs = cache_specs
        self._tcache = {}
        self._set_transform(transform)
        self._check_transforms()

    def _check_transforms(self) -> None:
        """Builds the transformed specs now, so that a transform given a key, dtype or shape the env does not
        produce fails when it is attached (naming the key), not inside the first step. Deferred while a transform
        waits for its statistics (``initialized`` False, e.g. ``ObservationNorm`` before ``init_stats``)."""
        flat = _flat(self.transform)
        if any(getattr(t, "initialized", True) is False for t in flat):
            return
        cls = type(self)  # (through fget: a spec error that is an AttributeError must not become "no attribute")
        cls.output_spec.fget(self)
        cls.input_spec.fget(self)
        check_transform_keys(self, flat)

    def _set_transform(self, transform: Transform) -> None:
        transform.set_container(self)
        self.__dict__["_transform_ref"] = transform
        self._modules["transform"] = transform
        self._transforms_changed()
        transform.init(None)

    def _post_init(self, *, spec_locked: bool) -> None:
        self._specs_locked = bool(spec_locked)

    # -- transform management -------------------------------------------------------------------------
    @property
    def transform(self) -> Transform:
        return self._transform_ref

    @transform.setter
    def transform(self, transform: Transform) -> None:
        self._transform_ref._detach_container()
        self._set_transform(transform)
        self._check_transforms()

    def _transforms_changed(self) -> None:
        self._tcache = {}
        self._spec_cache = {}
        t = self._transform_ref
        if t is not None:
            self._batch_size = torch.Size(t.transform_env_batch_size(self._base.batch_size))
            self._device = t.transform_env_device(self._base.device)
            t.reset_parent()

    def __setattr__(self, name: str, value) -> None:
        if name == "transform":  # nn.Module would register a module value without the property's setter
            type(self).transform.fset(self, value)
            return
        super().__setattr__(name, value)

    def append_transform(self, transform) -> "TransformedEnv":
        """Appends ``transform`` (a Transform or a callable) in place; returns ``self``."""
        transform = _as_transform(transform, "TransformedEnv.append_transform")
        current = self.transform
        if not isinstance(current, Compose):
            current._detach_container()
            current = Compose(current)
            self._set_transform(current)
        current.append(transform)
        self._check_or_undo(current, len(current) - 1)
        return self

    def insert_transform(self, index: int, transform: Transform) -> "TransformedEnv":
        """Inserts ``transform`` at ``index`` of the transform list in place; returns ``self``."""
        transform = _as_transform(transform, "TransformedEnv.insert_transform")
        current = self.transform
        if not isinstance(current, Compose):
            current._detach_container()
            current = Compose(current)
            self._set_transform(current)
        current.insert(index, transform)
        self._check_or_undo(current, index if index >= 0 else len(current) + index - 1)
        return self

    def _check_or_undo(self, compose: Compose, index: int) -> None:
        """``_check_transforms``; when it fails, the added transform is taken out again (the env stays usable)."""
        try:
            self._check_transforms()
        except Exception:
            compose.pop(index)
            raise

    def _build_parent(self, before: list[Transform]) -> "TransformedEnv":
        return TransformedEnv(self.base_env, Compose(*[t.clone() for t in before]), auto_unwrap=False)

    # -- specs: transformed from the base env's, cached --------------------------------------------------------
    def _transformed(self, name: str, compute):
        cache = self._tcache
        spec = cache.get(name)
        if spec is None or not self._cache_specs:
            spec = compute()
            if self._specs_locked:
                spec.lock_(recurse=True)
            cache[name] = spec
        return spec

    @property
    def output_spec(self) -> Composite:
        return self._transformed("output_spec", lambda: self.transform.transform_output_spec(self.base_env.output_spec.clone().unlock_(recurse=True)))

    @output_spec.setter
    def output_spec(self, value) -> None:
        raise RuntimeError("TransformedEnv: set specs on the base env, or change them with a transform.")

    @property
    def input_spec(self) -> Composite:
        return self._transformed("input_spec", self._compute_input_spec)

    def _compute_input_spec(self) -> Composite:
        self.output_spec  # transforms learn the env's structure from the output side first
        spec = self.transform.transform_input_spec(self.base_env.input_spec.clone().unlock_(recurse=True))
        # transforms may resolve their inverse keys from the specs: recompute what depends on them
        if isinstance(self.transform, Compose):
            self.transform._inverse_flag = None
        return spec

    @input_spec.setter
    def input_spec(self, value) -> None:
        raise RuntimeError("TransformedEnv: set specs on the base env, or change them with a transform.")

    def _set_part(self, root, part, value, wrap_key) -> None:
        raise RuntimeError(
            f"TransformedEnv: cannot set {part} on a transformed env; set it on env.base_env or use a transform."
        )

    def set_spec_lock_(self, mode: bool = True) -> "TransformedEnv":
        self.base_env.set_spec_lock_(mode)
        self._specs_locked = bool(mode)
        self._transforms_changed()
        return self

    def add_truncated_keys(self) -> "TransformedEnv":
        self.base_env.add_truncated_keys()
        self._transforms_changed()
        return self

    @property
    def batch_locked(self) -> bool:
        return self._base.batch_locked

    @batch_locked.setter
    def batch_locked(self, value: bool) -> None:
        self.base_env.batch_locked = value

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value) -> None:
        raise RuntimeError("TransformedEnv: the batch size comes from the base env and the transforms.")

    @property
    def is_closed(self) -> bool:
        return self._base.is_closed

    # -- env contract ----------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        transform = self._transform_ref
        # the inverse (on a copy of the input) only when some transform has one: a Compose knows it once
        if not transform._has_inverse:
            return transform._step(tensordict, self._base._step_output(tensordict))
        td_in = transform.inv(tensordict)
        if self._spec_cache.get("_skips"):
            # a ConditionalSkip's inverse marks the rows to step ("_step"); the others are skipped
            partial = td_in.get("_step", None)
            if partial is not None:
                return partial_step(self, transform, tensordict, td_in.exclude("_step"), partial)
        return transform._step(tensordict, self._base._step_output(td_in))

    def _step_output(self, tensordict: TensorDictBase) -> TensorDictBase:
        # EnvBase's without the shape fixes: the base env fixed its own outputs and transforms write entries in
        # their spec's shape, so only done entries declared but not written are filled
        next_td = self._step(tensordict)
        if type(next_td) is not TensorDict and not isinstance(next_td, TensorDictBase):
            raise TypeError(f"{type(self).__name__}._step must return a TensorDict, got {type(next_td).__name__}.")
        self._hot().done_structure.complete(next_td)
        if self._run_type_checks:
            self._type_check_outputs(next_td)
        return next_td

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        transform = self._transform_ref
        # the base env and the transforms' preprocessing see their own structure over the same tensors
        td_in = transform._reset_env_preprocess(structure_copy(tensordict) if tensordict is not None else None)
        out = self._base.reset(td_in, **kwargs)
        if tensordict is None:
            tensordict = TensorDict(batch_size=out.batch_size, device=out.device)
        cache = self._spec_cache
        if "_reset_keys_checked" not in cache:
            self._check_reset_out_keys()
            cache["_reset_keys_checked"] = True
            cache["_skips"] = any(getattr(t, "_skips_steps", False) for t in _flat(transform))
        out = transform._reset(tensordict, out)
        if cache["_skips"]:
            remember_output(self, out)
        return out

    def _check_reset_out_keys(self) -> None:
        """Once per structure (first reset after the transforms or specs change), as TorchRL: the ``out_keys``
        of transforms that keep ``Transform``'s own ``_reset`` must be declared by the transformed specs."""
        declared = None
        for t in _flat(self.transform):
            if type(t)._reset is not Transform._reset or isinstance(t, _CallableTransform) or not t.out_keys:
                continue
            if declared is None:
                output, inputs = self.output_spec, self.input_spec
                declared = set()
                for root, part in ((output, "full_observation_spec"), (output, "full_done_spec"),
                                   (output, "full_reward_spec"), (inputs, "full_state_spec")):
                    declared |= set(root[part].keys(include_nested=True, leaves_only=True))
            missing = [k for k in t.out_keys if k not in declared]
            if missing:
                raise KeyError(
                    f"{type(t).__name__}: out_keys {', '.join(map(str, missing))} are not declared by the transformed "
                    f"specs (declared: {', '.join(sorted(map(str, declared)))}). A transform that writes a new entry must add it in "
                    f"transform_observation_spec (or transform_output_spec / transform_state_spec)."
                )

    def _fix_shapes(self, next_td: TensorDictBase, plan=None) -> None:
        """No-op: the base env fixed its own outputs, and transforms write entries in their spec's shape."""

    def _check_open(self) -> None:
        # the base env decides: batched envs start lazily here, closed envs raise
        self._base._check_open()

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        return self.base_env.set_seed(seed, static_seed=static_seed)

    def _set_seed(self, seed: int | None) -> None:
        self.base_env._set_seed(seed)

    def fake_tensordict(self) -> TensorDictBase:
        return self.transform.transform_fake_tensordict(super().fake_tensordict())

    def close(self, *, raise_if_closed: bool = True) -> None:
        self.base_env.close(raise_if_closed=raise_if_closed)
        self.transform.close()

    def empty_cache(self) -> None:
        self._transforms_changed()
        self.transform.empty_cache()

    def set_missing_tolerance(self, mode=False) -> None:
        self.transform.set_missing_tolerance(mode)

    def to(self, *args, **kwargs) -> "TransformedEnv":
        device = args[0] if args else kwargs.get("device")
        self.base_env.to(device)
        self.transform.to(*args, **kwargs)
        self._transforms_changed()
        return self

    def train(self, mode: bool = True) -> "TransformedEnv":
        super().train(mode)
        return self

    def eval(self) -> "TransformedEnv":
        return self.train(False)

    def state_dict(self, *args, **kwargs) -> OrderedDict:
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: OrderedDict, **kwargs) -> None:
        super().load_state_dict(state_dict, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            base = self.__dict__.get("_base")  # (not self._base: a missing one would recurse here)
            if base is None or name.startswith("__"):
                raise
            attr = getattr(type(self), name, None)
            if isinstance(attr, property) and attr.fget is not None:
                # the property itself raised AttributeError (e.g. a transform's spec error, as TorchRL): report it
                # instead of silently returning the base env's attribute of that name
                attr.fget(self)
            return getattr(base, name)

    def __repr__(self) -> str:
        transform = repr(self.transform).replace("\n", "\n    ")
        return f"TransformedEnv(\n    env={self.base_env!r},\n    transform={transform})"


register_env_hook("append_transform", lambda env, transform: TransformedEnv(env, transform))
