"""The fast TensorDict helpers of ``torchrl._fast`` agree with tensordict's public API on every route."""
import pickle

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from torchrl._fast import any_true, fast_get, fast_set, new_td, shallow_dict, stack_tds


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
    copy = shallow_dict(td)
    copy["y"] = torch.ones(2)
    assert "y" not in td.keys()
    assert shallow_dict(LazyStackedTensorDict.lazy_stack([td, td])) is None


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


@pytest.mark.parametrize("dim", [0, 1])
def test_stack_tds_matches_torch_stack(dim):
    tds = [_nested().apply(lambda t: t + i) for i in range(4)]
    shared = torch.randn(3, 2)
    for td in tds:
        td.set("shared", shared)  # the very same tensor in every element: expanded then copied once
    ours, ref = stack_tds(tds, dim), torch.stack(tds, dim)
    assert ours.batch_size == ref.batch_size and ours["sub"].batch_size == ref["sub"].batch_size
    assert (ours == ref).all()
    ours.get("shared")[0].zero_()  # a real copy, not a view of the shared input
    assert shared.abs().sum() > 0


def test_stack_tds_falls_back_on_mismatched_structures():
    # as TorchRL's rollouts: elements whose keys or leaf shapes differ are stacked lazily
    a, b = _nested(), _nested()
    b.set("extra", torch.zeros(3))
    out = stack_tds([a, b], 0)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (2, *a.batch_size)
    assert "extra" not in out[0].keys() and torch.equal(out[1]["extra"], b["extra"])
    c = _nested()
    leaf = next(k for k, v in c.items() if isinstance(v, torch.Tensor))
    c.set(leaf, torch.zeros(*c.batch_size, 7))  # same keys, another leaf shape
    out = stack_tds([a, c], 0)
    assert isinstance(out, LazyStackedTensorDict) and out[1][leaf].shape[-1] == 7


def test_stack_tds_keys_in_another_order_and_leaf_type_mismatch():
    a = _nested()
    b = TensorDict({k: a.get(k) + 1 for k in reversed(list(a.keys()))}, a.batch_size)  # same keys, other order
    assert list(b.keys()) != list(a.keys())
    ours, ref = stack_tds([a, b, a], 0), torch.stack([a, b, a], 0)
    assert list(ours.keys(True, True)) == list(ref.keys(True, True)) and (ours == ref).all()
    c = a.clone()
    leaf = next(k for k, v in a.items() if isinstance(v, torch.Tensor))
    c.set(leaf, TensorDict({"x": torch.zeros(a.batch_size)}, a.batch_size))  # a TensorDict where a has a tensor
    ours, ref = stack_tds([a, c], 0), LazyStackedTensorDict.maybe_dense_stack([a, c], 0)
    assert type(ours) is type(ref) is LazyStackedTensorDict  # the fallback: tensordict's own (lazy) stack
    assert torch.equal(ours[1][leaf, "x"], c[leaf, "x"]) and torch.equal(ours[0][leaf], a[leaf])


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("resets", [(), (1, 9)])
def test_stack_tds_shifted_leaves_match_torch_stack(dim, resets):
    # a rollout's root entries are the previous step's "next" entries (the same tensors), except after a
    # reset: stacked as [first root value, *stacked next values but the last] with the resets written over
    steps, obs = [], torch.randn(3, 2)
    for t in range(16):
        if t in resets:
            obs = torch.randn(3, 2)  # a fresh observation: not the previous "next" one
        nxt_obs = obs + 1
        chained = TensorDict({"obs": obs, "next": {"obs": nxt_obs}}, [3])
        chained.set("a", torch.full((3,), float(t)))
        chained.set("b", chained.get("a"))  # a second list starting with the same tensor objects
        steps.append(chained)
        obs = nxt_obs
    steps[3].set("b", torch.zeros(3))  # "b" diverges from "a": must not be taken for a shifted copy
    ours, ref = stack_tds(steps, dim), torch.stack(steps, dim)
    assert (ours == ref).all()
    assert ours["obs"].is_contiguous()
    ours["obs"].zero_()  # its own memory, not a view of the "next" stack
    assert ours["next", "obs"].abs().sum() > 0
