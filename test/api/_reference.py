"""Parser for the TorchRL 0.14.1 API listings in ``test/api/data`` (facts about the API, kept as data)."""
from __future__ import annotations

import dataclasses
import pathlib
import re

DATA = pathlib.Path(__file__).parent / "data"

_HEAD = re.compile(r"^(class|def) ([A-Za-z_][A-Za-z0-9_]*)")
_CONST = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*) = ")
_MEMBER = re.compile(r"^    (def|property|staticmethod|classmethod) ([A-Za-z_][A-Za-z0-9_]*)")


@dataclasses.dataclass
class Param:
    name: str
    kind: str  # "pos", "kw", "var", "varkw"
    has_default: bool


@dataclasses.dataclass
class Entry:
    name: str
    kind: str  # "class", "def", "const", "def"/"property"/"staticmethod"/"classmethod" for members
    params: list[Param] | None = None
    members: dict[str, "Entry"] = dataclasses.field(default_factory=dict)


def _split_top(text: str) -> list[str]:
    """Splits ``text`` on commas that are not nested in brackets or quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _balanced(text: str, start: int) -> int:
    """Index just after the bracket group opening at ``text[start]``."""
    depth, quote = 0, None
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(f"unbalanced: {text!r}")


def parse_params(sig: str) -> list[Param]:
    params, kw_only = [], False
    for part in _split_top(sig):
        if part == "/":
            continue
        if part == "*":
            kw_only = True
            continue
        name = re.split(r"[:=]", part, maxsplit=1)[0].strip()
        if name.startswith("**"):
            params.append(Param(name[2:], "varkw", False))
        elif name.startswith("*"):
            params.append(Param(name[1:], "var", False))
            kw_only = True
        else:
            params.append(Param(name, "kw" if kw_only else "pos", "=" in part))
    return params


def _signature_after(line: str, after: int) -> list[Param] | None:
    """Parses the parameter group that starts at or after ``after`` (the last group for classes)."""
    i = line.find("(", after)
    if i < 0:
        return None
    end = _balanced(line, i)
    return parse_params(line[i + 1 : end - 1])


def load(module: str) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    current: Entry | None = None
    for line in (DATA / f"{module}.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = _HEAD.match(line)
        if m:
            kind, name = m.groups()
            if kind == "class":
                bases_start = line.find("(", m.end())
                bases_end = _balanced(line, bases_start) if bases_start == m.end() else m.end()
                params = _signature_after(line, bases_end)
            else:
                params = _signature_after(line, m.end())
            current = entries[name] = Entry(name, kind, params)
            continue
        m = _MEMBER.match(line)
        if m and current is not None:
            kind, name = m.groups()
            params = None if kind == "property" else _signature_after(line, m.end())
            current.members[name] = Entry(name, kind, params)
            continue
        m = _CONST.match(line)
        if m:
            current = entries[m.group(1)] = Entry(m.group(1), "const")
    return entries
