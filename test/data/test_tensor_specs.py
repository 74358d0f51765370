"""Leaf specs: construction, sampling, membership, encoding, shape ops, masks, errors, deprecated names."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from torchrl.data import tensor_specs as ts
from torchrl.data.tensor_specs import (
    Binary,
    BinaryBox,
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    BoxList,
    Categorical,
    CategoricalBox,
    ContinuousBox,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)


def all_leaves():
    """One spec of every leaf class, all with batch shape (4,) in front of their feature dims."""
    return {
        "bounded": Bounded(-1.0, 1.0, shape=(4, 3)),
        "bounded_int": Bounded(0, 5, shape=(4, 3), dtype=torch.int32),
        "unbounded": Unbounded((4, 3)),
        "unbounded_int": Unbounded((4, 3), dtype=torch.int64),
        "unbounded_bool": Unbounded((4, 3), dtype=torch.bool),
        "categorical": Categorical(5, shape=(4, 3)),
        "one_hot": OneHot(3, shape=(4, 3)),
        "binary": Binary(shape=(4, 3)),
        "multi_categorical": MultiCategorical([2, 3, 4], shape=(4, 3)),
        "multi_one_hot": MultiOneHot([1, 2], shape=(4, 3)),
    }


LEAVES = sorted(all_leaves())


@pytest.fixture(params=LEAVES)
def leaf(request):
    return all_leaves()[request.param]


# ---------------------------------------------------------------- classes and dispatch
class TestConstruction:
    def test_bounded_dispatches_on_dtype(self):
        assert type(Bounded(-1.0, 1.0, shape=(2,))) is BoundedContinuous
        assert type(Bounded(0, 3, shape=(2,), dtype=torch.int64)) is BoundedDiscrete
        assert type(Bounded(0, 3, shape=(2,), domain="discrete")) is BoundedDiscrete
        assert isinstance(Bounded(0.0, 1.0, shape=()), Bounded)

    def test_bounded_direct_subclass_defaults(self):
        # TorchRL: the dtype defaults to the default dtype whatever the class; a dtype picks the class again
        assert BoundedDiscrete(0, 3, shape=(2,)).dtype == torch.float32
        assert type(BoundedDiscrete(0, 3, shape=(2,))) is BoundedDiscrete
        assert BoundedContinuous(0, 3, shape=(2,)).dtype == torch.float32
        assert type(BoundedContinuous(0, 3, shape=(2,), dtype=torch.int64)) is BoundedContinuous  # keeps its class
        assert type(Bounded(0, 3, shape=(2,), dtype=torch.int64, domain="continuous")) is BoundedContinuous

    def test_bounded_needs_shape_for_scalar_bounds(self):
        with pytest.raises(RuntimeError, match="pass `shape` when both bounds are scalars"):
            Bounded(-1.0, 1.0)
        assert Bounded(torch.zeros(2), 1.0).shape == (2,)

    def test_bounded_bounds_are_independent(self):
        spec = Bounded(-1.0, 1.0, shape=(3,))
        spec.space.low[0] = -2.0  # writes one bound only (the bounds are not an expanded view)
        assert spec.low.tolist() == [-2.0, -1.0, -1.0]

    def test_unbounded_domain_picks_class(self):
        spec = Unbounded(3, domain="discrete")
        assert type(spec) is UnboundedDiscrete and spec.dtype == torch.float32 and spec.domain == "discrete"
        assert type(UnboundedContinuous(3, dtype=torch.int64)) is UnboundedDiscrete
        assert type(Unbounded(2).to(torch.int64)) is UnboundedDiscrete
        assert Unbounded(2).to(torch.float64).space.low[0].item() == torch.finfo(torch.float64).min

    def test_unbounded_dispatches_on_dtype(self):
        assert type(Unbounded(3)) is UnboundedContinuous
        assert type(Unbounded((2,), dtype=torch.int32)) is UnboundedDiscrete
        assert type(Unbounded((2,), dtype=torch.bool)) is UnboundedDiscrete
        assert UnboundedDiscrete((2,)).dtype == torch.int64

    def test_unbounded_int_shape_and_default(self):
        assert Unbounded(3).shape == torch.Size([3])
        assert Unbounded().shape == torch.Size([1])
        assert Unbounded(shape=torch.Size([2, 5])).shape == (2, 5)

    def test_default_dtypes(self):
        assert Categorical(3).dtype == torch.int64
        assert OneHot(3).dtype == torch.bool
        assert Binary(3).dtype == torch.int8
        assert MultiCategorical([2, 3]).dtype == torch.int64
        assert MultiOneHot([2, 3]).dtype == torch.bool
        assert Unbounded(1).dtype == torch.get_default_dtype()

    def test_default_shapes(self):
        assert Categorical(4).shape == ()
        assert OneHot(4).shape == (4,)
        assert Binary(4).shape == (4,)
        assert MultiCategorical([2, 3]).shape == (2,)
        assert MultiOneHot([2, 3]).shape == (5,)
        assert NonTensor().shape == (1,)

    def test_domain_and_space(self):
        b = Bounded(-1.0, 1.0, shape=(2,))
        assert b.domain == "continuous" and isinstance(b.space, ContinuousBox)
        assert Categorical(3).domain == "discrete" and isinstance(Categorical(3).space, CategoricalBox)
        assert isinstance(Binary(3).space, CategoricalBox) and Binary(3).n == 2  # a two-category Categorical
        assert isinstance(MultiOneHot([2, 3]).space, BoxList)
        assert [box.n for box in MultiCategorical([2, 3]).space] == [2, 3]

    def test_bounded_from_tensors(self):
        spec = Bounded(low=torch.zeros(3), high=torch.tensor([1.0, 2.0, 3.0]))
        assert spec.shape == (3,)
        assert torch.equal(spec.high, torch.tensor([1.0, 2.0, 3.0]))
        low, high = spec.space
        assert torch.equal(low, torch.zeros(3))

    def test_dtype_as_string(self):
        assert Bounded(0, 1, shape=(1,), dtype="float64").dtype == torch.float64
        assert Categorical(3, dtype="torch.int32").dtype == torch.int32

    def test_leaf_has_device(self, leaf):
        assert leaf.device == torch.device("cpu")

    def test_spec_is_tensorspec(self, leaf):
        assert isinstance(leaf, TensorSpec)


# ---------------------------------------------------------------- errors at construction
class TestConstructionErrors:
    def test_low_greater_than_high(self):
        with pytest.raises(ValueError, match=r"low must be <= high.*index \(1,\) low=2.0 > high=1.0"):
            Bounded(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 1.0]))

    def test_bounds_do_not_broadcast(self):
        with pytest.raises(ValueError, match=r"low \(shape \(3,\)\) and high \(shape \(3,\)\) do not broadcast"):
            Bounded(torch.zeros(3), torch.ones(3), shape=(4,))

    def test_bounded_needs_both(self):
        with pytest.raises(TypeError, match="requires both"):
            Bounded(low=0.0)

    def test_other_domain_is_discrete(self):
        spec = Bounded(0, 1, shape=(1,), domain="fuzzy")
        assert type(spec) is BoundedDiscrete and spec.domain == "fuzzy" and spec.dtype == torch.float32

    def test_one_hot_shape_must_end_with_n(self):
        with pytest.raises(ValueError, match=r"last dim of shape \(4, 2\) must equal n=3"):
            OneHot(3, shape=(4, 2))

    def test_binary_shape_must_end_with_n(self):
        with pytest.raises(ValueError, match="must equal n=3"):
            Binary(3, shape=(2,))

    def test_multi_categorical_shape(self):
        with pytest.raises(ValueError, match="must be nvec's shape"):
            MultiCategorical([2, 3], shape=(4, 3))
        with pytest.raises(ValueError, match="must be positive"):
            MultiCategorical([2, 0])

    def test_multi_one_hot_shape(self):
        with pytest.raises(ValueError, match=r"sum\(nvec\)=5"):
            MultiOneHot([2, 3], shape=(4,))

    def test_bad_mask(self):
        assert Categorical(3, mask=torch.tensor([1, 0, 1])).mask.tolist() == [True, False, True]
        with pytest.raises(RuntimeError, match=r"mask of shape \(4,\) does not broadcast to \(3,\)"):
            Categorical(3, mask=torch.ones(4, dtype=torch.bool))

    def test_unknown_kwarg(self):
        with pytest.raises(TypeError, match="unexpected keyword"):
            Unbounded(3, colour="red")
        with pytest.raises(TypeError, match="unexpected keyword"):
            Bounded(0.0, 1.0, shape=(1,), colour="red")

    def test_unknown_dtype(self):
        with pytest.raises(ValueError, match="unknown dtype"):
            Unbounded(3, dtype="nope")


# ---------------------------------------------------------------- sampling and membership
class TestSampling:
    def test_rand_is_in(self, leaf):
        for _ in range(5):
            assert leaf.is_in(leaf.rand())

    def test_rand_with_leading_shape(self, leaf):
        x = leaf.rand((2, 5))
        assert x.shape == (2, 5, *leaf.shape)
        assert x.dtype == leaf.dtype and leaf.is_in(x)
        assert leaf.rand(2).shape == (2, *leaf.shape)

    def test_sample_alias(self, leaf):
        assert leaf.sample().shape == leaf.shape

    def test_zero_one(self, leaf):
        z, o = leaf.zero(), leaf.one((2,))
        assert z.shape == leaf.shape and z.dtype == leaf.dtype and not z.any()
        assert o.shape == (2, *leaf.shape) and bool(o.all())
        assert torch.equal(leaf.zeros(), z) and torch.equal(leaf.ones(), leaf.one())

    def test_bounded_rand_in_bounds(self):
        spec = Bounded(torch.tensor([0.0, 10.0]), torch.tensor([1.0, 11.0]))
        x = spec.rand((1000,))
        assert bool((x[:, 0] >= 0).all() and (x[:, 0] <= 1).all() and (x[:, 1] >= 10).all() and (x[:, 1] <= 11).all())

    def test_bounded_rand_wide_and_infinite(self):
        big = torch.finfo(torch.float32).max
        wide = Bounded(-big, big, shape=(100,))
        assert wide.is_in(wide.rand()) and torch.isfinite(wide.rand()).all()
        half = Bounded(torch.tensor([0.0, -float("inf")]), torch.tensor([float("inf"), 0.0]))
        x = half.rand((500,))
        assert half.is_in(x) and bool((x[:, 0] >= 0).all()) and bool((x[:, 1] <= 0).all())

    def test_bounded_discrete_covers_range(self):
        spec = Bounded(2, 4, shape=(1000,), dtype=torch.int64)
        assert set(spec.rand().tolist()) == {2, 3, 4}
        varied = Bounded(torch.tensor([0, 10]), torch.tensor([1, 12]), dtype=torch.int64)
        x = varied.rand((2000,))
        assert set(x[:, 0].tolist()) == {0, 1} and set(x[:, 1].tolist()) == {10, 11, 12}

    def test_uint8_image(self):
        spec = Bounded(0, 255, shape=(3, 8, 8), dtype=torch.uint8)
        x = spec.rand()
        assert x.dtype == torch.uint8 and spec.is_in(x)

    def test_is_in_rejects_shape_dtype_values(self):
        spec = Bounded(-1.0, 1.0, shape=(3,))
        assert not spec.is_in(torch.zeros(4))
        assert not spec.is_in(torch.zeros(3, dtype=torch.float64))
        assert not spec.is_in(torch.tensor([0.0, 2.0, 0.0]))
        assert not spec.is_in(torch.tensor([0.0, float("nan"), 0.0]))
        assert spec.is_in(torch.zeros(7, 3))
        assert spec.contains(torch.zeros(3))

    def test_categorical_values(self):
        spec = Categorical(3, shape=(2,))
        assert spec.is_in(torch.tensor([0, 2]))
        assert not spec.is_in(torch.tensor([0, 3]))
        assert not spec.is_in(torch.tensor([-1, 0]))
        assert set(spec.rand((500,)).reshape(-1).tolist()) == {0, 1, 2}

    def test_one_hot_values(self):
        spec = OneHot(3)
        assert spec.is_in(torch.tensor([False, True, False]))
        assert not spec.is_in(torch.tensor([True, True, False]))
        assert not spec.is_in(torch.tensor([False, False, False]))
        assert bool((spec.rand((100,)).sum(-1) == 1).all())

    def test_binary_values(self):
        spec = Binary(3)
        assert spec.is_in(torch.tensor([0, 1, 1], dtype=torch.int8))
        assert not spec.is_in(torch.tensor([0, 2, 1], dtype=torch.int8))

    def test_multi_categorical_values(self):
        spec = MultiCategorical([3, 2, 3])
        assert spec.is_in(torch.tensor([2, 0, 1]))
        assert not spec.is_in(torch.tensor([2, 2, 1]))
        x = spec.rand((1000,))
        assert x[:, 1].max() == 1 and x[:, 0].max() == 2

    def test_multi_one_hot_values(self):
        spec = MultiOneHot([2, 3])
        assert spec.is_in(torch.tensor([True, False, False, False, True]))
        assert not spec.is_in(torch.tensor([True, True, False, False, True]))
        assert not spec.is_in(torch.tensor([True, False, False, False, False]))


class TestAssertAndTypeCheck:
    def test_assert_is_in_bounds_message(self):
        spec = Bounded(-1.0, 1.0, shape=(3,))
        with pytest.raises(AssertionError, match=r"Value 2.0 at index \(1,\) is outside \[-1.0, 1.0\]"):
            spec.assert_is_in(torch.tensor([0.0, 2.0, 0.0]))
        spec.assert_is_in(torch.zeros(3))

    def test_assert_is_in_dtype_message(self):
        with pytest.raises(AssertionError, match="dtype torch.float64, expected torch.float32"):
            Unbounded(3).assert_is_in(torch.zeros(3, dtype=torch.float64))

    def test_assert_is_in_shape_message(self):
        with pytest.raises(AssertionError, match=r"shape torch.Size\(\[2\]\), which does not end with .*\[3\]"):
            Unbounded(3).assert_is_in(torch.zeros(2))

    def test_assert_is_in_categorical(self):
        with pytest.raises(AssertionError, match=r"Value 5 at index \(\) is not in \[0, 3\)"):
            Categorical(3).assert_is_in(torch.tensor(5))

    def test_type_check(self):
        spec = Unbounded(3)
        spec.type_check(torch.zeros(3))
        with pytest.raises(TypeError, match=r"at key 'obs': value has dtype torch.int64, expected torch.float32"):
            spec.type_check(torch.zeros(3, dtype=torch.int64), "obs")


# ---------------------------------------------------------------- project / encode / to_numpy
class TestConversions:
    def test_project(self):
        spec = Bounded(-1.0, 1.0, shape=(3,))
        out = spec.project(torch.tensor([-5.0, 0.5, float("nan")]))
        assert torch.equal(out, torch.tensor([-1.0, 0.5, -1.0]))
        inside = torch.zeros(3)
        assert spec.project(inside) is inside

    def test_project_discrete(self):
        assert Categorical(3).project(torch.tensor(7)).item() == 2
        assert Bounded(0, 4, shape=(2,), dtype=torch.int64).project(torch.tensor([-3.2, 7.7])).tolist() == [0, 4]
        assert OneHot(3).project(torch.tensor([0.1, 0.7, 0.2])).tolist() == [False, True, False]
        assert MultiCategorical([2, 3]).project(torch.tensor([5, -1])).tolist() == [1, 0]
        assert Binary(2).project(torch.tensor([0.9, 0.1])).tolist() == [1, 0]

    def test_project_respects_mask(self):
        spec = Categorical(4, mask=torch.tensor([False, False, True, True]))
        assert spec.project(torch.tensor(0)).item() == 2
        oh = OneHot(3, mask=torch.tensor([True, False, True]))
        assert oh.project(torch.tensor([0.0, 1.0, 0.5])).tolist() == [False, False, True]

    def test_encode_numpy(self):
        spec = Bounded(-1.0, 1.0, shape=(3,))
        out = spec.encode(np.array([0.1, 0.2, 0.3]))
        assert out.dtype == torch.float32 and out.shape == (3,)

    def test_encode_reshapes_scalar(self):
        reward = Unbounded(1)
        assert reward.encode(1.5).shape == (1,)
        with pytest.raises(ValueError, match=r"matches neither the spec's shape torch.Size\(\[3\]\)"):
            Unbounded(3).encode([1.0, 2.0])

    def test_encode_readonly_array(self):
        arr = np.zeros(3, dtype=np.float32)
        arr.flags.writeable = False
        assert Unbounded(3).encode(arr).shape == (3,)

    def test_one_hot_encode_to_numpy_round_trip(self):
        spec = OneHot(4)
        assert spec.encode(2).tolist() == [False, False, True, False]
        assert spec.encode(np.int64(3)).tolist() == [False, False, False, True]
        assert int(spec.to_numpy(spec.encode(1))) == 1
        batch = OneHot(4, shape=(2, 4))
        x = batch.rand()
        assert torch.equal(batch.encode(batch.to_numpy(x)), x)
        with pytest.raises(AssertionError, match=r"indices must be < n=4, got 7"):
            spec.encode(7)
        with pytest.raises(RuntimeError, match=r"indices must be >= 0, got -1"):
            spec.encode(-1)

    def test_encode_shapes(self):
        spec = Bounded(-1.0, 1.0, shape=(2,))
        assert spec.encode(np.zeros((1, 2))).shape == (2,)  # same number of elements: reshaped
        with pytest.raises(RuntimeError, match=r"value has shape \(5, 2\), which matches neither"):
            spec.encode(np.zeros((5, 2)))

    def test_one_hot_register(self):
        spec = OneHot(3, use_register=True)
        a, b = spec.encode("left"), spec.encode("right")
        assert a.tolist() == [True, False, False] and b.tolist() == [False, True, False]
        assert spec.to_numpy(b) == "right"

    def test_multi_one_hot_round_trip(self):
        spec = MultiOneHot([2, 3], shape=(4, 5))
        x = spec.rand()
        assert spec.to_numpy(x).shape == (4, 2)
        assert torch.equal(spec.encode(spec.to_numpy(x)), x)

    def test_to_numpy_safe(self):
        with pytest.raises(AssertionError):
            Categorical(3).to_numpy(torch.tensor(4), safe=True)
        assert Categorical(3).to_numpy(torch.tensor(1)) == 1

    def test_categorical_one_hot_conversions(self):
        cat = Categorical(3, shape=(2,))
        oh = cat.to_one_hot_spec()
        assert isinstance(oh, OneHot) and oh.shape == (2, 3)
        x = cat.rand()
        assert torch.equal(oh.to_categorical(cat.to_one_hot(x)), x)
        assert oh.to_categorical_spec() == cat
        assert cat.to_categorical(x) is x and cat.to_categorical_spec() is cat

    def test_multi_conversions(self):
        mc = MultiCategorical([2, 3])
        mo = mc.to_one_hot_spec()
        assert isinstance(mo, MultiOneHot) and mo.shape == (5,)
        x = mc.rand()
        assert torch.equal(mo.to_categorical(mc.to_one_hot(x)), x)
        assert mo.to_categorical_spec() == mc

    def test_index(self):
        # TorchRL: gathered along the last dim, the index's last dim kept (expanded over the leading dims)
        values = torch.arange(12.0).reshape(4, 3)
        assert Categorical(3, shape=(1,)).index(torch.tensor([2]), values).tolist() == [[2.0], [5.0], [8.0], [11.0]]
        assert Categorical(3, shape=(4, 1)).index(torch.tensor([[0], [2], [1], [1]]), values).tolist() == [
            [0.0], [5.0], [7.0], [10.0]
        ]
        onehot = torch.tensor([[True, False, False, False], [False, False, False, True]])
        assert OneHot(4, shape=(2, 4)).index(onehot, torch.arange(8.0).reshape(2, 4)).tolist() == [[0.0, 3.0], [4.0, 7.0]]
        mo = MultiOneHot([1, 2])
        assert mo.index(torch.tensor([True, False, True]), torch.tensor([5.0, 6.0, 7.0])).tolist() == [5.0, 7.0]
        with pytest.raises(NotImplementedError, match="`index` is not implemented for UnboundedContinuous"):
            Unbounded(3).index(1, torch.tensor([1.0, 2.0, 3.0]))


# ---------------------------------------------------------------- masks
class TestMasks:
    def test_categorical_mask_rand_and_is_in(self):
        spec = Categorical(4)
        spec.update_mask(torch.tensor([False, True, False, True]))
        assert set(spec.rand((200,)).tolist()) == {1, 3}
        assert spec.is_in(torch.tensor(1)) and not spec.is_in(torch.tensor(0))
        spec.update_mask(None)
        assert spec.is_in(torch.tensor(0))

    def test_batched_mask(self):
        mask = torch.tensor([[True, False, False], [False, False, True]])
        spec = Categorical(3, shape=(2,), mask=mask)
        assert spec.rand().tolist() == [0, 2]
        assert spec.rand((5,)).tolist() == [[0, 2]] * 5

    def test_one_hot_mask(self):
        spec = OneHot(3, mask=torch.tensor([False, False, True]))
        assert spec.rand().tolist() == [False, False, True]
        assert not spec.is_in(torch.tensor([True, False, False]))

    def test_multi_masks(self):
        mc = MultiCategorical([2, 3], mask=torch.tensor([False, True, True, False, False]))
        assert mc.rand().tolist() == [1, 0]
        assert not mc.is_in(torch.tensor([0, 0]))
        mo = MultiOneHot([2, 3], mask=torch.tensor([True, False, False, False, True]))
        assert mo.rand().tolist() == [True, False, False, False, True]
        assert not mo.is_in(torch.tensor([False, True, False, False, True]))

    def test_empty_mask_cannot_sample(self):
        spec = Categorical(2, mask=torch.tensor([False, False]))
        with pytest.raises(ValueError, match="allows no value"):
            spec.rand()

    def test_binary_mask(self):
        spec = Binary(2)
        spec.update_mask(torch.tensor([[False, True], [True, False]]))  # per element: the two categories
        assert spec.rand().tolist() == [1, 0]
        assert spec.is_in(torch.tensor([1, 0], dtype=torch.int8)) and not spec.is_in(torch.tensor([0, 0], dtype=torch.int8))

    def test_mask_survives_shape_ops(self):
        mask = torch.tensor([[True, False, False], [False, False, True]])
        spec = Categorical(3, shape=(2,), mask=mask)
        assert spec[1].rand().item() == 2
        assert spec.expand(4, 2).rand().tolist() == [[0, 2]] * 4
        assert spec.clone() == spec
        other = Categorical(3, shape=(2,))
        assert other != spec


# ---------------------------------------------------------------- cardinality / enumerate
class TestEnumerate:
    """TorchRL's semantics: the leading dims are batch dims, each enumerated value fills all of them."""

    def test_categorical(self):
        assert Categorical(4).cardinality() == 4
        assert Categorical(4).enumerate().tolist() == [0, 1, 2, 3]
        spec = Categorical(3, shape=(2,))
        assert spec.cardinality() == 3
        assert spec.enumerate().tolist() == [[0, 0], [1, 1], [2, 2]]

    def test_categorical_mask(self):
        spec = Categorical(4, mask=torch.tensor([True, False, True, False]))
        assert spec.enumerate(use_mask=True).tolist() == [0, 2]
        assert len(spec.enumerate()) == 4 and spec.cardinality() == 4
        varying = Categorical(3, shape=(2,), mask=torch.tensor([[True, False, True], [False, True, True]]))
        with pytest.raises(IndexError, match="the mask differs from one element to another"):
            varying.enumerate(use_mask=True)

    def test_one_hot(self):
        assert OneHot(3).enumerate().int().tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        assert OneHot(3).cardinality() == 3
        batched = OneHot(3, shape=(2, 3)).enumerate()
        assert batched.shape == (3, 2, 3) and batched[1].int().tolist() == [[0, 1, 0], [0, 1, 0]]

    def test_binary_and_multi(self):
        assert Binary(2).cardinality() == 2 and Binary(2).enumerate().tolist() == [[0, 0], [1, 1]]
        mc = MultiCategorical([2, 3])
        values = mc.enumerate()
        assert mc.cardinality() == 6 and len({tuple(v) for v in values.tolist()}) == 6
        assert MultiCategorical([2, 3], shape=(4, 2)).enumerate().shape == (6, 4, 2)
        mo = MultiOneHot([2, 2])
        assert mo.cardinality() == 4 and all(mo.is_in(v) for v in mo.enumerate())
        assert MultiOneHot([2, 3], shape=(4, 5)).enumerate().shape == (6, 4, 5)

    def test_bounded_discrete(self):
        spec = Bounded(0, 2, shape=(), dtype=torch.int64)
        assert spec.cardinality() == 3 and spec.enumerate().tolist() == [0, 1, 2]
        assert Bounded(0, 2, shape=(2,), dtype=torch.int64).enumerate().tolist() == [[0, 0], [1, 1], [2, 2]]

    def test_continuous_cannot_enumerate(self):
        assert Bounded(0.0, 1.0, shape=(1,)).cardinality() == float("inf")
        with pytest.raises(NotImplementedError, match="infinitely many values"):
            Bounded(0.0, 1.0, shape=(1,)).enumerate()
        with pytest.raises(NotImplementedError, match="infinitely many values"):
            Unbounded(1).enumerate()
        with pytest.raises(NotImplementedError, match="`cardinality` is not implemented for Unbounded"):
            Unbounded(1).cardinality()

    def test_every_enumerated_value_is_in(self, leaf):
        if isinstance(leaf, Unbounded):
            return
        if leaf.cardinality() == float("inf") or leaf.cardinality() > 10_000:
            small = leaf[0][:1] if leaf._feature_ndim == 0 else leaf[0]
            if small.cardinality() == float("inf"):
                return
            leaf = small
        values = leaf.enumerate()
        assert len(values) == leaf.cardinality()
        assert all(leaf.is_in(v) for v in values)

    def test_provisional_n(self):
        spec = Categorical(-1)
        with pytest.raises(ValueError, match="set_provisional_n"):
            spec.rand()
        spec.set_provisional_n(5)
        assert spec.n == 5 and 0 <= spec.rand().item() < 5


