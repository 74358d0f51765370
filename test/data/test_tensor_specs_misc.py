"""Non-tensor and choice specs, and the deprecated (pre-0.6) spec names and keywords."""
from __future__ import annotations

import warnings

import pytest
import torch

from torchrl._utils._deprecation import _WARNED
from torchrl.data import tensor_specs as ts
from torchrl.data.tensor_specs import Bounded, Categorical, Choice, NonTensor, OneHot, Unbounded


# ---------------------------------------------------------------- non-tensor and choice
class TestNonTensor:
    def test_rand_zero(self):
        spec = NonTensor(shape=(2,), example_data="hello")
        data = spec.rand()
        assert data.batch_size == (2,) and data.data == "hello"
        assert spec.is_in(data) and spec.is_in(spec.zero((3,)))
        assert not spec.is_in(torch.zeros(2))

    def test_batched_copies(self):
        spec = NonTensor(shape=(2,), example_data=[1], batched=True)
        data = spec.rand()
        assert data.tolist() == [[1], [1]] and spec.is_in(data)

    def test_errors(self):
        with pytest.raises(ValueError, match="exclusive"):
            NonTensor(batched=True, feature_dims=1)
        with pytest.raises(NotImplementedError, match="Cannot enumerate"):
            NonTensor().cardinality()

    def test_shape_ops_keep_example(self):
        spec = NonTensor(shape=(3, 4), example_data="x")
        e = spec.expand(2, 3, 4)
        assert e == NonTensor((2, 3, 4), example_data="x") and e != NonTensor((2, 3, 4))
        assert spec[0].shape == (4,) and spec.clone().example_data == "x"

    def test_encode_to_numpy(self):
        spec = NonTensor(shape=(), example_data="a")
        data = spec.encode("abc")
        assert spec.to_numpy(data) is data and data.data == "abc"  # TorchRL: to_numpy returns the value

    def test_generated_types(self):
        # TorchRL: a leading shape stacks copies; batched=True gives one NonTensorData; feature_dims stacks
        spec = NonTensor(shape=(2,), example_data=5)
        assert type(spec.zero()).__name__ == "NonTensorData" and spec.zero().batch_size == (2,)
        assert type(spec.zero((3,))).__name__ == "NonTensorStack" and spec.zero((3,)).batch_size == (3, 2)
        assert type(NonTensor(shape=(), example_data=5).zero((3,))).__name__ == "NonTensorData"
        assert type(NonTensor(shape=(2,), batched=True).zero((3,))).__name__ == "NonTensorData"
        fd = NonTensor(shape=(2, 3), example_data="x", feature_dims=1).zero()
        assert type(fd).__name__ == "NonTensorStack" and fd.batch_size == (2, 3)

    def test_is_in_type_check_dtype(self):
        spec = NonTensor(shape=(), example_data="a")
        assert spec.is_in("raw data") and not spec.is_in(torch.zeros(()))
        with pytest.raises(TypeError, match="expected non-tensor data"):
            spec.type_check(torch.zeros(()))
        assert spec.to(torch.float64).dtype is None and spec.domain is None


class TestChoice:
    def test_spec_choices(self):
        spec = Choice([Bounded(0.0, 1.0, shape=(2,)), Bounded(10.0, 11.0, shape=(2,))])
        for _ in range(10):
            x = spec.rand()
            assert spec.is_in(x) and (bool((x <= 1).all()) or bool((x >= 10).all()))
        batch = spec.rand((50,))
        assert batch.shape == (50, 2) and spec.is_in(batch)
        high = batch[:, 0] >= 10
        assert 0 < int(high.sum()) < 50
        assert not spec.is_in(torch.tensor([5.0, 5.0]))
        assert spec.num_choices == 2 and spec.cardinality() == float("inf")

    def test_discrete_choices_enumerate(self):
        spec = Choice([Categorical(2), Categorical(3)])
        assert spec.cardinality() == 5 and len(spec.enumerate()) == 5

    def test_non_tensor_choices(self):
        from tensordict import NonTensorData

        spec = Choice([NonTensorData("left", batch_size=()), NonTensorData("right", batch_size=())])
        seen = {spec.rand().data for _ in range(30)}
        assert seen == {"left", "right"}
        assert spec.is_in(NonTensorData("left", batch_size=())) and not spec.is_in(NonTensorData("up", batch_size=()))
        batch = spec.rand((3,))
        assert batch.batch_size == (3,) and spec.is_in(batch)

    def test_errors_and_ops(self):
        with pytest.raises(TypeError, match="one class"):
            Choice([Categorical(2), OneHot(2)])
        with pytest.raises(ValueError, match="one shape"):
            Choice([Unbounded(2), Unbounded(3)])
        spec = Choice([Unbounded(2), Unbounded(2, dtype=torch.float64)])
        assert spec.expand(3, 2).shape == (3, 2) and spec.clone() == spec
        assert spec.unsqueeze(0).shape == (1, 2)


