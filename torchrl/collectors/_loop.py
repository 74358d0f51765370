"""The collection loop: policy → step → done check → ``step_mdp`` (→ reset of the finished sub-envs),
``T`` times, then one stack of the steps along a new last batch dim.

Per step the loop does one policy call, one ``env.step`` (which writes ``"next"`` in place), one
``step_mdp`` and one done check; trajectory ids change only where an episode ended. The steps are kept
as the TensorDicts the env produced and stacked once at the end, leaf by leaf, either into new memory
or into a persistent output (``return_same_td``, or the shared-memory buffers of worker processes).
"""
from __future__ import annotations

import operator
from itertools import compress, repeat
from typing import Any, Callable

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl._fast import fast_get, fast_set, new_td

__all__ = ["StepLoop", "Stacker", "build", "targets_of", "tree_template"]

_TD = TensorDict


class _Mismatch(Exception):
    pass


def tree_template(td: TensorDictBase) -> tuple | None:
    """``((name, (shape, dtype) | sub-template, sub batch size), ...)`` of a plain TensorDict tree.

    Shapes are the full leaf shapes of ``td`` (one step, or one batch). ``None`` for anything but nested
    plain TensorDicts of tensors.
    """
    if type(td) is not _TD:
        return None
    out = []
    for k, v in td._tensordict.items():
        if type(v) is _TD:
            sub = tree_template(v)
            if sub is None:
                return None
            out.append((k, sub, v.batch_size))
        elif isinstance(v, torch.Tensor) and not v.is_nested:
            out.append((k, (v.shape, v.dtype), None))
        else:
            return None
    return tuple(out)


def _n_leaves(template: tuple) -> int:
    return sum(1 if sub_batch is None else _n_leaves(sub) for _, sub, sub_batch in template)


def build(template: tuple, leaves, batch: torch.Size, inner_ndim: int, device=None) -> TensorDict:
    """A TensorDict tree shaped like ``template`` over ``leaves`` (an iterator, in template order).

    Sub-TensorDicts get ``batch`` plus the dims they had beyond the step's ``inner_ndim`` batch dims.
    """
    source = {}
    for k, sub, sub_batch in template:
        if sub_batch is None:
            source[k] = next(leaves)
        else:
            extra = tuple(sub_batch[inner_ndim:])
            source[k] = build(sub, leaves, torch.Size((*batch, *extra)), len(sub_batch), device)
    return new_td(source, batch, device)


def targets_of(out: TensorDictBase, template: tuple) -> list[torch.Tensor] | None:
    """The leaves of ``out`` at the positions of ``template`` (extra entries of ``out`` are ignored);
    ``None`` unless every leaf exists with exactly the template's shape and dtype."""
    if type(out) is not _TD:
        return None
    found: list[torch.Tensor] = []
    entries = out._tensordict
    for key, sub, sub_batch in template:
        v = entries.get(key)
        if sub_batch is None:
            if not isinstance(v, torch.Tensor) or v.shape != sub[0] or v.dtype != sub[1]:
                return None
            found.append(v)
        else:
            inner = targets_of(v, sub) if type(v) is _TD else None
            if inner is None:
                return None
            found.extend(inner)
    return found


_GRABBERS: dict[tuple, Callable] = {}


def _grabber(template: tuple) -> Callable:
    """A function appending the leaves of each step to ``sinks`` (generated once per structure).

    Reading ``td._tensordict[key]`` for a fixed key list costs a fraction of a generic tree walk; each node's
    entry count is checked so that a step with more or fewer entries is detected (``_Mismatch``).
    """
    fn = _GRABBERS.get(template)
    if fn is not None:
        return fn
    lines = ["def grab(steps, sinks, TD, Mismatch):"]
    count = _n_leaves(template)
    lines += [f"    a{i} = sinks[{i}].append" for i in range(count)]
    lines += ["    for td in steps:", "        if type(td) is not TD:", "            raise Mismatch", "        d0 = td._tensordict"]
    pos = 0

    def emit(tmpl: tuple, depth: int) -> None:
        nonlocal pos
        pad = "        "
        lines.append(f"{pad}if len(d{depth}) != {len(tmpl)}:")
        lines.append(f"{pad}    raise Mismatch")
        for key, sub, sub_batch in tmpl:
            if sub_batch is None:
                lines.append(f"{pad}a{pos}(d{depth}[{key!r}])")
                pos += 1
            else:
                lines.append(f"{pad}d{depth + 1} = d{depth}[{key!r}]")
                lines.append(f"{pad}if type(d{depth + 1}) is not TD:")
                lines.append(f"{pad}    raise Mismatch")
                lines.append(f"{pad}d{depth + 1} = d{depth + 1}._tensordict")
                emit(sub, depth + 1)

    emit(template, 0)
    namespace: dict = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from dict keys rendered with repr()
    fn = namespace["grab"]
    if len(_GRABBERS) > 256:
        _GRABBERS.clear()
    _GRABBERS[template] = fn
    return fn