# ---------------------------------------------------------------- shape ops
class TestShapeOps:
    def test_expand(self, leaf):
        e = leaf.expand(2, *leaf.shape)
        assert e.shape == (2, *leaf.shape) and type(e) is type(leaf)
        assert e.is_in(e.rand())
        assert leaf.expand((2, *leaf.shape)) == e == leaf.expand(torch.Size([2, *leaf.shape]))

    def test_expand_singleton_and_errors(self):
        spec = Bounded(torch.zeros(1, 3), torch.ones(1, 3))
        assert spec.expand(5, 3).shape == (5, 3)
        # TorchRL: -1 makes a dim dynamic (it does not mean "keep"); only singleton/dynamic dims may change
        dynamic = spec.expand(2, -1, 3)
        assert dynamic.shape == (2, -1, 3) and dynamic.low.shape == (2, 1, 3)
        with pytest.raises(ValueError, match="does not fit the spec's shape"):
            spec.expand(5, 4)
        with pytest.raises(ValueError, match="does not fit the spec's shape"):
            Unbounded((2, 3)).expand(4, -1, 3)
        with pytest.raises(ValueError, match="fewer dims"):
            spec.expand(3)

    def test_index_matches_tensor_index(self, leaf):
        x = leaf.rand()
        for idx in (0, slice(1, 3), [0, 2], torch.tensor([True, False, True, False]), (Ellipsis, 0) if leaf._feature_ndim == 0 else (0, Ellipsis)):
            sub = leaf[idx]
            assert sub.shape == x[idx].shape, idx
            assert sub.is_in(x[idx])

    def test_feature_dims_cannot_be_indexed(self):
        with pytest.raises(IndexError, match="feature dims"):
            OneHot(3)[0]
        with pytest.raises(ValueError, match="feature dim"):
            OneHot(3).unbind(-1)

    def test_bounded_index_keeps_bounds(self):
        spec = Bounded(torch.tensor([0.0, 10.0]), torch.tensor([1.0, 11.0]))
        assert spec[1].low.item() == 10.0 and spec[1].shape == ()

    def test_unbind(self, leaf):
        parts = leaf.unbind(0)
        assert len(parts) == 4 and all(p == leaf[i] for i, p in enumerate(parts))
        assert torch.unbind(leaf, 0) == parts

    def test_squeeze_unsqueeze(self, leaf):
        u = leaf.unsqueeze(0)
        assert u.shape == (1, *leaf.shape)
        assert u.squeeze() == leaf and u.squeeze(0) == leaf and torch.squeeze(u, 0) == leaf
        assert torch.unsqueeze(leaf, 1).shape == (4, 1, *leaf.shape[1:])
        assert leaf.squeeze(0) is leaf  # not a singleton dim

    def test_unsqueeze_cannot_split_features(self):
        with pytest.raises(ValueError, match="feature dims"):
            OneHot(3).unsqueeze(-1)
        assert Unbounded(3).unsqueeze(-1).shape == (3, 1)

    def test_reshape_view_flatten(self):
        spec = Bounded(torch.zeros(2, 3), torch.ones(2, 3))
        assert spec.reshape(3, 2).shape == (3, 2) and spec.view(-1).shape == (6,)
        assert spec.flatten(0, 1).shape == (6,)
        assert spec.reshape(6).unflatten(0, (2, 3)) == spec
        with pytest.raises(ValueError, match="cannot reshape"):
            spec.reshape(4, 2)
        oh = OneHot(3, shape=(2, 2, 3))
        assert oh.reshape(4, 3).shape == (4, 3)
        with pytest.raises(ValueError, match="cannot reshape"):
            oh.reshape(2, 6)

    def test_make_neg_dim(self):
        spec = Unbounded((4, 3))
        assert spec.make_neg_dim(0) is None  # in place, as TorchRL
        assert spec.shape == (-1, 3)
        assert spec.is_in(torch.zeros(7, 3)) and spec.rand().shape == (1, 3)
        bounded = Bounded(0.0, 1.0, shape=(2,))
        bounded.make_neg_dim(0)
        assert bounded.shape == (-1,) and bounded.low.shape == (2,)
        with pytest.raises(ValueError, match="dim 2 is out of range"):
            Unbounded((4, 3)).make_neg_dim(2)

    def test_ndim(self, leaf):
        assert leaf.ndim == leaf.ndimension() == 2


