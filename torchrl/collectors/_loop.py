"""The collector's side of the one step loop: trajectory ids and the (shared-memory) output.

:class:`StepLoop` runs :func:`torchrl.envs._step_loop.run_steps` (policy → step → ``step_mdp`` → reset of the
finished sub-envs, ``T`` times), numbers the trajectories (ids change only where an episode ended), and
stacks the steps once at the end with :func:`torchrl._fast.stack_tds`, either into new memory or into a
persistent output (``StepLoop.out``: ``return_same_td``, or a worker process's shared-memory batch).
"""
from __future__ import annotations

import operator
from itertools import compress, repeat
from typing import Any, Callable

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import fast_get, fast_set, new_td, stack_tds
from torchrl.envs._step_loop import check_truncatable, run_steps

__all__ = ["StepLoop", "tree_template"]


def tree_template(td: TensorDictBase) -> tuple | None:
    """``((name, (shape, dtype) | sub-template, sub batch size), ...)`` of a plain TensorDict tree.

    Shapes are the full leaf shapes of ``td``. ``None`` for anything but nested plain TensorDicts of dense
    tensors (what a shared-memory batch can hold).
    """
    if type(td) is not TensorDict:
        return None
    out = []
    for k, v in td.items():
        if type(v) is TensorDict:
            sub = tree_template(v)
            if sub is None:
                return None
            out.append((k, sub, v.batch_size))
        elif isinstance(v, torch.Tensor) and not v.is_nested:
            out.append((k, (v.shape, v.dtype), None))
        else:
            return None
    return tuple(out)


def _stack_into(tds: list[TensorDictBase], dim: int, out: TensorDictBase | None) -> TensorDictBase:
    """The steps stacked into ``out`` when it fits, else into new memory (the caller re-plans its buffers)."""
    if out is not None:
        try:
            return stack_tds(tds, dim, out=out)
        except (KeyError, RuntimeError, ValueError):
            pass
    return stack_tds(tds, dim)


def _stack_runs(values: list, dim: int, out: torch.Tensor | None) -> torch.Tensor:
    """Stacks a list in which the same tensor object repeats in runs (trajectory ids change only at
    resets): one broadcast copy per run instead of one copy per element."""
    first = values[0]
    n = len(values)
    if out is None:
        out = torch.empty((*first.shape[:dim], n, *first.shape[dim:]), dtype=first.dtype, device=first.device)
    changes = list(compress(range(1, n), map(operator.is_not, values[1:], values[:-1])))
    for start, stop in zip([0, *changes], [*changes, n]):
        value = values[start]
        out.narrow(dim, start, stop - start).copy_(value.unsqueeze(dim).expand(*value.shape[:dim], stop - start, *value.shape[dim:]))
    return out


_NO_POLICY = object()  # StepLoop(policy=...) not given: the env's column-wise loop is not used