_ALIASES: dict[tuple, dict[int, int]] = {}


def _leaf_paths(template: tuple, prefix: tuple = ()) -> list[tuple[tuple, tuple]]:
    out = []
    for key, sub, sub_batch in template:
        if sub_batch is None:
            out.append((prefix + (key,), sub))
        else:
            out.extend(_leaf_paths(sub, prefix + (key,)))
    return out


def _aliases(template: tuple) -> dict[int, int]:
    """``{root leaf index: next leaf index}`` for root entries that ``step_mdp`` fills from the previous
    step's ``"next"`` (same path under ``"next"``, same shape and dtype)."""
    found = _ALIASES.get(template)
    if found is not None:
        return found
    paths = _leaf_paths(template)
    index = {path: (i, meta) for i, (path, meta) in enumerate(paths)}
    found = {}
    for i, (path, meta) in enumerate(paths):
        if path[0] == "next":
            continue
        other = index.get(("next",) + path)
        if other is not None and other[1] == meta:
            found[i] = other[0]
    if len(_ALIASES) > 256:
        _ALIASES.clear()
    _ALIASES[template] = found
    return found


def _shifted(values: list, next_values: list, next_stacked: torch.Tensor, dim: int, out: torch.Tensor | None) -> torch.Tensor:
    """Stacks ``values`` knowing that ``values[t]`` is usually the very tensor ``next_values[t - 1]``.

    The shared steps are copied from the already stacked ``next_stacked`` in one slice copy; only the
    steps that differ (after a reset) are written one by one.
    """
    n = len(values)
    differ = list(compress(range(1, n), map(operator.is_not, values[1:], next_values[:-1])))
    if len(differ) * 4 > n:
        return _stack(values, dim, out)
    if out is None:
        out = torch.empty_like(next_stacked)
    out.select(dim, 0).copy_(values[0])
    if n > 1:
        out.narrow(dim, 1, n - 1).copy_(next_stacked.narrow(dim, 0, n - 1))
    for t in differ:
        out.select(dim, t).copy_(values[t])
    return out


def _stack(values: list, dim: int, out: torch.Tensor | None) -> torch.Tensor:
    """``torch.stack`` (into ``out`` when given); a tensor repeated at every step (e.g. constant
    parameters) is broadcast and copied once instead."""
    first = values[0]
    if values[-1] is first and all(map(operator.is_, values, repeat(first))):
        expanded = first.unsqueeze(dim).expand(*first.shape[:dim], len(values), *first.shape[dim:])
        return out.copy_(expanded) if out is not None else expanded.clone()
    return torch.stack(values, dim, out=out) if out is not None else torch.stack(values, dim)


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