# ---------------------------------------------------------------- copies, devices, equality
class TestCopies:
    def test_clone_equal_not_same(self, leaf):
        c = leaf.clone()
        assert c == leaf and c is not leaf

    def test_to_same_device_is_identity(self, leaf):
        assert leaf.to("cpu") is leaf and leaf.cpu() is leaf

    def test_to_dtype(self):
        spec = Bounded(-1.0, 1.0, shape=(2,))
        d = spec.to(torch.float64)
        assert d.dtype == torch.float64 and d.low.dtype == torch.float64 and type(d) is BoundedContinuous
        assert type(spec.to(torch.int64)) is BoundedDiscrete
        assert Categorical(3).to(torch.int32).dtype == torch.int32

    def test_equality(self):
        assert Bounded(-1.0, 1.0, shape=(2,)) == Bounded(-1.0, 1.0, shape=(2,))
        assert Bounded(-1.0, 1.0, shape=(2,)) != Bounded(-1.0, 2.0, shape=(2,))
        assert Bounded(-1.0, 1.0, shape=(2,)) != Unbounded(2)
        assert Categorical(3) != Categorical(4)
        assert Categorical(3) != OneHot(3)
        assert MultiCategorical([2, 3]) != MultiCategorical([3, 2])

    def test_bounds_setter_invalidates_cache(self):
        spec = Bounded(0.0, 1.0, shape=(100,))
        spec.rand()
        spec.low = torch.full((100,), 5.0)
        spec.high = torch.full((100,), 6.0)
        assert bool((spec.rand() >= 5).all())

    def test_repr(self):
        text = repr(Bounded(-1.0, 1.0, shape=(3,)))
        assert text.startswith("BoundedContinuous(\n    shape=torch.Size([3]),\n    space=ContinuousBox(")
        assert "domain=continuous)" in text
        assert "CategoricalBox(n=3)" in repr(Categorical(3))


