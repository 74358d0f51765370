"""``StepCounter``: counts steps per episode and truncates episodes at ``max_steps``."""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import scalar
from torchrl._fast import fast_get, fast_set, writable
from torchrl.data.tensor_specs import Bounded, Composite
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import done_groups, restart_where_reset
from torchrl.envs.transforms.transform import Transform

__all__ = ["StepCounter"]

_INT_MAX = torch.iinfo(torch.int64).max


class _Group:
    """The keys of one group of done entries, and what the counter remembers about it between steps."""

    __slots__ = ("count", "truncated", "done", "reset", "shape", "last", "top")

    def __init__(self, prefix, shape, step_count_key, truncated_key):
        self.count = from_tuple(prefix + (step_count_key,))
        self.truncated = from_tuple(prefix + (truncated_key,)) if truncated_key else None
        self.done = from_tuple(prefix + ("done",))
        self.reset = from_tuple(prefix + ("_reset",))
        self.shape = shape
        # (counter tensor written last step, its version): while it comes back unchanged, ``top`` (its
        # largest value, tracked on the host) decides whether an episode can reach the limit
        self.last = None
        self.top = 0


def _count_step(g: _Group, max_steps: int):
    """The usual step on entry dicts: the counter written last step comes back unchanged (same tensor, same
    version) and its top stays below the limit, and the env wrote ``done`` but no ``truncated`` entry. Then
    no episode can be truncated: count + 1 and an all-False ``truncated``; ``done`` stands."""
    one = scalar(1, torch.int64)
    count_key, truncated_key, done_key = g.count, g.truncated, g.done
    zeros_like = torch.zeros_like

    def fast_step(src: dict, dst: dict) -> bool:
        count, last = src.get(count_key), g.last
        if last is None or last[0] is not count or last[1] != count._version or g.top + 1 >= max_steps:
            return False
        done = dst.get(done_key)
        if done is None or truncated_key in dst:
            return False
        new = count.add(one)
        dst[count_key] = new
        dst[truncated_key] = zeros_like(done)
        g.last, g.top = (new, new._version), g.top + 1
        return True

    return fast_step


