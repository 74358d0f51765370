"""Compares two scenario summaries (ours against TorchRL's) and lists where they differ."""
from __future__ import annotations

import math
from typing import Any

RTOL, ATOL = 1e-4, 1e-5


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):  # "nan", "inf" and friends
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL)


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where ``ours`` differs from ``theirs`` (empty when they agree).

    An exception agrees when ours is TorchRL's class or a subclass of it (user code catching TorchRL's type
    catches ours); messages are not compared. Numbers agree to ``RTOL``/``ATOL``.
    """
    where = path or "result"
    if isinstance(theirs, dict) and "raises" in theirs:
        if not (isinstance(ours, dict) and "raises" in ours):
            return [f"{where}: TorchRL raises {theirs['raises']} ({theirs['message'][:120]!r}); ours returns {_short(ours)}"]
        if theirs["raises"] not in ours["mro"]:
            return [f"{where}: TorchRL raises {theirs['raises']}, ours raises {ours['raises']} ({ours['message'][:120]!r})"]
        return []
    if isinstance(ours, dict) and "raises" in ours:
        return [f"{where}: ours raises {ours['raises']} ({ours['message'][:160]!r}); TorchRL returns {_short(theirs)}"]
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if "values" in theirs and "values" in ours:
            head = differences({k: v for k, v in ours.items() if k != "values"},
                               {k: v for k, v in theirs.items() if k != "values"}, path)
            if head:
                return head
            a, b = ours["values"], theirs["values"]
            bad = [i for i, (x, y) in enumerate(zip(a, b)) if not _close(x, y)]
            if bad:
                i = bad[0]
                return [f"{where}: {len(bad)} of {len(a)} values differ (first at {i}: ours {a[i]}, TorchRL {b[i]})"]
            return []
        out = []
        missing = [k for k in theirs if k not in ours]
        extra = [k for k in ours if k not in theirs]
        if missing:
            out.append(f"{where}: missing {missing} (TorchRL has them)")
        if extra:
            out.append(f"{where}: extra {extra} (TorchRL has not)")
        for k in theirs:
            if k in ours:
                out += differences(ours[k], theirs[k], f"{path}.{k}" if path else k)
        return out
    if isinstance(theirs, list) and isinstance(ours, list):
        if len(ours) != len(theirs):
            return [f"{where}: length {len(ours)}, TorchRL {len(theirs)}"]
        out = []
        for i, (x, y) in enumerate(zip(ours, theirs)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    if isinstance(theirs, (int, float)) and isinstance(ours, (int, float)) and not isinstance(theirs, bool):
        return [] if _close(ours, theirs) else [f"{where}: ours {ours}, TorchRL {theirs}"]
    if ours != theirs:
        return [f"{where}: ours {_short(ours)}, TorchRL {_short(theirs)}"]
    return []


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 160 else text[:157] + "..."
