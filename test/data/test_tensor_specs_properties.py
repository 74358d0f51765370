"""Property-based tests (hypothesis) over spec classes, dtypes, shapes, masks and Composite nesting."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchrl.data import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
batch_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


@st.composite
def masks(draw, shape: tuple, n: int):
    """A boolean mask of ``shape + (n,)`` with at least one True per row (or no mask)."""
    if not draw(st.booleans()):
        return None
    rows = int(torch.Size(shape).numel())
    bits = draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=rows, max_size=rows))
    mask = torch.tensor(bits, dtype=torch.bool).reshape(*shape, n)
    first = torch.zeros_like(mask)
    first[..., draw(st.integers(0, n - 1))] = True
    return mask | first


@st.composite
def bounded_specs(draw, batch):
    if draw(st.booleans()):
        dtype = draw(st.sampled_from(FLOATS))
        lo = draw(st.floats(-100, 100, width=16))
        width = draw(st.floats(0, 200, width=16))
        per_element = draw(st.booleans())
        shape = (*batch, draw(st.integers(1, 3)))
        if per_element:
            g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
            low = lo + torch.rand(shape, generator=g) * 10
            high = low + width
            return Bounded(low, high, dtype=dtype)
        return Bounded(lo, lo + width, shape=shape, dtype=dtype)
    dtype = draw(st.sampled_from(INTS))
    info = torch.iinfo(dtype)
    lo = draw(st.integers(max(info.min, -1000), min(info.max, 1000)))
    hi = draw(st.integers(lo, min(info.max, lo + 1000)))
    return Bounded(lo, hi, shape=(*batch, draw(st.integers(1, 3))), dtype=dtype)


@st.composite
def leaf_specs(draw, batch=None, min_batch=0):
    if batch is None:
        batch = tuple(draw(st.lists(st.integers(1, 3), min_size=min_batch, max_size=2)))
    kind = draw(st.sampled_from(["bounded", "unbounded", "categorical", "one_hot", "binary", "multi_cat", "multi_oh"]))
    if kind == "bounded":
        return draw(bounded_specs(batch))
    if kind == "unbounded":
        dtype = draw(st.sampled_from(FLOATS + INTS + [torch.bool]))
        return Unbounded((*batch, draw(st.integers(1, 3))), dtype=dtype)
    if kind == "categorical":
        n = draw(st.integers(1, 5))
        return Categorical(n, shape=batch, dtype=draw(st.sampled_from([torch.int64, torch.int32, torch.uint8])), mask=draw(masks(batch, n)))
    if kind == "one_hot":
        n = draw(st.integers(1, 5))
        mask = draw(masks(batch, n))
        return OneHot(n, shape=(*batch, n), dtype=draw(st.sampled_from([torch.bool, torch.int64, torch.float32])), mask=mask)
    if kind == "binary":
        n = draw(st.integers(1, 4))
        return Binary(n, shape=(*batch, n))
    nvec = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    if kind == "multi_cat":
        mask = draw(masks(batch, sum(nvec))) if len(nvec) == 1 else None
        return MultiCategorical(nvec, shape=(*batch, len(nvec)), mask=mask, remove_singleton=False)
    return MultiOneHot(nvec, shape=(*batch, sum(nvec)))


@st.composite
def composites(draw, depth=2):
    batch = draw(batch_shapes)
    spec = Composite(shape=batch)
    for i in range(draw(st.integers(1, 3))):
        spec[f"leaf{i}"] = draw(leaf_specs(batch=(*batch, *draw(st.lists(st.integers(1, 2), max_size=1)))))
    if depth and draw(st.booleans()):
        spec["nested", "deeper", "x"] = draw(leaf_specs(batch=batch))
        spec["nested", "y"] = draw(leaf_specs(batch=batch))
    return spec


def _seed(seed: int) -> None:
    torch.manual_seed(seed)


SEEDS = st.integers(0, 2**16)


# ---------------------------------------------------------------- leaves
@SETTINGS
@given(spec=leaf_specs(), seed=SEEDS, lead=st.lists(st.integers(1, 3), max_size=2))
def test_rand_is_in(spec, seed, lead):
    _seed(seed)
    assert spec.is_in(spec.rand())
    x = spec.rand(lead)
    assert x.shape == (*lead, *spec.shape) and spec.is_in(x)


@SETTINGS
@given(spec=leaf_specs(), seed=SEEDS)
def test_project_is_in(spec, seed):
    _seed(seed)
    raw = torch.randn(spec.shape) * 300
    assert spec.is_in(spec.project(raw))
    assert spec.is_in(spec.project(raw.to(torch.float64)))


@SETTINGS
@given(spec=leaf_specs(), seed=SEEDS)
def test_encode_to_numpy_round_trip(spec, seed):
    _seed(seed)
    if spec.dtype == torch.bfloat16:  # numpy has no bfloat16
        return
    x = spec.rand()
    back = spec.encode(spec.to_numpy(x))
    assert back.dtype == x.dtype and torch.equal(back, x)


def _zero_in_space(spec) -> bool:
    if isinstance(spec, (OneHot, MultiOneHot)):
        return False
    if isinstance(spec, Bounded):
        return bool((spec.low <= 0).all()) and bool((spec.high >= 0).all())
    mask = getattr(spec, "mask", None)  # (Multi)Categorical masks: category 0 is the first column
    return mask is None or bool(mask[..., 0].all())


@SETTINGS
@given(spec=leaf_specs())
def test_zero_in_space(spec):
    zero = spec.zero()
    assert not zero.any()
    assert spec.is_in(zero) == _zero_in_space(spec)


@SETTINGS
@given(spec=leaf_specs())
def test_clone_equals(spec):
    clone = spec.clone()
    assert clone == spec and clone is not spec
    assert spec.to(spec.device) == spec


@SETTINGS
@given(spec=leaf_specs(), seed=SEEDS, k=st.integers(1, 3))
def test_expand_agrees_with_tensors(spec, seed, k):
    _seed(seed)
    expanded = spec.expand(k, *spec.shape)
    assert expanded.shape == (k, *spec.shape)
    assert expanded.is_in(spec.rand((k,)))
    assert expanded.is_in(expanded.rand())
    assert all(part == spec for part in expanded.unbind(0))


@SETTINGS
@given(spec=leaf_specs(min_batch=1), seed=SEEDS, data=st.data())
def test_unbind_index_agree_with_tensors(spec, seed, data):
    _seed(seed)
    x = spec.rand()
    parts = spec.unbind(0)
    assert len(parts) == x.shape[0]
    for i, part in enumerate(parts):
        assert part.shape == x[i].shape and part.is_in(x[i])
    i = data.draw(st.integers(0, spec.shape[0] - 1))
    idx = data.draw(st.sampled_from([i, slice(0, i + 1), [i], (Ellipsis,)]))
    if idx == (Ellipsis,) and spec._feature_ndim:
        idx = slice(None)
    assert spec[idx].shape == x[idx].shape and spec[idx].is_in(x[idx])


# ---------------------------------------------------------------- composites
@SETTINGS
@given(spec=composites(), seed=SEEDS, lead=st.lists(st.integers(1, 2), max_size=1))
def test_composite_rand_is_in(spec, seed, lead):
    _seed(seed)
    td = spec.rand(lead)
    assert td.batch_size == (*lead, *spec.shape)
    assert spec.is_in(td)
    assert set(td.keys(True, True)) == set(spec.keys(True, True))


@SETTINGS
@given(spec=composites(), seed=SEEDS)
def test_composite_project_and_round_trip(spec, seed):
    _seed(seed)
    td = spec.rand()
    noisy = td.apply(lambda t: t.to(torch.float32) * 50 - 3)
    assert spec.is_in(spec.project(noisy))
    if any(v.dtype == torch.bfloat16 for v in spec.values(True, True)):
        return
    back = spec.encode(spec.to_numpy(td))
    assert (back == td).all()


@SETTINGS
@given(spec=composites(), seed=SEEDS, k=st.integers(1, 3))
def test_composite_clone_expand_unbind(spec, seed, k):
    _seed(seed)
    assert spec.clone() == spec
    expanded = spec.expand(k, *spec.shape)
    td = expanded.rand()
    assert td.batch_size == (k, *spec.shape) and expanded.is_in(td)
    for part, sub in zip(expanded.unbind(0), td.unbind(0)):
        assert part == spec and part.is_in(sub)
    for i in range(k):
        assert expanded[i] == spec and expanded[i].is_in(td[i])


@SETTINGS
@given(spec=composites(), seed=SEEDS)
def test_composite_zero_in_when_leaves_contain_zero(spec, seed):
    zero = spec.zero()
    expected = all(_zero_in_space(leaf) for leaf in spec.values(True, True))
    assert spec.is_in(zero) == expected


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_dtypes_extreme_bounds(dtype):
    big = torch.finfo(dtype).max
    spec = Bounded(-big, big, shape=(64,), dtype=dtype)
    for _ in range(5):
        assert spec.is_in(spec.rand())


@SETTINGS
@given(spec=leaf_specs(), seed=SEEDS, data=st.data())
def test_unsqueeze_squeeze_round_trip(spec, seed, data):
    # a new singleton dim anywhere before the event dims, then squeezed away: the same spec, and values follow
    _seed(seed)
    dim = data.draw(st.integers(0, max(len(spec.shape) - 1, 0)))
    up = spec.unsqueeze(dim)
    assert up.shape == spec.shape[:dim] + (1,) + spec.shape[dim:]
    value = up.rand()
    assert value.shape == up.shape and spec.is_in(value.squeeze(dim))
    back = up.squeeze(dim)
    assert back == spec


@SETTINGS
@given(spec=composites(), seed=SEEDS)
def test_composite_unsqueeze_squeeze_round_trip(spec, seed):
    _seed(seed)
    up = spec.unsqueeze(0)
    assert up.shape == (1, *spec.shape)
    assert spec.is_in(up.rand().squeeze(0))
    assert up.squeeze(0) == spec


@SETTINGS
@given(spec=leaf_specs(min_batch=1), seed=SEEDS, data=st.data())
def test_index_agrees_with_values(spec, seed, data):
    # indexing a batched spec then drawing equals drawing then indexing, in shape and membership
    _seed(seed)
    i = data.draw(st.integers(-spec.shape[0], spec.shape[0] - 1))
    part = spec[i]
    assert part.shape == spec.shape[1:]
    assert part.is_in(spec.rand()[i]) and spec.rand()[i].shape == part.rand().shape