# ---------------------------------------------------------------- deprecated names
OLD_NAMES = {
    "CompositeSpec": ("Composite", lambda cls: cls()),
    "BoundedTensorSpec": ("Bounded", lambda cls: cls(-1.0, 1.0, shape=(2,))),
    "UnboundedContinuousTensorSpec": ("UnboundedContinuous", lambda cls: cls(shape=(2,))),
    "UnboundedDiscreteTensorSpec": ("UnboundedDiscrete", lambda cls: cls(shape=(2,))),
    "DiscreteTensorSpec": ("Categorical", lambda cls: cls(3)),
    "OneHotDiscreteTensorSpec": ("OneHot", lambda cls: cls(3)),
    "MultiDiscreteTensorSpec": ("MultiCategorical", lambda cls: cls([2, 3])),
    "MultiOneHotDiscreteTensorSpec": ("MultiOneHot", lambda cls: cls([2, 3])),
    "BinaryDiscreteTensorSpec": ("Binary", lambda cls: cls(3)),
    "NonTensorSpec": ("NonTensor", lambda cls: cls()),
    "LazyStackedTensorSpec": ("Stacked", lambda cls: cls(Unbounded(2), Unbounded(3), dim=0)),
    "LazyStackedCompositeSpec": ("StackedComposite", lambda cls: cls(ts.Composite(), ts.Composite(), dim=0)),
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_names_warn_once_and_build_new_class(old):
    import torchrl.data as data

    new_name, build = OLD_NAMES[old]
    alias, new = getattr(ts, old), getattr(ts, new_name)
    assert getattr(data, old) is alias
    _WARNED.discard(f"{old} is deprecated; use {new_name} instead.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = build(alias)
        build(alias)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert messages == [f"{old} is deprecated; use {new_name} instead."]
    assert isinstance(first, new) and isinstance(first, alias) and type(first).__name__ != old


def test_old_keyword_names():
    for old, new in (("minimum", "low"), ("maximum", "high")):
        _WARNED.discard(f"Bounded: the keyword '{old}' is deprecated; use '{new}' instead.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = Bounded(minimum=-2.0, maximum=3.0, shape=(1,))
        Bounded(minimum=-2.0, maximum=3.0, shape=(1,))
    assert [str(w.message) for w in caught] == [
        "Bounded: the keyword 'minimum' is deprecated; use 'low' instead.",
        "Bounded: the keyword 'maximum' is deprecated; use 'high' instead.",
    ]
    assert spec.low.item() == -2.0 and spec.high.item() == 3.0
    with pytest.raises(TypeError, match="got both 'minimum'"):
        Bounded(low=0.0, minimum=0.0, high=1.0, shape=(1,))


def test_bounded_on_the_meta_device_builds_and_draws_without_reading_values():
    from torchrl.data import Bounded

    spec = Bounded(-1.0, 1.0, shape=(3,), device="meta")
    sample = spec.rand((2,))
    assert sample.shape == torch.Size([2, 3]) and sample.device.type == "meta"
    with pytest.raises(ValueError, match="low must be <= high"):  # real devices still check the bounds
        Bounded(1.0, -1.0, shape=(3,))