class Stacker:
    """Stacks per-step TensorDicts sharing one structure along ``dim``, leaf by leaf.

    ``stack(steps, dim, out)`` writes into ``out`` (a TensorDict of the stacked structure) when it is
    given and matches; otherwise it allocates. Structures it cannot handle go through tensordict's stack.
    """

    def stack(self, steps: list[TensorDictBase], dim: int, out: TensorDict | None = None) -> TensorDictBase:
        first = steps[0]
        template = tree_template(first)
        if template is None:
            return self._fallback(steps, dim, out)
        sinks: list[list] = [[] for _ in range(_n_leaves(template))]
        batch = first.batch_size
        try:
            _grabber(template)(steps, sinks, _TD, _Mismatch)
        except (_Mismatch, KeyError):
            return self._fallback(steps, dim, out)
        n = len(steps)
        out_batch = torch.Size((*batch[:dim], n, *batch[dim:]))
        targets = None
        if out is not None:
            targets = targets_of(out, self.stacked_template(template, dim, n))
            if out.batch_size != out_batch:
                targets = None
        aliases = _aliases(template)
        stacked: list = [None] * len(sinks)
        try:
            for i, values in enumerate(sinks):
                if i in aliases:
                    continue
                stacked[i] = _stack(values, dim, targets[i] if targets is not None else None)
            for i, j in aliases.items():
                target = targets[i] if targets is not None else None
                stacked[i] = _shifted(sinks[i], sinks[j], stacked[j], dim, target)
        except (RuntimeError, TypeError):
            return self._fallback(steps, dim, out)
        if targets is not None:
            return out
        return build(template, iter(stacked), out_batch, len(batch), first.device)

    @staticmethod
    def stacked_template(template: tuple, dim: int, n: int) -> tuple:
        out = []
        for k, sub, sub_batch in template:
            if sub_batch is None:
                shape, dtype = sub
                out.append((k, (torch.Size((*shape[:dim], n, *shape[dim:])), dtype), None))
            else:
                out.append((k, Stacker.stacked_template(sub, dim, n), torch.Size((*sub_batch[:dim], n, *sub_batch[dim:]))))
        return tuple(out)

    @staticmethod
    def _fallback(steps: list[TensorDictBase], dim: int, out: TensorDictBase | None) -> TensorDictBase:
        result = LazyStackedTensorDict.maybe_dense_stack(steps, dim)
        if out is not None and out.batch_size == result.batch_size:
            try:
                out.update_(result)
                return out
            except (KeyError, RuntimeError):
                pass
        return result


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
        self.stacker = Stacker()
        groups = env.done_structure.groups
        root = [g for g in groups if not g.prefix]
        self._end_keys = [g.reset_key for g in (root or groups)]
        if set_truncated:
            missing = [g.done for g in groups if g.truncated is None]
            if missing:
                raise RuntimeError(
                    f"Collector(set_truncated=True): the env has no 'truncated' entry next to {missing}; call "
                    f"env.add_truncated_keys() (or add a StepCounter transform) first."
                )
        self._groups = groups
        # One root done group (the common case): a single read + any() per step, masks written on hits only.
        single = len(groups) == 1 and not groups[0].prefix and groups[0].done is not None
        self._fast_done = groups[0].done if single else None
        self._fast_done_numel = groups[0].shape.numel() if single else 0

    # -- trajectory ids ----------------------------------------------------------------------------------------
    def _fresh_ids(self, count: int) -> torch.Tensor:
        ids = torch.arange(self.next_id, self.next_id + count, device=self.env.device)
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
    def _truncate(self, td: TensorDictBase) -> None:
        nxt = fast_get(td, "next")
        for group in self._groups:
            done = fast_get(nxt, group.done) if group.done is not None else None
            truncated = fast_get(nxt, group.truncated)
            if done is None or truncated is None:
                continue
            truncated = truncated | ~done
            nxt.set(group.truncated, truncated)
            nxt.set(group.done, done | truncated)

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
        if out is not None:
            try:
                out.update_(batch)
                batch = out
            except (KeyError, RuntimeError, ValueError):  # another structure: the caller re-plans its buffers
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
        env = self.env
        act = act or self.act
        step, step_mdp, any_done, reset = env.step, env.step_mdp, env.any_done, env.reset
        track, reset_when_done = self.track, self.reset_when_done
        last = steps - 1 if self.set_truncated else -1
        td, ids = self.td, self.ids
        fast_done = self._fast_done
        one = self._fast_done_numel == 1  # bool() of a 1-element tensor is cheaper than any()
        out_steps: list = [None] * steps
        out_ids: list = [None] * steps
        for t in range(steps):
            td = step(act(td))
            out_steps[t] = td
            out_ids[t] = ids
            if t == last:
                self._truncate(td)
            nxt = step_mdp(td)
            if not reset_when_done:
                td = nxt
                continue
            if fast_done is not None:
                done = fast_get(nxt, fast_done)
                if done is not None and not (done if one else done.any()):
                    td = nxt
                    continue
            if any_done(nxt):
                end = self._end_mask(nxt) if track else None
                nxt = reset(nxt)
                if track:
                    ids = self._renew(ids, end)
            td = nxt
        self.td, self.ids = td, ids
        batch = self.stacker.stack(out_steps, self.ndim, out=self.out)
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
        return {"traj_id": torch.tensor(self.next_id, dtype=torch.int32),
                "traj_ids": None if self.ids is None else self.ids.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.next_id = int(state.get("traj_id", state.get("next_traj_id", self.next_id)))
        ids = state.get("traj_ids")
        if ids is not None:
            self.ids = ids.clone()
