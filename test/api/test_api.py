"""Every in-scope TorchRL name exists here, with TorchRL's parameter names and kinds."""
from __future__ import annotations

import importlib
import inspect

import pytest

from test.api._reference import Entry, Param, load
from test.api.scope import SCOPE


def _cases():
    for module, names in SCOPE.items():
        ref = load(module)
        if names == "all":
            names = list(ref)
        elif isinstance(names, tuple):
            names = [n for n in ref if n not in names[1]]
        for name in names:
            if name not in ref:
                raise KeyError(f"scope lists {module}.{name}, which TorchRL 0.14.1 does not have")
            yield pytest.param(module, ref[name], id=f"{module}.{name}")


def _ours(sig: inspect.Signature, skip_first: bool = False) -> list[Param]:
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "pos",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
        inspect.Parameter.KEYWORD_ONLY: "kw",
        inspect.Parameter.VAR_POSITIONAL: "var",
        inspect.Parameter.VAR_KEYWORD: "varkw",
    }
    params = [Param(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]
    return params[1:] if skip_first else params


def _opaque(params: list[Param]) -> bool:
    """Signatures that say nothing about parameter names: ``(*args, **kwargs)`` or pybind's ``(...)``."""
    core = [p for p in params if p.name not in ("self", "cls")]
    return [p.kind for p in core] == ["var", "varkw"] or [p.name for p in core] == ["..."]


def _compatible(ref: list[Param], ours: list[Param]) -> str | None:
    """``None`` when ``ours`` accepts every call ``ref`` accepts the same way, else the reason."""
    ref_names = {p.name for p in ref}
    kept = [p for p in ours if p.name in ref_names or p.kind in ("pos",) and not p.has_default]
    extra = [p for p in ours if p not in kept]
    for p in extra:
        if p.kind == "pos" and any(q.kind == "pos" for q in ours[ours.index(p) + 1 :] if q.name in ref_names):
            return f"extra positional parameter {p.name!r} before TorchRL's ones"
    got = [(p.name, p.kind) for p in kept]
    want = [(p.name, p.kind) for p in ref]
    if got != want:
        return f"parameters {got} != TorchRL's {want}"
    for r, o in zip(ref, kept):
        if r.has_default and not o.has_default:
            return f"parameter {r.name!r} has a default in TorchRL but is required here"
    return None


def _raw_member(cls: type, name: str):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _check_callable(obj, entry: Entry, where: str, skip_first: bool = False) -> list[str]:
    if entry.params is None or _opaque(entry.params):
        return []
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError) as err:
        return [f"{where}: no signature ({err})"]
    reason = _compatible(entry.params, _ours(sig, skip_first=skip_first))
    return [f"{where}: {reason}"] if reason else []


@pytest.mark.parametrize("module,entry", list(_cases()))
def test_name_and_signature(module: str, entry: Entry):
    mod = importlib.import_module(module)
    assert hasattr(mod, entry.name), f"{module} has no attribute {entry.name!r}"
    obj = getattr(mod, entry.name)
    problems: list[str] = []
    if entry.kind == "def":
        problems += _check_callable(obj, entry, f"{module}.{entry.name}")
    elif entry.kind == "class":
        assert inspect.isclass(obj), f"{module}.{entry.name} should be a class, got {type(obj).__name__}"
        problems += _check_callable(obj, entry, f"{module}.{entry.name}")
        for member in entry.members.values():
            where = f"{module}.{entry.name}.{member.name}"
            raw = _raw_member(obj, member.name)
            if raw is None:
                problems.append(f"{where}: missing")
                continue
            if member.kind == "property":
                continue
            func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            if getattr(func, "__module__", "").startswith("tensordict"):
                continue  # inherited from tensordict itself: its signature follows the installed tensordict
            if not callable(func):
                problems.append(f"{where}: not callable ({type(raw).__name__})")
                continue
            problems += _check_callable(func, member, where)
    assert not problems, "\n".join(problems)
