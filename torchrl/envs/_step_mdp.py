"""Moving a step's ``"next"`` data to the root: the generic rule and a fast path for plain TensorDicts."""
from __future__ import annotations

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection

from torchrl._fast import entries, new_td

__all__ = ["merge_missing", "merge_structures", "fast_step_mdp", "prune_emptied", "structure_copy"]


def merge_missing(dest: TensorDictBase, src: TensorDictBase, exclude: set[tuple[str, ...]], prefix: tuple[str, ...]) -> None:
    """Copies (by reference) entries of ``src`` absent from ``dest``, recursing into shared sub-tds.

    Keys are visited without reading values that are not needed, so heterogeneous lazy stacks (whose
    leaves cannot be read as one tensor) pass through untouched; two lazy stacks along the same dim are
    merged member by member.
    """
    if (
        isinstance(dest, LazyStackedTensorDict)
        and isinstance(src, LazyStackedTensorDict)
        and dest.stack_dim == src.stack_dim
        and len(dest.tensordicts) == len(src.tensordicts)
    ):
        for d, s in zip(dest.tensordicts, src.tensordicts):
            merge_missing(d, s, exclude, prefix)
        return
    dest_keys = set(dest.keys())
    for key in src.keys():
        full = prefix + (key,)
        if full in exclude or (not prefix and key == "next"):
            continue
        nested_exclusions = any(e[: len(full)] == full and len(e) > len(full) for e in exclude)
        if key not in dest_keys:
            value = src.get(key)
            if nested_exclusions and is_tensor_collection(value):
                sub = value.empty()
                merge_missing(sub, value, exclude, full)
                if not sub.is_empty():
                    dest.set(key, sub)
            else:
                dest.set(key, value)
            continue
        if is_tensor_collection(dest.entry_class(key)) and is_tensor_collection(src.entry_class(key)):
            merge_missing(dest.get(key), src.get(key), exclude, full)


def structure_copy(td: TensorDictBase) -> TensorDictBase:
    """A new TensorDict tree over the same tensors: later writes into it never alter ``td``."""
    if type(td) is TensorDict:
        return merge_structures(td)
    out = td.copy()
    for key in list(out.keys()):
        value = out.get(key)
        if is_tensor_collection(value) and not isinstance(value, LazyStackedTensorDict):
            out.set(key, structure_copy(value))
    return out


def merge_structures(sub: TensorDict, extra: TensorDict | None = None) -> TensorDict:
    """A new TensorDict tree over ``sub``'s tensors, plus ``extra``'s entries that ``sub`` lacks (plain
    TensorDicts; neither is modified)."""
    src = entries(sub)  # None: fast paths off, read through items()
    if src is None:
        src = dict(sub.items())
    more = None
    if extra is not None and extra is not sub:
        more = entries(extra)
        if more is None:
            more = dict(extra.items())
    out = {}
    for k, v in src.items():
        if type(v) is TensorDict:
            other = more.get(k) if more is not None else None
            v = merge_structures(v, other if type(other) is TensorDict else None)
        out[k] = v
    if more is not None:
        for k, v in more.items():
            if k not in out:
                out[k] = merge_structures(v) if type(v) is TensorDict else v
    return new_td(out, sub.batch_size, sub.device, convert_dicts=False)


def fast_step_mdp(root_entries: dict, next_entries: dict, nxt: TensorDict, take: tuple, drop_root: frozenset) -> TensorDict:
    """``EnvBase.step_mdp`` for plain TensorDicts whose spec keys are all top-level strings.

    ``root_entries``/``next_entries`` are the entry dicts of the step's TensorDict and of its ``"next"``
    TensorDict ``nxt`` (from :func:`torchrl._fast.entries`). The entries of ``nxt`` named in ``take`` win;
    the root's other entries (minus ``drop_root`` and ``"next"``) are carried over; nested TensorDicts get
    fresh structures so that later writes into one step's data never alter another step's.
    """
    out = {}
    for k in take:
        v = next_entries.get(k)
        if v is None:
            continue
        if type(v) is TensorDict:
            other = root_entries.get(k)
            v = merge_structures(v, other if type(other) is TensorDict else None)
        out[k] = v
    for k, v in root_entries.items():
        if k in out or k in drop_root or k == "next":
            continue
        out[k] = merge_structures(v) if type(v) is TensorDict else v
    return new_td(out, nxt.batch_size, nxt.device, convert_dicts=False)


def prune_emptied(td: TensorDictBase, removed: set[tuple[str, ...]]) -> None:
    """Deletes the sub-TensorDicts left empty by removing the nested keys in ``removed``."""
    parents = sorted({k[:i] for k in removed for i in range(1, len(k))}, key=len, reverse=True)
    for parent in parents:
        sub = td.get(parent if len(parent) > 1 else parent[0], None)
        if sub is not None and is_tensor_collection(sub) and sub.is_empty():
            del td[parent if len(parent) > 1 else parent[0]]