class StepCounter(Transform):
    """Writes ``step_count`` (steps since the episode began) and, with ``max_steps``, truncates.

    One counter lives next to every group of done entries (the root, and e.g. ``"agents"`` in
    multi-agent envs). When the count reaches ``max_steps`` the step is marked ``truncated`` and
    ``done`` (when ``update_done``), never ``terminated``: value estimators then bootstrap from it.

    Args:
        max_steps: episode length limit (``None``: count only).
        truncated_key: name of the truncation entry (added to the done spec when absent).
        step_count_key: name of the counter entry.
        update_done: also set ``done`` when truncating.

    Examples:
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=3))
        >>> data = env.rollout(10)
        >>> data.shape[0], data["next", "truncated"].squeeze(-1).tolist()
        (3, [False, False, True])
    """

    def __init__(
        self,
        max_steps: int | None = None,
        truncated_key: str | None = "truncated",
        step_count_key: str | None = "step_count",
        update_done: bool = True,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"StepCounter: max_steps must be a positive integer or None, got {max_steps}.")
        for name, key in (("truncated_key", truncated_key), ("step_count_key", step_count_key)):
            if not isinstance(key, str):
                raise ValueError(
                    f"StepCounter: {name} must be a string (a leaf name placed next to each done entry), got {key!r}."
                )
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done
        self._groups: list[_Group] | None = None

    def __setattr__(self, name: str, value) -> None:
        if name in ("max_steps", "update_done"):  # the fast step holds both: built again by the next step
            self.__dict__["_fast_step"] = None
        super().__setattr__(name, value)

    # -- structure --------------------------------------------------------------------------------------
    def _set_groups(self, full_done_spec) -> None:
        self.__dict__["_fast_step"] = None
        self._groups = [
            _Group(prefix, shape, self.step_count_key, self.truncated_key if self.max_steps is not None else None)
            for prefix, shape in done_groups(full_done_spec).items()
        ]

    def _get_groups(self) -> list[_Group]:
        if self._groups is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("StepCounter must be used inside a TransformedEnv (it needs the env's done keys).")
            self._set_groups(parent.output_spec["full_done_spec"])
        return self._groups

    @property
    def step_count_keys(self):
        return [g.count for g in self._get_groups()]

    @property
    def truncated_keys(self):
        return [g.truncated for g in self._get_groups() if g.truncated is not None]

    @property
    def done_keys(self):
        return [g.done for g in self._get_groups()]

    @property
    def reset_keys(self):
        return [g.reset for g in self._get_groups()]

    @property
    def terminated_keys(self):
        return [from_tuple(as_tuple(g.done)[:-1] + ("terminated",)) for g in self._get_groups()]

    @property
    def all_done_keys(self):
        return self.done_keys + self.terminated_keys + self.truncated_keys

    @property
    def all_truncated_keys(self):
        return self.truncated_keys

    @property
    def full_done_spec(self):
        parent = self.parent
        return None if parent is None else parent.output_spec["full_done_spec"]

    # -- data ------------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for g in self._get_groups():
            done = fast_get(tensordict_reset, g.done, None)
            shape = done.shape if done is not None else tensordict_reset.batch_size + g.shape[len(g.shape) - 1 :]
            fresh = torch.zeros(shape, dtype=torch.int64, device=tensordict_reset.device)
            previous = fast_get(tensordict, g.count, None)
            fast_set(tensordict_reset, g.count, restart_where_reset(tensordict, g.reset, previous, fresh))
            if g.truncated is not None:
                # truncation starts False with each episode (when the base env does not write the entry, the
                # reset output may still hold the previous step's value)
                fresh = torch.zeros(shape, dtype=torch.bool, device=tensordict_reset.device)
                previous = fast_get(tensordict_reset, g.truncated, None)
                fast_set(tensordict_reset, g.truncated, restart_where_reset(tensordict, g.reset, previous, fresh))
        return tensordict_reset

    def _make_fast_step(self, g: _Group, max_steps: int, count: torch.Tensor) -> None:
        """Enables the fast step (see ``TransformedEnv._step``) once the general one has run for a
        single root group of string keys on CPU, with ``update_done``."""
        if self.__dict__.get("_fast_step") is not None or len(self._groups) != 1 or not count.is_cpu:
            return
        if self.update_done and all(type(k) is str for k in (g.count, g.truncated, g.done)):
            self.__dict__["_fast_step"] = _count_step(g, max_steps)

    def _constants(self, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(1, max_steps)`` as shared 0-dim int64 tensors on ``count``'s device: tensor operands cost less
        per step than Python numbers, which torch wraps anew on every call."""
        device = None if count.is_cpu else count.device
        max_steps = self.max_steps
        limit = None if max_steps is None else scalar(max_steps, torch.int64, device)
        return scalar(1, torch.int64, device), limit

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        fast = self.__dict__.get("_fast_step")
        if (
            fast is not None and type(tensordict) is TensorDict and writable(next_tensordict)
            and fast(tensordict._tensordict, next_tensordict._tensordict)
        ):
            return next_tensordict
        max_steps, update_done = self.max_steps, self.update_done
        for g in self._groups or self._get_groups():
            count = fast_get(tensordict, g.count)
            if count is None:
                done = fast_get(next_tensordict, g.done)
                count = torch.zeros(done.shape, dtype=torch.int64, device=done.device)
            one, limit = self._constants(count)
            new = count.add(one)
            fast_set(next_tensordict, g.count, new)
            if limit is None:
                continue
            previous = fast_get(next_tensordict, g.truncated)
            done = fast_get(next_tensordict, g.done) if update_done else None
            if done is not None or not update_done:
                last = g.last  # the counter written last step, if it came back unchanged: its top is known
                if last is not None and last[0] is count and last[1] == count._version:
                    top = g.top + 1
                elif new.is_cpu:  # after a reset or an outside edit: one read (never waits for a device)
                    top = int(new.max()) if new.numel() else 0
                else:
                    top = None
                if top is not None:
                    g.last, g.top = (new, new._version), top
                    self._make_fast_step(g, max_steps, count)
                    if top < max_steps:  # no episode reached the limit: the env's own flags stand
                        if previous is None:  # all False: a fresh copy of done's shape (cheaper than new >= limit)
                            fast_set(next_tensordict, g.truncated, new.ge(limit) if done is None else torch.zeros_like(done))
                        continue
            truncated = new.ge(limit)  # a fresh tensor: safe to update in place
            if previous is not None:
                truncated.logical_or_(previous)
            fast_set(next_tensordict, g.truncated, truncated)
            if update_done:
                fast_set(next_tensordict, g.done, truncated if done is None else done.logical_or(truncated))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "StepCounter counts environment steps; it cannot be applied to stored data. Use it inside a "
            "TransformedEnv."
        )

    # -- specs -----------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        full_done = output_spec["full_done_spec"]
        self._set_groups(full_done)
        high = _INT_MAX  # as TorchRL: the spec bounds the counter by int64's range whatever max_steps
        for g in self._groups:
            if g.truncated is not None and g.truncated not in full_done.keys(include_nested=True):
                full_done[g.truncated] = full_done[g.done].clone()
            output_spec["full_observation_spec"][g.count] = Bounded(
                0, high, shape=full_done[g.done].shape, dtype=torch.int64, device=full_done.device
            )
        return output_spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if self._groups is None:
            parent = self.parent
            if parent is not None:
                self._set_groups(parent.output_spec["full_done_spec"])
        high = _INT_MAX
        state = input_spec["full_state_spec"]
        for g in self._groups or ():
            state[g.count] = Bounded(0, high, shape=g.shape, dtype=torch.int64, device=state.device)
        return input_spec

    def __repr__(self) -> str:
        return f"StepCounter(max_steps={self.max_steps}, step_count_key={self.step_count_key!r})"