class StepLoop:
    """The collection state of one env: the next input, the trajectory ids, and the step loop.

    Args:
        env: the environment (any batch size).
        act: ``td -> td`` writing actions (the policy call).

    Keyword Args:
        track_traj_ids: write ``("collector", "traj_ids")`` (shape ``(*env.batch_size, T)``).
        reset_when_done: reset finished sub-environments (otherwise they keep stepping).
        set_truncated: mark the last step of every batch truncated (and done) where it is not done;
            those sub-environments start a new trajectory in the next batch.
    """

    def __init__(self, env, act: Callable, *, track_traj_ids: bool = True, reset_when_done: bool = True,
                 set_truncated: bool = False, policy: Any = _NO_POLICY) -> None:
        self.env = env
        self.act = act
        self.policy = policy  # what ``act`` calls, for the env's column-wise loop (_NO_POLICY: not known)
        self.track = track_traj_ids
        self.reset_when_done = reset_when_done
        self.set_truncated = set_truncated
        self.batch_size = env.batch_size
        self.ndim = len(self.batch_size)
        self.numel = self.batch_size.numel()
        self.td: TensorDictBase | None = None
        self.ids: torch.Tensor | None = None
        self.next_id = 0
        self.out: TensorDict | None = None
        groups = env.done_structure.groups
        root = [g for g in groups if not g.prefix]
        self._end_keys = [g.reset_key for g in (root or groups)]
        if set_truncated:
            check_truncatable(env, "Collector")
        self._groups = groups

    # -- trajectory ids ----------------------------------------------------------------------------------------
    def _fresh_ids(self, count: int) -> torch.Tensor:
        ids = torch.arange(count, device=self.env.device) + self.next_id
        self.next_id += count
        return ids

    def _end_mask(self, data: TensorDictBase) -> torch.Tensor | None:
        end = None
        for key in self._end_keys:
            mask = fast_get(data, key)
            if mask is None:
                continue
            mask = mask.reshape(*self.batch_size, -1).any(-1)
            end = mask if end is None else end | mask
        return end

    def _renew(self, ids: torch.Tensor, end: torch.Tensor | None) -> torch.Tensor:
        if self.ndim == 0:
            return self._fresh_ids(1).reshape(())
        if end is None:
            return ids
        if not end.is_cpu:
            # on an accelerator, without reading the mask: the k-th ended sub-env (in order) gets next_id + k, and
            # next_id becomes a 0-dim tensor on the device (read only by state_dict)
            flat = end.reshape(-1)
            order = flat.cumsum(0)
            renewed = torch.where(flat, order - 1 + self.next_id, ids.reshape(-1))
            self.next_id = order[-1] + self.next_id
            return renewed.reshape(ids.shape)
        n = int(end.sum())
        if n == 0:
            return ids
        ids = ids.clone()
        ids[end] = self._fresh_ids(n)
        return ids

    # -- resets ------------------------------------------------------------------------------------------------
    def reset(self, mask: torch.Tensor | None = None, **kwargs) -> None:
        """Resets every sub-env (``mask=None``) or those where ``mask`` (shape ``env.batch_size``) is True."""
        if mask is None or self.td is None:
            self.td = self.env.reset(**kwargs)
            self.ids = self._fresh_ids(self.numel).reshape(self.batch_size)
            return
        mask = mask.reshape(self.batch_size).to(torch.bool)
        if not bool(mask.any()):
            return
        td = self.td.copy()
        for group in self._groups:
            extra = group.shape[self.ndim:]
            fast_set(td, group.reset_key, mask.reshape(*self.batch_size, *([1] * len(extra))).expand(*self.batch_size, *extra))
        self.td = self.env.reset(td, **kwargs)
        self.ids = self._renew(self.ids, mask)

    # -- the loop ----------------------------------------------------------------------------------------------
    def _column_loop(self, act: Callable | None):
        """The env's column-wise loop for this batch's actions (``None``: use the generic loop)."""
        if not self.reset_when_done:
            return None
        env = self.env
        if act is None:
            if self.policy is _NO_POLICY:
                return None
            columns = env._column_loop(self.policy)
        elif act == env.rand_action:
            columns = env._column_loop(None)
        else:
            return None
        return columns if columns is not None and columns.accepts(self.td) else None

    def _run_columns(self, columns, steps: int) -> TensorDictBase:
        batch, self.td, ends = columns.run(
            self.td, steps, reset=self.env.reset, truncate_last=self.set_truncated, reset_cut=True
        )
        ids, out_ids, j = self.ids, [], 0
        for t in range(steps):
            out_ids.append(ids)
            if j < len(ends) and ends[j] == t:
                if self.track:
                    ids = self._renew(ids, None)
                j += 1
        self.ids = ids
        out = self.out
        if out is not None and out.batch_size == batch.batch_size:
            present = set(out.keys(True, True))
            if all(key in present for key in batch.keys(True, True)):
                try:
                    batch = out.update_(batch)
                except (RuntimeError, ValueError):  # other shapes: the caller re-plans its buffers
                    pass
        return self._with_traj_ids(batch, out_ids, steps)

    def run(self, steps: int, act: Callable | None = None) -> TensorDictBase:
        """Collects ``steps`` steps of every sub-env; returns them stacked (batch ``(*env.batch_size, steps)``)."""
        if self.td is None:
            self.reset()
        columns = self._column_loop(act)
        if columns is not None:
            try:
                return self._run_columns(columns, steps)
            except type(columns).NotApplicable:  # the policy's outputs are not plain tensors
                pass
        ends: list = []
        track = self.track
        steps_done, self.td = run_steps(
            self.env, self.td, act or self.act, steps, reset_when_done=self.reset_when_done,
            truncate_last=self.set_truncated, on_end=(lambda t, nxt: ends.append((t, self._end_mask(nxt)))) if track else None,
        )
        ids, out_ids, start = self.ids, [], 0
        for t, end in ends:  # the ids of each step: renewed where an episode ended
            out_ids.extend(repeat(ids, t + 1 - start))
            start = t + 1
            ids = self._renew(ids, end)
        out_ids.extend(repeat(ids, steps - start))
        self.ids = ids
        batch = _stack_into(steps_done, self.ndim, self.out)
        return self._with_traj_ids(batch, out_ids, steps)

    def _with_traj_ids(self, batch: TensorDictBase, out_ids: list, steps: int) -> TensorDictBase:
        out = self.out
        if self.track:
            target = None
            if batch is out and out is not None:
                target = fast_get(out, ("collector", "traj_ids"))
            if target is not None and target.shape == (*self.batch_size, steps):
                _stack_runs(out_ids, self.ndim, target)
            else:
                traj = _stack_runs(out_ids, self.ndim, None)
                sub = fast_get(batch, "collector")
                if sub is None:
                    batch.set("collector", new_td({"traj_ids": traj}, batch.batch_size, batch.device))
                else:
                    sub.set("traj_ids", traj)
        return batch

    # -- state ---------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``traj_id``: the next trajectory id (TorchRL's entry); ``traj_ids``: the current one of each sub-env."""
        return {"traj_id": torch.tensor(int(self.next_id), dtype=torch.int32),
                "traj_ids": None if self.ids is None else self.ids.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.next_id = int(state.get("traj_id", state.get("next_traj_id", self.next_id)))
        ids = state.get("traj_ids")
        if ids is not None:
            self.ids = ids.clone()
