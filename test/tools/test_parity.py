"""Parity with TorchRL 0.14.1: every recorded scenario of ``tools/parity`` gives TorchRL's result here.

The scenarios are run under this interpreter (each file once, in a fresh process) and compared with the
results TorchRL gave when they were recorded (``tools/parity/recorded/``). A difference fails, unless the
scenario is listed in ``tools/parity/deliberate.json`` (a deliberate difference, documented in
``docs/COMPATIBILITY.md``) or ``tools/parity/pending.json`` (a known difference not fixed yet: strict xfail,
so a fix that makes it agree fails until it is removed from the list).
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

PARITY = Path(__file__).resolve().parents[2] / "tools" / "parity"
sys.path.insert(0, str(PARITY))

from _compare import differences  # noqa: E402
from run import run_file  # noqa: E402


def _load(name: str) -> dict:
    path = PARITY / name
    return json.loads(path.read_text()) if path.exists() else {}


DELIBERATE = _load("deliberate.json")
PENDING = _load("pending.json")
RECORDED = {p.stem: json.loads(p.read_text()) for p in sorted((PARITY / "recorded").glob("*.json"))}
CASES = [(stem, name) for stem, rec in RECORDED.items() for name in rec["results"]]


@functools.lru_cache(maxsize=None)
def _ours(stem: str) -> dict:
    return run_file(sys.executable, PARITY / "scenarios" / f"{stem}.py", [])["results"]


def test_every_scenario_file_is_recorded():
    files = {p.stem for p in (PARITY / "scenarios").glob("*.py")}
    assert files == set(RECORDED), f"record these with tools/parity/run.py --record: {sorted(files - set(RECORDED))}"
    for tag in list(DELIBERATE) + list(PENDING):
        stem, _, name = tag.partition(".py::")
        assert name in RECORDED.get(stem, {}).get("results", {}), f"{tag} is listed but not recorded"


@pytest.mark.parametrize("stem,name", CASES, ids=[f"{s}::{n}" for s, n in CASES])
def test_scenario_matches_torchrl(stem, name):
    tag = f"{stem}.py::{name}"
    if tag in DELIBERATE:
        pytest.skip(f"deliberate difference: {DELIBERATE[tag]}")
    got = _ours(stem).get(name, {"raises": "<missing>", "mro": [], "message": "scenario not run"})
    diffs = differences(got, RECORDED[stem]["results"][name])
    if tag in PENDING:
        if diffs:
            pytest.xfail(f"known difference, not fixed yet: {PENDING[tag]}")
        pytest.fail(f"{tag} now agrees with TorchRL: remove it from tools/parity/pending.json")
    assert not diffs, "\n".join(diffs)
