"""``StepCounter``: counts steps per episode and truncates episodes at ``max_steps``."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl._fast import entries, fast_get, fast_set, scalar, writable
from torchrl.data.tensor_specs import Bounded, Composite
from torchrl.envs._done import as_tuple, from_tuple, mark_false
from torchrl.envs.transforms._groups import done_groups, restart_where_reset
from torchrl.envs.transforms._transform import Transform

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
        # (counter tensor written last step, its version, the constant 1 on its device): while it comes back
        # unchanged, ``top`` (its largest value, tracked on the host) decides whether an episode can reach the limit
        self.last = None
        self.top = 0


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
        self._single: _Group | None = None  # the only group, when it is the root's with top-level entries

    # -- structure --------------------------------------------------------------------------------------
    def _set_groups(self, full_done_spec) -> None:
        groups = self._groups = [
            _Group(prefix, shape, self.step_count_key, self.truncated_key if self.max_steps is not None else None)
            for prefix, shape in done_groups(full_done_spec).items()
        ]
        single = groups[0] if len(groups) == 1 else None
        self._single = single if single is not None and single.truncated is not None and type(single.done) is str else None

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
            count = restart_where_reset(tensordict, g.reset, previous, fresh)
            fast_set(tensordict_reset, g.count, count)
            self._remember_reset(g, count, fresh, previous)
            if g.truncated is not None:
                # truncation starts False with each episode (when the base env does not write the entry, the
                # reset output may still hold the previous step's value)
                fresh = mark_false(torch.zeros(shape, dtype=torch.bool, device=tensordict_reset.device))
                previous = fast_get(tensordict_reset, g.truncated, None)
                fast_set(tensordict_reset, g.truncated, restart_where_reset(tensordict, g.reset, previous, fresh))
        return tensordict_reset

    @staticmethod
    def _remember_reset(g: _Group, count: torch.Tensor, fresh: torch.Tensor, previous: torch.Tensor | None) -> None:
        """Keeps a host bound on the largest count a reset leaves: 0 after a full reset; after a partial one on
        an accelerator, the bound known for the counter before it (CPU counters are read exactly at the next
        step instead: a cheap read that lets the bound drop again after episodes end)."""
        last = g.last
        if count is fresh:
            top = 0
        elif not count.is_cpu and last is not None and last[0] is previous and last[1] == previous._version:
            top = g.top
        else:
            g.last, g.top = None, 0
            return
        g.last, g.top = (count, count._version, scalar(1, torch.int64, None if count.is_cpu else count.device)), top

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        max_steps, update_done = self.max_steps, self.update_done
        g = self._single
        if g is not None and update_done and max_steps is not None and g.top + 1 < max_steps:
            # The usual step, read from the entry dicts: the counter written last step came back unchanged, so no
            # episode can reach the limit, and the env wrote done but no truncated entry. The general loop below
            # gives the same result (count + 1, an all-False truncated, done as it stands).
            src, dst = entries(tensordict), entries(next_tensordict)
            if src is not None and dst is not None and writable(next_tensordict):
                count, last = src.get(g.count), g.last
                done = dst.get(g.done)
                if last is not None and last[0] is count and last[1] == count._version and done is not None \
                        and g.truncated not in dst:
                    new = dst[g.count] = count.add(last[2])
                    truncated = dst[g.truncated] = torch.zeros_like(done)
                    if not truncated.is_cpu:  # known all-False on the host: the done test reads nothing
                        mark_false(truncated)
                    g.last, g.top = (new, new._version, last[2]), g.top + 1
                    return next_tensordict
        for g in self._groups or self._get_groups():
            count = fast_get(tensordict, g.count)
            last = g.last
            if last is not None and last[0] is count and last[1] == count._version:
                # the counter written last step came back unchanged: its device (and so its constant 1) and its
                # largest value are known on the host
                one, top = last[2], g.top + 1
            else:
                if count is None:
                    done = fast_get(next_tensordict, g.done)
                    count = torch.zeros(done.shape, dtype=torch.int64, device=done.device)
                # a shared 0-dim operand: cheaper per step than a Python number, which torch wraps anew each call
                one, top = scalar(1, torch.int64, None if count.is_cpu else count.device), None
            new = count.add(one)
            fast_set(next_tensordict, g.count, new)
            if max_steps is None:
                continue
            if top is None and new.is_cpu:  # after a reset or an outside edit: one read (never waits for a device)
                top = int(new.max()) if new.numel() else 0
            g.last, g.top = (None, 0) if top is None else ((new, new._version, one), top)
            previous = fast_get(next_tensordict, g.truncated)
            done = fast_get(next_tensordict, g.done) if update_done else None
            if top is not None and top < max_steps and (done is not None or not update_done):
                # no episode reached the limit: the env's own flags stand; a missing truncated entry is all False
                if previous is None:
                    fresh = torch.zeros_like(new if done is None else done, dtype=torch.bool)
                    fast_set(next_tensordict, g.truncated, mark_false(fresh))
                continue
            truncated = new.ge(scalar(max_steps, torch.int64, None if new.is_cpu else new.device))  # fresh: safe in place
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
