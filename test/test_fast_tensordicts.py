"""The fast TensorDict helpers of ``torchrl._fast`` agree with tensordict's public API on every route."""
import pickle

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from torchrl._fast import any_true, fast_get, fast_set, new_td, set_fast_paths, shallow_dict


def _nested():
    return TensorDict(
        {"a": torch.arange(6.0).view(3, 2), "sub": TensorDict({"b": torch.ones(3, 4), "c": torch.zeros(3, 4, 2)}, [3, 4])},
        [3],
    )


@pytest.mark.parametrize("key", ["a", ("a",), ("sub", "b"), ("sub", "c"), "missing", ("sub", "missing"), ("nope", "b")])
def test_fast_get_matches_public_get(key):
    td = _nested()
    expected = td.get(key, None)
    got = fast_get(td, key)
    if expected is None:
        assert got is None
        assert fast_get(td, key, "default") == "default"
    else:
        assert got is expected


def test_fast_get_on_lazy_stack_takes_the_public_route():
    lazy = LazyStackedTensorDict.lazy_stack([_nested(), _nested()], 0)
    torch.testing.assert_close(fast_get(lazy, ("sub", "b")), lazy.get(("sub", "b")))
    assert fast_get(lazy, "missing", None) is None


def test_fast_set_matches_public_set():
    td, ref = _nested(), _nested()
    value = torch.full((3, 5), 2.0)
    fast_set(td, "new", value)
    ref.set("new", value)
    fast_set(td, ("sub", "b"), torch.full((3, 4), 7.0))
    ref.set(("sub", "b"), torch.full((3, 4), 7.0))
    assert (td == ref).all()
    assert td.get("new") is value


def test_fast_set_respects_locks_and_consolidation():
    locked = _nested().lock_()
    with pytest.raises(RuntimeError, match="locked"):
        fast_set(locked, "new", torch.zeros(3))
    assert "new" not in locked.keys()
    locked.unlock_()
    fast_set(locked, "new", torch.zeros(3))  # unlocked again: the direct route
    assert "new" in locked.keys()
    # an unpickled consolidated copy is unlocked but still consolidated: tensordict's own route marks it stale
    consolidated = pickle.loads(pickle.dumps(_nested().consolidate()))
    assert "_consolidated" in consolidated.__dict__ and not consolidated.is_locked
    value = torch.full((3, 2), 5.0)
    fast_set(consolidated, "a", value)
    assert consolidated.get("a") is value
    assert (pickle.loads(pickle.dumps(consolidated))["a"] == 5.0).all()


def test_new_td_and_shallow_dict():
    source = {"x": torch.zeros(2, 3)}
    td = new_td(source, torch.Size([2]))
    assert td.batch_size == (2,) and td.get("x") is source["x"]
    with set_fast_paths(True):
        copy = shallow_dict(td)
    copy["y"] = torch.ones(2)
    assert "y" not in td.keys()
    assert shallow_dict(LazyStackedTensorDict.lazy_stack([td, td])) is None
    with set_fast_paths(False):  # the general route: no entry dict to copy
        assert shallow_dict(td) is None


def test_new_td_convert_dicts():
    sub = TensorDict({"b": torch.ones(2)}, [2])
    source = {"x": torch.zeros(2, 3), "sub": sub}
    flat = new_td(source, torch.Size([2]), convert_dicts=False)
    assert flat.get("sub") is sub and flat.get("x") is source["x"] and flat.batch_size == (2,)
    source["y"] = torch.ones(2)  # the TensorDict holds its own entry dict
    assert "y" not in flat.keys()
    converted = new_td({"d": {"z": torch.ones(2)}}, torch.Size([2]))  # the default turns plain dicts into TensorDicts
    assert isinstance(converted.get("d"), TensorDict) and converted.get(("d", "z")).shape == (2,)


def test_any_true():
    assert any_true(torch.tensor([True])) and not any_true(torch.tensor([False]))
    assert any_true(torch.tensor([False, True])) and not any_true(torch.zeros(3, dtype=torch.bool))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(256, 1, dtype=torch.bool),
        lambda: torch.zeros(256, 1, dtype=torch.bool).index_fill_(0, torch.tensor([255]), True),
        lambda: torch.zeros(0, dtype=torch.bool),
        lambda: torch.eye(4, dtype=torch.bool)[:, 0],  # non-contiguous, one True
        lambda: torch.eye(4, dtype=torch.bool)[1:, 0],  # non-contiguous, all False
        lambda: torch.tensor([0, 2], dtype=torch.uint8).view(torch.bool),  # a non-canonical True byte
        lambda: torch.tensor([0.0, 0.5]),  # not bool: the torch route
        lambda: torch.zeros(7, 3, dtype=torch.bool),
    ],
)
def test_any_true_matches_torch_any(make):
    t = make()
    assert any_true(t) is bool(t.any())
    assert any_true(t) is bool(t.any())  # the cached zero bytes give the same answer again
