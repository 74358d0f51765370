"""Only ``torchrl/_fast/`` touches tensordict internals (issue 18): everything else uses its accessors."""
from __future__ import annotations

import re
from pathlib import Path

import torchrl

PACKAGE = Path(torchrl.__file__).parent

# tensordict's private attributes and constructors, as read or called from our code
INTERNALS = re.compile(
    r"\._tensordict\b"  # the entry dict of a TensorDict
    r"|\b_new_unsafe\b"  # the unvalidated constructor
    r"|\._(?:set|get)_(?:str|tuple)\b"  # the validated-once setters and getters
    r"|\b_is_locked\b"  # the lock flag
    r"|[\"']_consolidated[\"']"  # the consolidated-storage marker
    r"|\bfrom tensordict(?:\.\w+)* import [^\n]*\b_[a-z]\w*\s*(?:,|$)"  # private names imported
    r"|\bfrom tensordict\._|\bimport tensordict\._"  # private modules
)


def offenders() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("torchrl/_fast/"):
            continue
        hits = [
            f"{rel}:{n}: {line.strip()}"
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if INTERNALS.search(line)
        ]
        if hits:
            out[rel] = hits
    return out


def test_tensordict_internals_only_in_fast():
    found = offenders()
    assert not found, "tensordict internals outside torchrl/_fast/ (use its accessors):\n" + "\n".join(
        hit for hits in found.values() for hit in hits
    )


def test_the_lint_sees_each_form(tmp_path):
    for line in (
        "x = td._tensordict",
        "TensorDict._new_unsafe(src, batch_size=b)",
        "td._set_str('a', v, inplace=False, validated=True)",
        "td.__dict__.get('_is_locked')",
        "'_consolidated' in d",
        "from tensordict.utils import _unravel_key_to_tuple",
        "from tensordict._td import TensorDict",
    ):
        assert INTERNALS.search(line), line
    for line in ("self._tensordicts = []", "from tensordict import TensorDict, unravel_key", "td.is_locked"):
        assert not INTERNALS.search(line), line
