"""``EnvBase``: the environment contract (specs, reset, step, rollout) that every TorchRL env follows.

A subclass sets its specs in ``__init__`` and implements three methods:

- ``_reset(tensordict | None, **kwargs) -> TensorDict``: initial observations (and state) for the whole
  batch; when the input carries ``"_reset"`` masks only those sub-environments restart, the others
  report their current values.
- ``_step(tensordict) -> TensorDict``: reads actions (and state) and returns the *next* observations,
  rewards and done signals (``done`` alone is enough: ``terminated``/``truncated`` are completed).
- ``_set_seed(seed)``.

The public methods wrap these with the checks and completions that make every env behave the same.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl._utils._check_mode import _state as _check_mode_state
from torchrl._fast import any_true, entries, fast_get, fast_set
from torchrl.envs._done import (
    as_tuple, checked_after_reset, known_value, mark_checked_after_reset, mark_false,
)
from torchrl.data.tensor_specs import Composite, MultiOneHot, OneHot
from torchrl.envs._check_env import check_env_specs
from torchrl.envs._partial_reset import blend_partial_reset
from torchrl.envs._step_mdp import fast_step_mdp, merge_missing, structure_copy
from torchrl.envs._env_extras import EnvExtrasMixin
from torchrl.envs._env_specs import EnvSpecsMixin
from torchrl.envs._rollout import rollout as _rollout
from torchrl.envs._seeding import next_seed
from torchrl.envs._spec_checks import check_entries
from torchrl.envs._step_loop import ColumnStepper, RowStepper, StepPlan

__all__ = ["EnvBase", "EnvMetaclass", "register_env_hook"]

# Wrappers that EnvBase hands construction-time options to (``auto_reset=True``, ``policy=...``). They
# live with the transforms, which come after this module in the import order, and register themselves.
_HOOKS: dict[str, Callable] = {}


def register_env_hook(name: str, fn: Callable) -> None:
    """Registers a construction hook (``"auto_reset"`` or ``"policy"``) taking ``(env, **options)``."""
    _HOOKS[name] = fn


class EnvMetaclass(type):
    """Runs after any ``EnvBase`` subclass's ``__init__``: completes and locks specs, applies wrappers.

    ``spec_locked``, ``auto_reset`` (with ``auto_reset_replace``) and ``policy`` are construction options
    of every env that never reach the subclass's ``__init__``.
    """

    def __call__(cls, *args: Any, **kwargs: Any):
        spec_locked = kwargs.pop("spec_locked", True)
        auto_reset = kwargs.pop("auto_reset", False)
        auto_reset_replace = kwargs.pop("auto_reset_replace", None)
        policy = kwargs.pop("policy", None)
        env = super().__call__(*args, **kwargs)
        env._post_init(spec_locked=spec_locked)
        if auto_reset:
            env = _require_hook("auto_reset")(env, replace=auto_reset_replace)
        if policy is not None:
            env = _require_hook("policy")(env, policy=policy)
        return env


_HOOK_PROVIDERS = {
    "auto_reset": "torchrl.envs.transforms",
    "append_transform": "torchrl.envs.transforms",
    "policy": "torchrl.modules",
}


def _require_hook(name: str) -> Callable:
    hook = _HOOKS.get(name)
    if hook is None:
        provider = _HOOK_PROVIDERS.get(name, "torchrl")
        raise RuntimeError(f"EnvBase: the {name!r} option needs {provider}; import it first (import {provider}).")
    return hook


class EnvBase(EnvSpecsMixin, EnvExtrasMixin, nn.Module, metaclass=EnvMetaclass):
    """Abstract environment: TensorDict in, TensorDict out, shapes and types described by specs.

    Keyword Args:
        device: where inputs and outputs live (``None``: device-less).
        batch_size: leading dims shared by every entry (a batch of independent sub-environments).
        run_type_checks: check every step's data against the specs (slow; for debugging).
        allow_done_after_reset: do not raise when an env reports done right after a reset.
        spec_locked: lock the specs once ``__init__`` returns (default True).
        auto_reset: the env resets itself on done (returns an auto-resetting ``TransformedEnv``).
        policy: a policy whose needs (``InitTracker``, recurrent-state primers) are added as transforms.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded, Composite, Unbounded
        >>> from torchrl.envs import EnvBase
        >>> class Counter(EnvBase):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Composite(count=Unbounded((1,)))
        ...         self.action_spec = Bounded(0, 1, shape=(1,))
        ...     def _reset(self, td, **kwargs):
        ...         return TensorDict(count=torch.zeros(1))
        ...     def _step(self, td):
        ...         count = td["count"] + td["action"]
        ...         return TensorDict(count=count, reward=count, done=count > 2)
        ...     def _set_seed(self, seed):
        ...         torch.manual_seed(seed)
        >>> env = Counter()
        >>> env.rollout(10).batch_size[0] <= 10
        True
    """

    _batch_locked: bool = True  # a class default; ``env.batch_locked = ...`` sets an instance value
    # instance attributes that __init__ sets, with class defaults so that reads before (or without) it hit
    _closed: bool = False
    _collector = None
    _run_type_checks: bool = False
    _allow_done_after_reset: bool = False
    # A subclass whose _reset outputs already hold the current values of the sub-envs it does not reset sets
    # this: partial resets then skip re-selecting those rows (see _partial_reset.py).
    _partial_reset_outputs_hold_all_rows: bool = False

    def __init__(
        self,
        *,
        device: torch.device | str | int | None = None,
        batch_size: torch.Size | Iterable[int] | int | None = None,
        run_type_checks: bool = False,
        allow_done_after_reset: bool = False,
    ) -> None:
        super().__init__()
        if batch_size is None:
            batch_size = torch.Size([])
        elif isinstance(batch_size, int):
            batch_size = torch.Size([batch_size])
        self._batch_size = torch.Size(batch_size)
        self._device = torch.device(device) if device is not None else None
        self._run_type_checks = bool(run_type_checks)
        self._allow_done_after_reset = bool(allow_done_after_reset)
        self._closed = False
        self._collector = None
        self._init_specs()

    def _post_init(self, *, spec_locked: bool) -> None:
        self._complete_specs()
        if spec_locked:
            self.set_spec_lock_(True)

    # -- basic attributes ----------------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value) -> None:
        value = torch.Size([value] if isinstance(value, int) else value)
        # the new parts first (ValueError, as TorchRL, when an entry does not start with the new batch size)
        parts = {
            (root, part): Composite(dict(sub.items()), shape=value, device=self.device)
            for root in ("_output_spec", "_input_spec")
            for part, sub in getattr(self, root).items()
            if len(list(sub.keys()))
        }
        with self._editing_specs():
            self._batch_size = value
            self._init_specs()
            for (root, part), sub in parts.items():
                getattr(self, root)[part] = sub

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def batch_locked(self) -> bool:
        """Whether the env only accepts TensorDicts whose batch size is exactly ``env.batch_size``."""
        return self._batch_locked

    @batch_locked.setter
    def batch_locked(self, value: bool) -> None:
        self._batch_locked = bool(value)

    @property
    def run_type_checks(self) -> bool:
        return self._run_type_checks

    @run_type_checks.setter
    def run_type_checks(self, value: bool) -> None:
        self._run_type_checks = bool(value)

    @property
    def shape(self) -> torch.Size:
        return self.batch_size

    @property
    def batch_dims(self) -> int:
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        return len(self.batch_size)

    def ndimension(self) -> int:
        return len(self.batch_size)

    def numel(self) -> int:
        return self.batch_size.numel()

    @property
    def is_closed(self) -> bool:
        return self._closed

    # -- subclass contract ------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _step(tensordict).")

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _reset(tensordict, **kwargs).")

    def _set_seed(self, seed: int | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _set_seed(seed).")

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__}: environments are not called like modules; use env.reset(), env.step(td) "
            f"or env.rollout(n)."
        )

    # -- checks shared by step and reset ----------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed; create a new env (or call env.start() for batched envs).")

    def _check_batch(self, tensordict: TensorDictBase, where: str) -> None:
        if self.batch_locked and tensordict.batch_size != self.batch_size:
            raise RuntimeError(
                f"{type(self).__name__}.{where}: the tensordict has batch_size {tensordict.batch_size} but the env's "
                f"batch_size is {self.batch_size} (this env is batch-locked)."
            )

    def _action_checks(self) -> list[tuple[NestedKey, torch.Size | None]]:
        """``[(action key, event shape)]``: the trailing shape every action must have.

        The shape is ``None`` for heterogeneous (lazily stacked) actions, whose presence alone is checked.
        """

        def compute():
            n = len(self.batch_size)
            out = []
            for key, leaf in self.full_action_spec.items(True, True):
                shape = leaf.shape[n:]
                out.append((key, None if -1 in leaf.shape else shape))
            return out

        return self._cached("_action_checks", compute)

    def _check_actions(self, tensordict: TensorDictBase) -> None:
        batch = tensordict.batch_size
        for key, event_shape in self._action_checks():
            if event_shape is None:
                present = key in tensordict.keys(include_nested=True)
                action = None
            else:
                action = fast_get(tensordict, key)
                present = action is not None
            if not present:
                raise KeyError(
                    f"{type(self).__name__}.step: action key {key!r} not found in the tensordict; keys present: "
                    f"{sorted(tensordict.keys(include_nested=True, leaves_only=True), key=str)}. Write the action "
                    f"(e.g. with a policy or env.rand_action(td)) before calling step."
                )
            shape = getattr(action, "shape", None)
            if shape is not None and shape != batch + event_shape:
                if self._is_index_action(key, action, batch, event_shape):
                    continue  # an integer index for a one-hot spec (e.g. an argmax policy), as TorchRL accepts
                raise ValueError(
                    f"{type(self).__name__}.step: action {key!r} has shape {tuple(shape)}, expected "
                    f"{tuple(batch + event_shape)} (batch {tuple(batch)} + action shape {tuple(event_shape)})."
                )

    def _is_index_action(self, key, action: torch.Tensor, batch: torch.Size, event_shape: torch.Size) -> bool:
        """Whether ``action`` is the integer-index form of a one-hot action: batch shape (+ a trailing 1)."""
        if not isinstance(action, torch.Tensor) or action.is_floating_point() or action.dtype == torch.bool:
            return False
        if action.shape not in (batch + event_shape[:-1], batch + event_shape[:-1] + (1,)):
            return False
        leaf = self.full_action_spec[key]
        return isinstance(leaf, OneHot) and not isinstance(leaf, MultiOneHot)

    def _type_check(
        self, data: TensorDictBase, spec: Composite, where: str, prefix: tuple = (), *, actions: bool = False
    ) -> None:
        """Checks ``data``'s entries against ``spec`` (dtype, shape, values; NaN/inf for ``actions``), raising
        ``ValueError`` that names the key (see :mod:`torchrl.envs._spec_checks`)."""
        check_entries(data, spec, f"{type(self).__name__}.{where}", prefix=prefix, actions=actions)

    # -- step -------------------------------------------------------------------------------------------
    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs one step: reads the actions in ``tensordict``, writes the outcome under ``"next"``.

        Returns:
            ``tensordict`` itself, with a ``"next"`` entry holding the next observations, rewards and
            ``done``/``terminated``/``truncated``.

        Raises:
            KeyError: an action is missing (the message lists the keys present).
            ValueError: an action has the wrong shape; with ``run_type_checks`` or in check mode
                (:func:`torchrl.set_check_mode`), the wrong dtype, a NaN/inf or a value outside its spec.
            RuntimeError: the batch size does not match a batch-locked env, or the env is closed.
        """
        if self._closed:
            self._check_open()
        batch = tensordict.batch_size
        if batch == self._batch_size:
            actions = self._hot().action_shapes
        else:  # e.g. an unbatched env stepping a batch of states (TorchRL's gen_params pattern)
            self._check_batch(tensordict, "step")
            actions = self._hot_for(batch).action_shapes
        src = entries(tensordict)  # read once for the actions and "next" (None: not a plain TensorDict)
        if actions is None or type(tensordict) is not TensorDict:  # heterogeneous actions / lazy stacks
            self._check_actions(tensordict)
        else:  # the usual case: compare against the spec shapes directly
            for key, full_shape in actions:
                action = src.get(key) if src is not None and type(key) is str else fast_get(tensordict, key)
                if action is None or action.shape != full_shape:
                    self._check_actions(tensordict)  # raises with a full message
        if self._run_type_checks or _check_mode_state["on"]:  # torchrl.set_check_mode / TORCHRL_CHECK_MODE
            self._type_check(tensordict, self.full_action_spec, "step", actions=True)
        next_td = self._step_output(tensordict)
        existing = src.get("next") if src is not None else fast_get(tensordict, "next")
        if existing is not None:
            # the policy may have written "next" entries (e.g. recurrent states): keep them, env outputs win
            existing.update(next_td)
        elif next_td.batch_size == tensordict.batch_size:
            fast_set(tensordict, "next", next_td)
        else:
            tensordict.set("next", next_td)
        return tensordict

    def _step_output(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``_step`` plus the completions every env gets (done siblings, reward/done shapes)."""
        next_td = self._step(tensordict)
        if type(next_td) is not TensorDict and not isinstance(next_td, TensorDictBase):
            raise TypeError(f"{type(self).__name__}._step must return a TensorDict, got {type(next_td).__name__}.")
        plan = self._hot()
        self._fix_shapes(next_td, plan)
        plan.done_structure.complete(next_td)
        if self._run_type_checks:
            self._type_check_outputs(next_td)
        return next_td

    def _type_check_outputs(self, next_td: TensorDictBase) -> None:
        self._type_check(next_td, self.full_observation_spec, "step")
        self._type_check(next_td, self.full_reward_spec, "step")
        self._type_check(next_td, self.full_done_spec, "step")

    def _hot(self) -> StepPlan:
        """What every step needs (:class:`~torchrl.envs._step_loop.StepPlan`) for the env's batch size,
        computed once while the specs are locked."""
        plan = self._spec_cache.get("_hot")
        if plan is None:
            plan = self._hot_plan(self.batch_size)
            if self._specs_locked:
                self._spec_cache["_hot"] = plan
        return plan

    def _hot_plan(self, batch: torch.Size) -> StepPlan:
        """The :class:`~torchrl.envs._step_loop.StepPlan` for tensordicts of batch size ``batch`` (batch + each
        entry's event shape)."""
        checks = self._action_checks()
        # None: some action is heterogeneous (lazily stacked), checked by _check_actions
        actions = None if any(shape is None for _, shape in checks) else [(k, batch + shape) for k, shape in checks]
        shapes = [(k, batch + shape) for k, shape in self._reward_done_shapes()]
        return StepPlan(action_shapes=actions, reward_done_shapes=shapes, done_structure=self.done_structure)

    def _hot_for(self, batch: torch.Size) -> StepPlan:
        """:meth:`_hot` for tensordicts whose batch size differs from the env's (extra leading dims on an
        unlocked env), cached per batch size (a few of them) while the specs are locked."""
        cache = self._spec_cache.get("_hot_for")
        plan = None if cache is None else cache.get(batch)
        if plan is None:
            plan = self._hot_plan(batch)
            if self._specs_locked:
                cache = self._spec_cache.setdefault("_hot_for", {})
                if len(cache) >= 16:  # a bounded memo: many distinct batch sizes just recompute
                    cache.clear()
                cache[batch] = plan
        return plan

    def _reward_done_shapes(self) -> list[tuple[NestedKey, torch.Size]]:
        def compute():
            n = len(self.batch_size)
            out = [(k, s.shape[n:]) for k, s in self.full_reward_spec.items(True, True)]
            out += [(k, s.shape[n:]) for k, s in self.full_done_spec.items(True, True)]
            return out

        return self._cached("_reward_done_shapes", compute)

    def _fix_shapes(self, next_td: TensorDictBase, plan: StepPlan | None = None) -> None:
        """Reshapes rewards/dones returned without their trailing singleton dim (e.g. ``[B]`` for ``[B, 1]``).

        ``plan`` is :meth:`_hot`'s, when the caller has it (it holds for outputs of the env's batch size)."""
        batch = next_td.batch_size
        if batch != self._batch_size:
            plan = self._hot_for(batch)
        elif plan is None:
            plan = self._hot()
        src = entries(next_td)
        for key, expected in plan.reward_done_shapes:
            value = src.get(key) if src is not None and type(key) is str else fast_get(next_td, key)
            if value is None:
                continue
            if value.shape != expected:
                if value.numel() != expected.numel():
                    raise ValueError(
                        f"{type(self).__name__}._step returned {key!r} with shape {tuple(value.shape)}; the spec "
                        f"expects {tuple(expected)}."
                    )
                next_td.set(key, value.reshape(expected))

    # -- reset ------------------------------------------------------------------------------------------
    def reset(self, tensordict: TensorDictBase | None = None, *, set_state: bool | None = None, **kwargs) -> TensorDictBase:
        """Resets the env (or, with ``"_reset"`` masks in ``tensordict``, the finished sub-environments).

        Returns:
            The reset outputs, including ``done``/``terminated`` (False for the reset sub-environments). When
            ``tensordict`` is given, it is updated in place with them (minus its reset masks) and returned, as
            in TorchRL; with masks that select only some sub-environments, the others keep their values, and
            the selected ones get zeros for entries the reset does not write.

        Raises:
            RuntimeError: a reset mask has the wrong shape, or the env is done right after a reset
                (unless ``allow_done_after_reset``).
        """
        self._check_open()
        if tensordict is not None:
            self._check_batch(tensordict, "reset")
            self._check_reset_masks(tensordict)
        out = self._reset(tensordict, **kwargs)
        if not isinstance(out, TensorDictBase):
            raise TypeError(f"{type(self).__name__}._reset must return a TensorDict, got {type(out).__name__}.")
        self._fill_reset_done(out)
        check = not self._allow_done_after_reset
        if check:
            self._check_not_done_after_reset(out, tensordict)
        if tensordict is None:
            return out
        result = self._reset_into(tensordict, out)
        if check:  # an enclosing env (a TransformedEnv) need not read these flags again
            for group in self.done_structure.groups:
                done = fast_get(result, group.done) if group.done is not None else None
                if done is not None and not done.is_cpu and known_value(done) is None:
                    mark_checked_after_reset(done)
        return result

    def _reset_into(self, tensordict: TensorDictBase, out: TensorDictBase) -> TensorDictBase:
        """``tensordict`` updated in place with the reset outputs ``out`` (as TorchRL), minus its reset masks.

        Where masks select only some sub-environments, the others keep ``tensordict``'s values and the selected
        ones get zeros for the entries the reset did not write (see :mod:`torchrl.envs._partial_reset`)."""
        masks, given = None, []
        for group in self.done_structure.groups:
            mask = fast_get(tensordict, group.reset_key)
            if mask is not None:
                prefix = as_tuple(group.reset_key)[:-1]
                given.append(prefix)
                # a mask that selects every row is a full reset: known from the done test's one read (the mask's
                # mark), or read here from a CPU mask; otherwise on an accelerator the blend tells the two apart on
                # the device (see _partial_reset.py)
                if not (known_value(mask) is True or (mask.is_cpu and bool(mask.all()))):
                    masks = masks or {}
                    masks[prefix] = mask
        if masks is not None:
            root_group = self._cached("_root_done_group", lambda: any(len(as_tuple(k)) == 1 for k in self.reset_keys))
            blend_partial_reset(tensordict, out, masks, given=set(given), root_group=root_group,
                                outputs_hold_all_rows=self._partial_reset_outputs_hold_all_rows)
        for key in self.reset_keys:
            tensordict.pop(key, None)
            if out is not tensordict:
                out.pop(key, None)
        if out is not tensordict:
            tensordict.update(out)
        return tensordict

    def _check_reset_masks(self, tensordict: TensorDictBase) -> None:
        batch = tensordict.batch_size
        for group in self.done_structure.groups:
            mask = fast_get(tensordict, group.reset_key)
            if mask is None:
                continue
            expected = batch + group.shape[len(self.batch_size):]
            if mask.shape != expected and mask.shape != batch:
                raise RuntimeError(
                    f"{type(self).__name__}.reset: reset mask {group.reset_key!r} has shape {tuple(mask.shape)}; "
                    f"expected {tuple(expected)} (the shape of the group's done entries)."
                )
            if mask.dtype != torch.bool:
                raise RuntimeError(f"{type(self).__name__}.reset: reset mask {group.reset_key!r} must be bool, got {mask.dtype}.")

    def _fill_reset_done(self, out: TensorDictBase) -> None:
        """Missing done entries of a reset's output: ``terminated`` copies a given ``done`` (as TorchRL), the
        others are all-False."""
        batch = out.batch_size
        n = len(self.batch_size)
        for group in self.done_structure.groups:
            zeros = None
            if group.done is not None and group.terminated is not None and fast_get(out, group.terminated) is None:
                done = fast_get(out, group.done)
                if done is not None:
                    fast_set(out, group.terminated, done.clone())
            for key in group.keys:
                if fast_get(out, key) is None:
                    if zeros is None:
                        zeros = torch.zeros(batch + group.shape[n:], dtype=torch.bool, device=out.device or self.device)
                    else:
                        zeros = zeros.clone()
                    fast_set(out, key, mark_false(zeros))

    def _check_not_done_after_reset(self, out: TensorDictBase, tensordict: TensorDictBase | None) -> None:
        for group in self.done_structure.groups:
            done = fast_get(out, group.done) if group.done is not None else None
            # the common case: nothing is done after a reset. A CPU flag is read first, cheaply; one on an
            # accelerator is not read when known on the host (filled with False by the reset, or already checked by
            # an inner env's reset), and otherwise read once, below
            if done is None or (not any_true(done) if done.is_cpu else checked_after_reset(done)):
                continue
            mask = fast_get(tensordict, group.reset_key) if tensordict is not None else None
            if mask is not None and mask.numel() == done.numel():
                done = done & mask.reshape(done.shape)
            if any_true(done):
                raise RuntimeError(
                    f"{type(self).__name__}: {group.done!r} is True right after reset. Fix _reset, or build the env "
                    f"with allow_done_after_reset=True if this is intended."
                )

    # -- transitions ------------------------------------------------------------------------------------
    def _step_mdp_plan(self) -> tuple:
        """``(take_from_next, drop_from_root, flat)``: key sets for :meth:`step_mdp`, computed once.

        ``flat`` (rewards and reset masks at the top level, the usual layout): ``take`` holds the top-level
        names of the declared entries, whose sub-TensorDicts are taken whole from ``"next"``.
        """

        def compute():
            def tup(k):
                return k if isinstance(k, tuple) else (k,)

            # As TorchRL: the outputs the next step reads are taken from "next" (observations, dones, and rewards
            # that are also states, e.g. RewardSum's episode_reward with reward_spec=True); state-only entries
            # (inputs, like the action) and plain rewards are not.
            states = {tup(k) for k in self.state_keys}
            rewards = [tup(k) for k in self.reward_keys]
            take = [tup(k) for k in (*self.observation_keys, *self.done_keys)] + [k for k in rewards if k in states]
            drop_root = {k for k in rewards if k not in states} | {tup(k) for k in self.reset_keys}
            if all(len(k) == 1 for k in drop_root):
                return tuple(dict.fromkeys(k[0] for k in take)), frozenset(k[0] for k in drop_root), True
            return tuple(dict.fromkeys(take)), drop_root, False

        return self._cached("_step_mdp_plan", compute)

    def step_mdp(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """The TensorDict for the next step, as TorchRL's: the observation and done entries the specs declare
        (and rewards that are also states) are taken from ``"next"``; its other top-level entries (rewards,
        state-only or undeclared entries) stay behind; the root's other entries (the action, state inputs,
        policy outputs) are carried over, rewards and ``"_reset"`` masks aside."""
        root_entries = entries(next_tensordict)  # None: not a plain TensorDict, or fast paths off
        nxt = root_entries.get("next") if root_entries is not None else fast_get(next_tensordict, "next")
        take, drop_root, flat = self._spec_cache.get("_step_mdp_plan") or self._step_mdp_plan()
        if flat and root_entries is not None:
            next_entries = entries(nxt)
            if next_entries is not None:  # plain TensorDicts, fast paths on
                return fast_step_mdp(root_entries, next_entries, nxt, take, drop_root)
        if flat:
            present = list(take)
            drop_root = {(k,) for k in drop_root}
        else:
            present = [k[0] if len(k) == 1 else k for k in take]
        out = structure_copy(nxt.select(*present, strict=False))
        merge_missing(out, next_tensordict, drop_root, ())
        return out

    def any_done(self, tensordict: TensorDictBase) -> bool:
        """Whether any done entry in ``tensordict`` (root level) is True; writes the ``"_reset"`` masks."""
        return self.done_structure.any_done(tensordict)

    def maybe_reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Resets the finished sub-environments of ``tensordict`` (a step_mdp'd TensorDict), if any, in place
        (as TorchRL): the reset data is written into ``tensordict``, which is returned."""
        if self.any_done(tensordict):
            reset = self.reset(tensordict)
            if reset is not tensordict:
                tensordict.update(reset)
                for key in self.reset_keys:
                    tensordict.pop(key, None)
        return tensordict

    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Steps, then prepares the next input: ``(tensordict_with_next, next_input)``.

        ``next_input`` is ``step_mdp`` of the result, with finished sub-environments reset: its root
        observations belong to new episodes there, while ``tensordict["next"]`` keeps the final ones.
        """
        tensordict = self.step(tensordict)
        next_input = self.step_mdp(tensordict)
        if self.done_structure.any_done(next_input):
            next_input = self.reset(next_input)
        return tensordict, next_input

    # -- random actions and fake data --------------------------------------------------------------------
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes a random action (drawn from the action spec) into ``tensordict`` (or a new one)."""
        if tensordict is None:
            return self.full_action_spec.rand()
        extra = tensordict.batch_size[: tensordict.batch_dims - len(self.batch_size)]
        leaves = self._cached("_action_leaves", self._random_action_leaves)
        if leaves is None:  # heterogeneous actions: sample the whole Composite at once
            tensordict.update(self.full_action_spec.rand(extra) if extra else self.full_action_spec.rand())
            return tensordict
        for key, leaf in leaves:
            fast_set(tensordict, key, leaf.rand(extra) if extra else leaf.rand())
        return tensordict

    rand_action.bulk_safe = True  # rollouts may pre-draw these actions (see _rollout._bulk_random_actions)

    def _column_loop(self, policy) -> ColumnStepper | None:
        """A column-wise step loop for this env and ``policy`` (``None``: random actions), or ``None`` (the
        default: the generic step loop). The protocol is :class:`~torchrl.envs._step_loop.ColumnStepper`
        (documented with the step loop, in :mod:`torchrl.envs._step_loop`)."""
        return None

    def _row_stepper(self, in_keys: list, in_views: list, out_keys: list, out_views: list) -> RowStepper | None:
        """One step of a batched-env worker written straight into its shared rows (``in_views``/``out_views``,
        named by ``in_keys``/``out_keys``), or ``None`` (the default). The protocol is
        :class:`~torchrl.envs._step_loop.RowStepper` (see :mod:`torchrl.envs._step_loop`)."""
        return None

    def _random_action_leaves(self):
        leaves = list(self.full_action_spec.items(True, True))
        return None if any(-1 in leaf.shape for _, leaf in leaves) else leaves

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """A step with a random action (from an empty TensorDict when none is given, as TorchRL)."""
        if tensordict is None:
            tensordict = self.full_action_spec.rand()
            return self.step(tensordict)
        return self.step(self.rand_action(tensordict))

    def fake_tensordict(self) -> TensorDictBase:
        """Zero-filled data with exactly the structure of a step's output (for checks and buffers)."""
        td = self.full_state_spec.zero()
        for spec in (self.full_observation_spec, self.full_done_spec, self.full_action_spec):
            td.update(spec.zero())
        nxt = self.full_observation_spec.zero()
        nxt.update(self.full_done_spec.zero())
        nxt.update(self.full_reward_spec.zero())
        td.set("next", nxt)
        return td

    def all_actions(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Every possible action (discrete action specs only), stacked along a new leading dim."""
        actions = self.full_action_spec.enumerate()
        if tensordict is None:
            return actions
        return tensordict.expand(actions.shape[0], *tensordict.shape).clone().update(actions)

    def cardinality(self, tensordict: TensorDictBase | None = None) -> int:
        """Number of distinct actions (discrete action specs only)."""
        return self.full_action_spec.cardinality()

    # -- rollout ----------------------------------------------------------------------------------------
    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        callback: Callable[..., Any] | None = None,
        *,
        actions: Iterable[Any] | None = None,
        auto_reset: bool = True,
        auto_cast_to_device: bool = False,
        break_when_any_done: bool | None = None,
        break_when_all_done: bool | None = None,
        return_contiguous: bool | None = None,
        tensordict: TensorDictBase | None = None,
        set_truncated: bool = False,
        out=None,
        trust_policy: bool = False,
        storing_device: torch.device | str | None = None,
        set_state: bool | None = None,
    ) -> TensorDictBase:
        """Runs ``max_steps`` steps (fewer if an episode ends first) and stacks them along a new time dim.

        Args:
            max_steps: maximum number of steps.
            policy: reads the TensorDict and writes actions; ``None`` draws random actions from the spec.
            callback: called as ``callback(env, tensordict)`` after every step.

        Keyword Args:
            actions: an iterable of actions (tensors or TensorDicts) replayed instead of a policy.
            auto_reset: reset before starting (with ``tensordict`` as reset input when given).
            auto_cast_to_device: move data to the policy's device before calling it, and back.
            break_when_any_done: stop after the first step where any sub-environment is done
                (the default). When False, finished sub-environments are reset and the rollout goes on.
            break_when_all_done: stop once every sub-environment has finished at least once (finished
                ones are reset and continue meanwhile).
            return_contiguous: ``False`` returns a lazy stack; default (``None``) a contiguous TensorDict.
            tensordict: the initial TensorDict (required when ``auto_reset=False``).
            set_truncated: mark the last step ``truncated`` (and ``done``) if ``max_steps`` is reached.
            out: a preallocated TensorDict of batch ``(*env.batch_size, max_steps)`` to write into.
            trust_policy: skip the policy device/output checks.
            storing_device: device of the returned data.

        Returns:
            A TensorDict of batch size ``(*env.batch_size, T)`` (time is the last batch dim).
        """
        return _rollout(
            self,
            max_steps,
            policy,
            callback,
            actions=actions,
            auto_reset=auto_reset,
            auto_cast_to_device=auto_cast_to_device,
            break_when_any_done=break_when_any_done,
            break_when_all_done=break_when_all_done,
            return_contiguous=return_contiguous,
            tensordict=tensordict,
            set_truncated=set_truncated,
            out=out,
            trust_policy=trust_policy,
            storing_device=storing_device,
        )

    # -- seeding, devices, lifetime -------------------------------------------------------------------------
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds the env; returns the seed for the next env (``seed`` itself when ``static_seed``)."""
        self._set_seed(seed)
        if seed is None or static_seed:
            return seed
        return next_seed(seed)

    def set_state(self) -> None:
        """Hook for envs whose state can be set from a TensorDict (no-op by default)."""

    def to(self, device: torch.device | str | int) -> "EnvBase":
        """Moves the env (specs and modules) to ``device``."""
        device = torch.device(device)
        locked = self.is_spec_locked
        if locked:
            self.set_spec_lock_(False)
        self._output_spec = self._output_spec.to(device)
        self._input_spec = self._input_spec.to(device)
        self._device = device
        super().to(device)
        self._invalidate_spec_cache()
        if locked:
            self.set_spec_lock_(True)
        return self

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Releases the env's resources; further steps raise."""
        if self._closed:
            if raise_if_closed:
                raise RuntimeError(f"{type(self).__name__} is already closed.")
            return
        self._closed = True

    def empty_cache(self) -> None:
        """Forgets cached spec-derived facts (they are recomputed on next use)."""
        self._invalidate_spec_cache()

    def register_collector(self, collector) -> None:
        self._collector = collector

    @property
    def collector(self):
        return self._collector

    def append_transform(self, transform) -> "EnvBase":
        """Returns ``TransformedEnv(self, transform)``."""
        return _require_hook("append_transform")(self, transform)

    def check_env_specs(self, *args, **kwargs) -> None:
        """Runs :func:`~torchrl.envs.utils.check_env_specs` on this env."""
        check_env_specs(self, *args, **kwargs)

    def __repr__(self) -> str:
        return nn.Module.__repr__(self)  # as TorchRL: the class name and submodules, e.g. "MyEnv()"