class TestBoxes:
    def test_continuous_box(self):
        box = ContinuousBox(torch.zeros(2, 3), torch.ones(2, 3))
        assert box.clone() == box and box.clone().low is not box.low
        assert len(box.unbind(0)) == 2 and box.unbind(0)[0].low.shape == (3,)
        assert box.to(torch.float64).low.dtype == torch.float64
        assert box.to("cpu") is box

    def test_other_boxes(self):
        assert CategoricalBox(3) == CategoricalBox(3) != CategoricalBox(4)
        assert ts.DiscreteBox(3).n == 3 and isinstance(ts.DiscreteBox(3), CategoricalBox)
        nested = BoxList.from_nvec(torch.tensor([[2, 3], [4, 5]]))
        assert len(nested) == 2 and [b.n for b in nested[1]] == [4, 5]
        assert BinaryBox(3).to("cpu") == BinaryBox(3)
        assert list(CategoricalBox(3)) == [3]


def test_pickle_and_deepcopy(leaf):
    """Specs cross process boundaries (parallel envs, collectors): they must survive pickling."""
    import copy
    import pickle

    for out in (pickle.loads(pickle.dumps(leaf)), copy.deepcopy(leaf)):
        assert out == leaf and type(out) is type(leaf) and out.is_in(out.rand())


