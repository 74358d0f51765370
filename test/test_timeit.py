"""``torchrl._utils._timeit.timeit``: registry layout, print format, erase semantics (as TorchRL 0.14.1's)."""
from __future__ import annotations

import logging

import pytest

from torchrl._utils._timeit import timeit


@pytest.fixture(autouse=True)
def _clean_registry():
    timeit._REG.clear()
    timeit._MARKS.clear()
    yield
    timeit._REG.clear()


def test_context_manager_and_decorator_accumulate():
    timeit._record("a", 0.5)
    timeit._record("a", 1.5)
    assert timeit._REG["a"] == [1.0, 2.0, 2]  # [per call, total, calls]

    @timeit("f")
    def f(x):
        return x + 1

    assert f(1) == 2 and f.__name__ == "f"
    with timeit("ctx") as t:
        assert isinstance(t, timeit)
    assert timeit._REG["f"][2] == 1 and timeit._REG["ctx"][2] == 1
    assert timeit.todict() == {"a": 1.0, "f": timeit._REG["f"][0], "ctx": timeit._REG["ctx"][0]}


def test_todict_percall_and_prefix():
    timeit._record("a", 0.5)
    timeit._record("a", 1.5)
    assert timeit.todict() == {"a": 1.0}
    assert timeit.todict(percall=False) == {"a": 2.0}
    assert timeit.todict(prefix="pp") == {"pp/a": 1.0}


def test_print_format_and_return(caplog):
    timeit._record("a", 0.0101435)
    timeit._record("b", 0.02)
    with caplog.at_level(logging.INFO, logger="torchrl"):
        text = timeit.print()
    assert text == (
        "a took 10.1435 msec (total =  0.0101 sec since last reset).\n"
        "b took 20.0000 msec (total =  0.0200 sec since last reset)."
    )
    assert timeit.print(prefix="PX").splitlines()[0].startswith("PX -- a took 10.1435 msec")


def test_erase_zeroes_but_keeps_names():
    timeit._record("a", 1.0)
    timeit.erase()
    assert timeit._REG == {"a": [0.0, 0.0, 0]}
    assert timeit.todict() == {"a": 0.0}
    timeit._record("a", 3.0)
    assert timeit._REG["a"] == [3.0, 3.0, 1]
    timeit.reset()
    assert timeit.todict(percall=False) == {"a": 0.0}


def test_printevery_prints_num_prints_times(caplog):
    timeit._record("x", 0.001)
    start = timeit._printevery_count
    with caplog.at_level(logging.INFO, logger="torchrl"):
        for _ in range(10):
            timeit.printevery(2, 10)
    assert timeit._printevery_count == start + 10
    assert sum("x took" in r.getMessage() for r in caplog.records) == 2


def test_marks_and_errors():
    timeit.mark_start("m")
    timeit.mark_end("m")
    assert timeit._REG["m"][2] == 1
    with pytest.raises(KeyError, match="without a matching timeit.mark_start"):
        timeit.mark_end("zz")
    with pytest.raises(AttributeError, match="called before start"):
        timeit("y").elapsed()
    t = timeit("y").start()
    assert t.elapsed() >= 0.0
