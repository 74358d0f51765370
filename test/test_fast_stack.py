"""The one stacker, :func:`torchrl._fast.stack_tds`, agrees with ``torch.stack`` on every route (fast, general,
into a preallocated ``out``) and with the fast paths on or off."""
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from torchrl._fast import set_fast_paths, stack_tds


def _nested():
    return TensorDict(
        {"a": torch.arange(6.0).view(3, 2), "sub": TensorDict({"b": torch.ones(3, 4), "c": torch.zeros(3, 4, 2)}, [3, 4])},
        [3],
    )


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


def _chained_steps(n: int, resets=()) -> list:
    """A rollout's steps: root entries are the previous step's "next" ones, except after a reset."""
    steps, obs = [], torch.randn(3, 2)
    for t in range(n):
        if t in resets:
            obs = torch.randn(3, 2)
        chained = TensorDict({"obs": obs, "next": {"obs": obs + 1, "done": torch.zeros(3, 1, dtype=torch.bool)}}, [3])
        chained.set("action", torch.full((3,), t, dtype=torch.long))
        steps.append(chained)
        obs = chained["next", "obs"]
    return steps


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("resets", [(), (2, 5)])
def test_stack_tds_into_out(fast, dim, resets):
    steps = _chained_steps(12, resets)
    ref = torch.stack(steps, dim)
    out = ref.clone().zero_()
    out.set("extra", torch.ones(ref.batch_size))  # entries the steps lack are left alone
    leaves = {k: out.get(k) for k in ref.keys(True, True)}
    with set_fast_paths(fast):
        result = stack_tds(steps, dim, out=out)
    assert result is out
    assert (out.exclude("extra") == ref).all() and bool(out["extra"].all())
    assert all(out.get(k) is v for k, v in leaves.items())  # written in place: the same tensors


@pytest.mark.parametrize("fast", [True, False])
def test_stack_tds_out_that_does_not_fit_raises(fast):
    steps = _chained_steps(4)
    with set_fast_paths(fast):
        with pytest.raises(RuntimeError):
            stack_tds(steps, 1, out=torch.stack(steps, 1)[:, :3].clone())  # another batch size
        with pytest.raises(KeyError):
            stack_tds(steps, 1, out=torch.stack(steps, 1).exclude("action"))  # an entry missing
        wrong = torch.stack(steps, 1)
        wrong.set("action", wrong["action"].float())  # another dtype: written through the general route
        assert stack_tds(steps, 1, out=wrong) is wrong and torch.equal(wrong["action"], torch.stack(steps, 1)["action"].float())


@pytest.mark.parametrize("dim", [0, 1])
def test_stack_tds_same_result_with_fast_paths_off(dim):
    steps = _chained_steps(16, (1, 9))
    fast = stack_tds(steps, dim)
    with set_fast_paths(False):
        general = stack_tds(steps, dim)
    assert type(fast) is type(general) and fast.batch_size == general.batch_size and (fast == general).all()