def test_squeeze_and_reshape_to_scalar_shape():
    import torch

    from torchrl.data import Bounded

    spec = Bounded(-1, 1, shape=(1,))
    assert spec.squeeze(0).shape == torch.Size([])
    assert spec.reshape(()).shape == torch.Size([])
    assert spec.squeeze(0).is_in(torch.tensor(0.5))


class TestDynamicDims:
    """A ``-1`` dim is a size that changes from step to step: values drawn from the spec take it as 1, and
    membership accepts any size there (TorchRL's dynamic specs)."""

    @pytest.mark.parametrize("spec", [
        Unbounded(shape=(-1, 3)),
        Bounded(low=-1.0, high=1.0, shape=(-1, 3)),
        Categorical(4, shape=(-1, 3)),
        Unbounded(shape=(-1, 3), dtype=torch.int64),
        Binary(shape=(-1, 3)),
    ], ids=lambda s: type(s).__name__)
    def test_values_take_one_for_dynamic_dims(self, spec):
        assert spec.shape == (-1, 3)
        assert spec.zero().shape == (1, 3) and spec.rand().shape == (1, 3) and spec.one().shape == (1, 3)
        assert spec.zero((2,)).shape == (2, 1, 3) and spec.rand((2, 4)).shape == (2, 4, 1, 3)
        assert spec.is_in(spec.rand()) and spec.is_in(spec.zero((5,)).reshape(5, 3))
        assert not spec.is_in(torch.zeros(5, 4, dtype=spec.dtype))

    def test_bounded_keeps_one_row_of_bounds(self):
        spec = Bounded(low=torch.tensor([0.0, 1.0, 2.0]), high=3.0, shape=(-1, 3))
        assert spec.low.shape == (1, 3)
        x = spec.rand((1000,))
        assert bool((x >= torch.tensor([0.0, 1.0, 2.0])).all() and (x <= 3).all())
        assert not spec.is_in(torch.full((4, 3), 5.0))

    def test_composite_with_dynamic_leaf(self):
        from torchrl.data import Composite

        spec = Composite(a=Unbounded(shape=(-1, 3)), b=Unbounded(shape=(2,)))
        assert spec.zero()["a"].shape == (1, 3) and spec.rand()["b"].shape == (2,)
        assert spec.is_in(spec.zero())


def test_one_hot_to_numpy_takes_integer_indices():
    spec = OneHot(3)
    assert spec.to_numpy(torch.tensor([0, 0, 1])) == 2
    assert spec.to_numpy(torch.tensor(2)) == 2 and spec.to_numpy(torch.tensor([1])) == 1
    batched = OneHot(3, shape=(4, 3))
    np.testing.assert_array_equal(batched.to_numpy(torch.tensor([0, 1, 2, 1])), [0, 1, 2, 1])
    np.testing.assert_array_equal(batched.to_numpy(batched.encode(torch.tensor([2, 0, 1, 1]))), [2, 0, 1, 1])
