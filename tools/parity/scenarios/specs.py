"""torchrl.data.tensor_specs: construction, sampling, membership, encoding, shape ops and Composite ops.

The first part is a matrix: every spec of ``SPECS`` goes through every operation of ``OPS`` (one scenario
``scenario_<op>__<spec>`` each, errors compared by type). Hand-written scenarios follow.
"""
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

import parity
from torchrl.data import (
    Binary,
    Bounded,
    BoundedContinuous,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)
from torchrl.data.tensor_specs import BoundedDiscrete, Choice, Stacked, StackedComposite

A = parity.attempt
S = parity.structure

_MASK = torch.tensor([[True, False, True, True], [False, True, True, False]])

SPECS = {
    "unbounded": lambda: Unbounded((2, 3)),
    "unbounded_int": lambda: Unbounded((2,), dtype=torch.int64),
    "unbounded_bool": lambda: Unbounded((2,), dtype=torch.bool),
    "unbounded_scalar": lambda: Unbounded(()),
    "bounded": lambda: Bounded(-1.0, 1.0, (2, 3)),
    "bounded_tensor": lambda: Bounded(low=torch.tensor([-1.0, 0.0]), high=torch.tensor([1.0, 2.0])),
    "bounded_int": lambda: Bounded(0, 5, (3,), dtype=torch.int64),
    "bounded_double": lambda: Bounded(-2.0, 2.0, (2,), dtype=torch.float64),
    "categorical": lambda: Categorical(4, (2,)),
    "categorical_scalar": lambda: Categorical(4),
    "categorical_mask": lambda: Categorical(4, (2,), mask=_MASK),
    "categorical_bool": lambda: Categorical(2, (1,), dtype=torch.bool),
    "onehot": lambda: OneHot(4, (2, 4)),
    "onehot_plain": lambda: OneHot(3),
    "onehot_mask": lambda: OneHot(4, (2, 4), mask=_MASK),
    "multicat": lambda: MultiCategorical([2, 3]),
    "multicat_batched": lambda: MultiCategorical([2, 3], (4, 2)),
    "multionehot": lambda: MultiOneHot([2, 3]),
    "multionehot_batched": lambda: MultiOneHot([2, 3], (4, 5)),
    "binary": lambda: Binary(3),
    "binary_shape": lambda: Binary(shape=(2, 3)),
    "nontensor": lambda: NonTensor(shape=(2,)),
    "composite": lambda: Composite(
        a=Unbounded((2, 3)), b=Composite(c=Categorical(3, (2, 1)), shape=(2,)), shape=(2,)
    ),
    "composite_empty": lambda: Composite(shape=(2,)),
    "stacked": lambda: torch.stack([Bounded(-1.0, 1.0, (3,)), Bounded(-2.0, 2.0, (3,))], 0),
    "stacked_het": lambda: torch.stack([Unbounded(3), Unbounded(4)], 0),
    "stacked_composite": lambda: torch.stack(
        [Composite(a=Unbounded(3)), Composite(a=Unbounded(3), b=Unbounded(2))], 0
    ),
}


def _np(x):
    """A spec value as a user would hand it from numpy (dicts for TensorDicts)."""
    if isinstance(x, TensorDictBase):
        return {k: _np(v) for k, v in x.items()}
    if isinstance(x, torch.Tensor):
        return x.numpy()
    return x


def _list(x):
    if isinstance(x, TensorDictBase):
        return {k: _list(v) for k, v in x.items()}
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return x


def _expand_args(s):
    return (3, *s.shape)


def _far(s):
    """A value of the spec's shape and dtype far outside any bounds (or the zero value for Composites)."""
    z = s.zero()
    if isinstance(z, torch.Tensor) and z.dtype != torch.bool:
        return z + 100
    return z


OPS = {
    # attributes
    "attrs": lambda s: [type(s).__name__, s.shape, s.dtype if not isinstance(s, Composite) else None, s.device,
                        s.ndim, s.ndimension(), getattr(s, "domain", None)],
    "isinstance": lambda s: [isinstance(s, c) for c in (TensorSpec, Unbounded, Bounded, Categorical, OneHot,
                                                         MultiCategorical, MultiOneHot, Binary, Composite,
                                                         Stacked, StackedComposite, NonTensor)],
    # sampling
    "rand": lambda s: S(s.rand()),
    "rand_shape": lambda s: S(s.rand((2,))),
    "rand_shape_list": lambda s: S(s.rand([2, 1])),
    "rand_is_in": lambda s: bool(s.is_in(s.rand((3,)))),
    "sample": lambda s: S(s.sample()),
    "zero": lambda s: s.zero(),
    "zero_shape": lambda s: s.zero((2,)),
    "zeros": lambda s: s.zeros(),
    "zero_is_in": lambda s: bool(s.is_in(s.zero())),
    "one": lambda s: s.one(),
    "one_shape": lambda s: s.one((2,)),
    "ones": lambda s: s.ones(),
    "one_is_in": lambda s: bool(s.is_in(s.one())),
    # membership
    # is_in's value (TorchRL returns a 0-dim tensor for some specs: see scenario_is_in_return_types)
    "is_in_far": lambda s: bool(s.is_in(_far(s))),
    "is_in_wrong_shape": lambda s: bool(s.is_in(torch.zeros(7))),
    "is_in_wrong_dtype": lambda s: bool(s.is_in(s.zero().to(torch.float16))),
    "is_in_batched": lambda s: bool(s.is_in(s.zero((5,)))),
    "contains": lambda s: bool(s.contains(s.zero())),
    "assert_is_in_far": lambda s: s.assert_is_in(_far(s)),
    "type_check": lambda s: s.type_check(s.zero()),
    "type_check_bad": lambda s: s.type_check(s.zero().to(torch.float16)),
    "project_far": lambda s: s.project(_far(s)),
    "project_zero": lambda s: s.project(s.zero()),
    # conversion
    "encode_numpy": lambda s: s.encode(_np(s.zero())),
    "encode_list": lambda s: s.encode(_list(s.one())),
    "encode_tensor": lambda s: s.encode(s.one()),
    "encode_far": lambda s: s.encode(_np(_far(s))),
    "to_numpy": lambda s: s.to_numpy(s.one()),
    "to_numpy_far": lambda s: s.to_numpy(_far(s)),
    "to_numpy_unsafe_far": lambda s: s.to_numpy(_far(s), safe=False),
    # shape ops
    "expand": lambda s: s.expand(*_expand_args(s)),
    "expand_tuple": lambda s: s.expand(_expand_args(s)),
    "expand_neg": lambda s: s.expand(3, *([-1] * len(s.shape))),
    "expand_bad": lambda s: s.expand(5),
    "expand_rand": lambda s: S(s.expand(*_expand_args(s)).rand()),
    "unsqueeze0": lambda s: s.unsqueeze(0),
    "unsqueeze_neg1": lambda s: s.unsqueeze(-1),
    "unsqueeze_far": lambda s: s.unsqueeze(5),
    "squeeze": lambda s: s.unsqueeze(0).squeeze(),
    "squeeze0": lambda s: s.unsqueeze(0).squeeze(0),
    "squeeze_nonsingleton": lambda s: s.squeeze(0),
    "reshape_flat": lambda s: s.reshape(-1),
    "reshape_add": lambda s: s.reshape(1, *s.shape),
    "view": lambda s: s.view(1, *s.shape),
    "flatten": lambda s: s.unsqueeze(0).flatten(0, 1),
    "unflatten": lambda s: s.unflatten(0, (1, s.shape[0])) if s.shape else s.unflatten(0, (1,)),
    "unbind0": lambda s: s.unbind(0),
    "unbind_neg": lambda s: s.unbind(-1),
    "getitem0": lambda s: s[0],
    "getitem_slice": lambda s: s[:1],
    "getitem_ellipsis": lambda s: s[..., 0],
    "getitem_none": lambda s: s[None],
    "getitem_list": lambda s: s[[0, 0]],
    "getitem_tensor_mask": lambda s: s[torch.tensor([True, False])],
    "index_tensor": lambda s: s.index(torch.tensor(1), s.one()),
    "make_neg_dim": lambda s: s.make_neg_dim(0),
    # copies, equality, devices
    "clone_eq": lambda s: [bool(s.clone() == s), s.clone() is s, bool(s.clone() != s)],
    "eq_other_kind": lambda s: [s == Unbounded(s.shape), s == Categorical(2, s.shape)],
    "eq_none": lambda s: s == None,  # noqa: E711 - what == with a non-spec gives
    "to_double": lambda s: s.to(torch.float64),
    "to_cpu": lambda s: s.to("cpu"),
    "to_device": lambda s: s.to(torch.device("cpu")),
    "cpu": lambda s: s.cpu(),
    "clear_device": lambda s: s.clone().clear_device_(),
    "cardinality": lambda s: s.cardinality(),
    "enumerate": lambda s: s.enumerate(),
    "space": lambda s: type(getattr(s, "space", None)).__name__,
    "low_high": lambda s: [s.low, s.high],
    "n_nvec": lambda s: [getattr(s, "n", None), getattr(s, "nvec", None)],
    "memoize_encode": lambda s: (s.memoize_encode(), s.encode(_np(s.zero())))[1],
    "stack_self": lambda s: torch.stack([s, s.clone()], 0),
    "stack_self_last": lambda s: torch.stack([s, s.clone()], -1),
}


def _make(op, spec):
    def scenario():
        return A(lambda: OPS[op](SPECS[spec]()))

    scenario.__name__ = f"scenario_{op}__{spec}"
    return scenario


for _op in OPS:
    for _spec in SPECS:
        globals()[f"scenario_{_op}__{_spec}"] = _make(_op, _spec)


# ---------------------------------------------------------------------------------------------------------
# Hand-written scenarios.
# ---------------------------------------------------------------------------------------------------------
def _keys(view):
    return sorted((k if isinstance(k, str) else "/".join(k)) for k in view)


# construction: positional / keyword arguments, defaults
def scenario_unbounded_defaults():
    return [A(lambda: Unbounded()), A(lambda: Unbounded(3)), A(lambda: Unbounded((2, 3))),
            A(lambda: Unbounded(torch.Size([4]))), A(lambda: Unbounded(shape=(2,), dtype=torch.int32)),
            A(lambda: Unbounded(2, "cpu", torch.float16)),
            A(lambda: Unbounded(shape=[1, 2], device=torch.device("cpu"))), A(lambda: Unbounded(shape=())),
            A(lambda: Unbounded(shape=-1))]


def scenario_unbounded_shape_none():
    return A(lambda: Unbounded(shape=None))


def scenario_unbounded_subclasses():
    return [A(lambda: UnboundedContinuous()), A(lambda: UnboundedContinuous(3, dtype=torch.float64)),
            A(lambda: UnboundedDiscrete()), A(lambda: UnboundedDiscrete(3)),
            A(lambda: UnboundedDiscrete(3, dtype=torch.int8)), A(lambda: UnboundedContinuous(3, dtype=torch.int64)),
            A(lambda: UnboundedDiscrete(3, dtype=torch.float32)), A(lambda: Unbounded(3, dtype=torch.bool))]


def scenario_unbounded_bad_kwargs():
    return [A(lambda: Unbounded(3, foo=1)), A(lambda: Unbounded(3, domain="discrete")),
            A(lambda: Unbounded(3, dtype="notadtype"))]


def scenario_unbounded_values():
    s = Unbounded((2,), dtype=torch.int32)
    u = Unbounded((1,), dtype=torch.float64)
    b = Unbounded((1,), dtype=torch.bool)
    return [s.low, s.high, u.low, u.high, b.low, b.high, Unbounded(2, dtype=torch.uint8).low]


def scenario_bounded_construction():
    return [A(lambda: Bounded(-1, 1, (2,))), A(lambda: Bounded(-1.0, 1.0, shape=3)),
            A(lambda: Bounded(low=-1.0, high=1.0, shape=(2, 2))),
            A(lambda: Bounded(torch.zeros(3), torch.ones(3))),
            A(lambda: Bounded(torch.zeros(3), 1.0)), A(lambda: Bounded(0.0, torch.ones(3))),
            A(lambda: Bounded(torch.zeros(3), torch.ones(3), shape=(4,))),
            A(lambda: Bounded(-1, 1)), A(lambda: Bounded(-1.0, 1.0, (2,), "cpu", torch.float64)),
            A(lambda: Bounded(0, 10, (2,), dtype=torch.uint8))]


def scenario_bounded_bounds_broadcast_together():
    return A(lambda: Bounded(torch.zeros(2, 1), torch.ones(1, 3)))


def scenario_bounded_dtype_string():
    return A(lambda: Bounded(0, 10, (2,), dtype="int32"))


def scenario_bounded_low_gt_high():
    return [A(lambda: Bounded(1.0, -1.0, (2,))), A(lambda: Bounded(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 1.0]))),
            A(lambda: Bounded(1.0, 1.0, (2,)))]


def scenario_bounded_missing_args():
    return [A(lambda: Bounded()), A(lambda: Bounded(0.0)), A(lambda: Bounded(high=1.0, shape=(1,))),
            A(lambda: Bounded(0.0, 1.0, shape=(1,), foo=2))]


def scenario_bounded_deprecated_minimum_maximum():
    return parity.warns(lambda: Bounded(minimum=-2.0, maximum=2.0, shape=(2,)))


def scenario_bounded_domain():
    return [A(lambda: Bounded(0, 1, (1,), domain="discrete")), A(lambda: Bounded(0, 1, (1,), domain="continuous")),
            A(lambda: Bounded(0, 1, (1,), dtype=torch.int64, domain="continuous")),
            A(lambda: Bounded(0, 1, (1,), domain="bogus")), A(lambda: BoundedContinuous(0, 1, (1,))),
            A(lambda: BoundedDiscrete(0, 3, (1,))), A(lambda: BoundedDiscrete(0, 3, (1,), dtype=torch.int8)),
            A(lambda: BoundedContinuous(0, 3, (1,), dtype=torch.int64))]


def scenario_bounded_low_high_properties():
    s = Bounded(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 2.0]))
    return [s.low, s.high, s.space.low, s.space.high, s.low.is_contiguous(), list(s.space)]


def scenario_bounded_set_low_inplace():
    s = Bounded(-1.0, 1.0, (3,))
    A(lambda: s.space.low.__setitem__(0, -2.0))
    return [s.low, bool(s.is_in(torch.tensor([-1.5, 0.0, 0.0])))]


def scenario_bounded_int_bounds_dtype():
    s = Bounded(0, 5, (2,), dtype=torch.int64)
    f = Bounded(0, 5, (2,))
    return [s.low, s.high, f.low, f.high]


def scenario_bounded_rand_within():
    s = Bounded(torch.tensor([0.0, 10.0]), torch.tensor([1.0, 20.0]))
    r = s.rand((100,))
    return [bool((r[:, 0] >= 0).all() and (r[:, 0] <= 1).all()), bool((r[:, 1] >= 10).all() and (r[:, 1] <= 20).all())]


def scenario_bounded_discrete_rand_covers():
    s = Bounded(0, 3, (1,), dtype=torch.int64)
    return sorted(set(s.rand((200,)).reshape(-1).tolist()))


def scenario_bounded_project_values():
    s = Bounded(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 2.0]))
    d = Bounded(0, 5, (2,), dtype=torch.int64)
    return [s.project(torch.tensor([-5.0, 5.0])), s.project(torch.tensor([[0.5, 1.0], [3.0, -3.0]])),
            d.project(torch.tensor([-3, 9])), A(lambda: d.project(torch.tensor([0.4, 4.6])))]


def scenario_categorical_construction():
    return [A(lambda: Categorical(3)), A(lambda: Categorical(3, (2,))),
            A(lambda: Categorical(n=3, shape=(1,), dtype=torch.int32)), A(lambda: Categorical(3, dtype="int8")),
            A(lambda: Categorical(-1)), A(lambda: Categorical(3, (2,), "cpu", torch.int64)),
            A(lambda: Categorical(3, mask=torch.tensor([True, False, True]))),
            A(lambda: Categorical(3, (2,), mask=torch.tensor([True, False, True]))),
            A(lambda: Categorical(3, mask=torch.tensor([True, False]))),
            A(lambda: Categorical(0))]


def scenario_categorical_provisional_n():
    s = Categorical(-1, (2,))
    out = [s.n, A(lambda: s.rand())]
    s.set_provisional_n(4)
    return out + [s.n, S(s.rand()), s.space.n]


def scenario_categorical_update_mask():
    s = Categorical(4, (3,))
    s.update_mask(torch.tensor([False, False, True, False]))
    draws = s.rand((10,))
    out = [draws, bool(s.is_in(torch.tensor([2, 2, 2]))), bool(s.is_in(torch.tensor([1, 2, 2])))]
    s.update_mask(None)
    out.append(bool(s.is_in(torch.tensor([1, 2, 2]))))
    out.append(A(lambda: s.update_mask(torch.tensor([True, False]))))
    out.append(A(lambda: s.update_mask(torch.tensor([1, 0, 1, 1]))))
    return out


def scenario_categorical_mask_batched():
    s = Categorical(3, (2,), mask=torch.tensor([[True, False, False], [False, False, True]]))
    return [s.rand(), s.rand((3,)), bool(s.is_in(torch.tensor([0, 2]))), bool(s.is_in(torch.tensor([2, 0])))]


def scenario_categorical_mask_through_ops():
    s = Categorical(3, (2,), mask=torch.tensor([[True, False, False], [False, False, True]]))
    return [s[0].rand(), s[1].rand(), s.expand(4, 2).rand(), s.unsqueeze(0).rand(), s.clone().rand(),
            s.to_one_hot_spec().rand(), s.unbind(0)[1].rand()]


def scenario_categorical_one_hot_conversions():
    s = Categorical(4, (2,))
    v = torch.tensor([1, 3])
    return [s.to_one_hot(v), s.to_one_hot_spec(), s.to_categorical(v), s.to_categorical_spec(),
            A(lambda: s.to_one_hot(torch.tensor([1, 7]), safe=True)), A(lambda: s.to_one_hot(torch.tensor([1, 7])))]


def scenario_onehot_construction():
    return [A(lambda: OneHot(3)), A(lambda: OneHot(3, (2, 3))), A(lambda: OneHot(3, (2,))),
            A(lambda: OneHot(3, (3, 2))), A(lambda: OneHot(n=4, dtype=torch.int64)),
            A(lambda: OneHot(3, use_register=True)), A(lambda: OneHot(3, mask=torch.tensor([True, False, True]))),
            A(lambda: OneHot(3, (2, 3), mask=torch.tensor([True, False, True]))), A(lambda: OneHot(0))]


def scenario_onehot_conversions():
    s = OneHot(4, (2, 4))
    v = torch.tensor([[0, 1, 0, 0], [0, 0, 0, 1]], dtype=torch.bool)
    return [s.to_categorical(v), s.to_categorical_spec(), s.to_one_hot(v), s.to_one_hot_spec(), s.to_numpy(v),
            s.to_categorical_spec().to_one_hot_spec() == s]


def scenario_onehot_encode_indices():
    s = OneHot(3)
    b = OneHot(4, (2, 4))
    return [s.encode(2), s.encode(np.int64(1)), s.encode(np.array(0)), s.encode(torch.tensor(2)),
            b.encode(np.array([1, 3])), b.encode([0, 2]), A(lambda: s.encode(5)), A(lambda: s.encode(-1))]


def scenario_onehot_update_mask():
    s = OneHot(4)
    s.update_mask(torch.tensor([False, True, False, False]))
    return [s.rand(), s.rand((3,)), bool(s.is_in(torch.tensor([False, True, False, False]))),
            bool(s.is_in(torch.tensor([True, False, False, False]))), A(lambda: s.update_mask(torch.tensor([True])))]


def scenario_multicategorical_construction():
    return [A(lambda: MultiCategorical([2, 3])), A(lambda: MultiCategorical(torch.tensor([2, 3]))),
            A(lambda: MultiCategorical([2, 3], (4, 2))), A(lambda: MultiCategorical([2, 3], (2, 4))),
            A(lambda: MultiCategorical(3)), A(lambda: MultiCategorical([[2, 3], [4, 5]])),
            A(lambda: MultiCategorical([2, 3], dtype=torch.int32)),
            A(lambda: MultiCategorical([2, 3], remove_singleton=False))]


def scenario_multicategorical_nvec():
    s = MultiCategorical([2, 3], (4, 2))
    return [s.nvec, s.space.__class__.__name__, len(s.space), MultiCategorical([2, 3]).nvec]


def scenario_multicategorical_values():
    s = MultiCategorical([2, 3])
    return [s.is_in(torch.tensor([1, 2])), s.is_in(torch.tensor([2, 2])), s.is_in(torch.tensor([-1, 0])),
            s.project(torch.tensor([5, -2])), s.to_one_hot(torch.tensor([1, 2])), s.to_one_hot_spec(),
            s.to_categorical_spec(), s.zero(), s.one(), S(s.rand((3,)))]


def scenario_multicategorical_mask():
    s = MultiCategorical([2, 3], mask=torch.tensor([False, True, True, False, False]))
    return [s.rand(), s.rand((2,)), s.is_in(torch.tensor([1, 0])), s.is_in(torch.tensor([0, 0])),
            ]


def scenario_multicategorical_mask_wrong_shape():
    s = MultiCategorical([2, 3])
    return A(lambda: s.update_mask(torch.tensor([True, True])))


def scenario_multicategorical_remove_singleton():
    s = MultiCategorical([3], remove_singleton=True)
    t = MultiCategorical([3], remove_singleton=False)
    return [S(s.rand()), S(t.rand()), S(s.rand((2,))), S(t.rand((2,))), s.zero(), s.shape]


def scenario_multionehot_construction():
    return [A(lambda: MultiOneHot([2, 3])), A(lambda: MultiOneHot([2, 3], (4, 5))),
            A(lambda: MultiOneHot([2, 3], (4, 3))), A(lambda: MultiOneHot((1, 1))),
            A(lambda: MultiOneHot([2, 3], dtype=torch.int64))]


def scenario_multionehot_values():
    s = MultiOneHot([2, 3])
    v = torch.tensor([0, 1, 0, 0, 1], dtype=torch.bool)
    return [s.nvec, s.is_in(v), s.is_in(torch.tensor([1, 1, 0, 0, 1], dtype=torch.bool)),
            s.is_in(torch.tensor([0, 1, 0, 0, 0], dtype=torch.bool)), s.to_categorical(v),
            s.to_categorical_spec(), s.to_one_hot(v), s.to_one_hot_spec(), s.to_numpy(v),
            s.encode(np.array([1, 2])), s.encode([0, 0])]


def scenario_multionehot_project():
    return MultiOneHot([2, 3]).project(torch.tensor([0.2, 0.9, 0.1, 0.3, 0.2]))


def scenario_multionehot_mask():
    s = MultiOneHot([2, 3], mask=torch.tensor([False, True, True, True, False]))
    return [S(s.rand()), s.is_in(torch.tensor([0, 1, 0, 0, 1], dtype=torch.bool)),
            s.is_in(torch.tensor([0, 1, 1, 0, 0], dtype=torch.bool))]


def scenario_binary_construction():
    return [A(lambda: Binary(3)), A(lambda: Binary(shape=(2, 3))), A(lambda: Binary(3, (2, 3))),
            A(lambda: Binary(4, (2, 3))), A(lambda: Binary()), A(lambda: Binary(3, dtype=torch.bool)),
            A(lambda: Binary(n=2, shape=torch.Size([2])))]


def scenario_binary_values():
    s = Binary(3)
    return [bool(s.is_in(torch.tensor([0, 1, 1], dtype=torch.int8))), bool(s.is_in(torch.tensor([0, 2, 1], dtype=torch.int8))),
            bool(s.is_in(torch.tensor([0, 1, 1]))), s.zero(), s.one(),
            S(s.rand((2,)))]


def scenario_nontensor_construction():
    return [A(lambda: NonTensor()), A(lambda: NonTensor(shape=(2,))), A(lambda: NonTensor(shape=3)),
            A(lambda: NonTensor(shape=(), example_data="hi")), A(lambda: NonTensor(batched=True)),
            A(lambda: NonTensor(feature_dims=1)), A(lambda: NonTensor(batched=True, feature_dims=1))]


def scenario_nontensor_values():
    s = NonTensor(shape=(), example_data="hello")
    z = s.zero()
    r = s.rand()
    return [type(z).__name__, z.data, type(r).__name__, r.data, s.is_in(z), s.one().data,
            A(lambda: s.is_in("hello")), A(lambda: s.is_in(torch.zeros(()))), s.to_numpy(z)]


def scenario_nontensor_shaped_values():
    s = NonTensor(shape=(2,), example_data=5)
    z = s.zero()
    zs = s.zero((3,))
    return [type(z).__name__, z.batch_size, type(zs).__name__, zs.batch_size, s.is_in(z), s.is_in(zs),
            A(lambda: z.tolist())]


def scenario_nontensor_batched():
    s = NonTensor(shape=(2,), example_data="x", batched=True)
    z = s.zero()
    return [type(z).__name__, z.batch_size, A(lambda: z.tolist()), s.is_in(z)]


def scenario_nontensor_in_composite():
    c = Composite(text=NonTensor(shape=(), example_data="a"), obs=Unbounded(2))
    z = c.zero()
    return [sorted(z.keys()), z["text"], type(z.get("text")).__name__, c.is_in(z), _keys(c.keys(True, True))]


def scenario_choice_basic():
    c = Choice([Categorical(2), Categorical(3)])
    return [A(lambda: c.shape), A(lambda: c.dtype), A(lambda: c.num_choices), A(lambda: S(c.rand())),
            A(lambda: c.is_in(torch.tensor(1))), A(lambda: c.is_in(torch.tensor(2))),
            A(lambda: c.is_in(torch.tensor(5))), A(lambda: c.cardinality()), A(lambda: c.enumerate())]


def scenario_choice_errors():
    return [A(lambda: Choice([Categorical(2), Unbounded(1)])), A(lambda: Choice([])),
            A(lambda: Choice([Categorical(2, (2,)), Categorical(3)]))]


def scenario_choice_shape_ops():
    c = Choice([Bounded(0.0, 1.0, (2,)), Bounded(5.0, 6.0, (2,))])
    return [A(lambda: c.expand(3, 2)), A(lambda: c.unsqueeze(0)), A(lambda: c.clone() == c),
            A(lambda: S(c.rand((4,)))), A(lambda: c.zero()), A(lambda: c.to(torch.float64))]


def scenario_choice_one():
    return A(lambda: Choice([Bounded(0.0, 1.0, (2,)), Bounded(5.0, 6.0, (2,))]).one())


# Composite
def _nested():
    return Composite(
        obs=Unbounded((4, 3)),
        agents=Composite(action=Bounded(-1.0, 1.0, (4, 2, 1)), done=Categorical(2, (4, 2, 1), dtype=torch.bool),
                         shape=(4, 2)),
        shape=(4,),
    )


def scenario_composite_construction():
    return [A(lambda: Composite()), A(lambda: Composite(a=Unbounded(3))), A(lambda: Composite({"a": Unbounded(3)})),
            A(lambda: Composite({"a": Unbounded((2, 3))}, shape=(2,))),
            A(lambda: Composite(a=Unbounded((2, 3)), batch_size=(2,))),
            A(lambda: Composite(a=Unbounded((2, 3)), shape=[2])), A(lambda: Composite(a={"b": Unbounded(3)})),
            A(lambda: Composite(a=None)), A(lambda: Composite({"a": Unbounded(3)}, {"b": Unbounded(3)})),
            A(lambda: Composite({("a", "b"): Unbounded(3)})), A(lambda: Composite(a=Unbounded(3), device="cpu")),
            A(lambda: Composite(a=Unbounded(3), shape=(3,)))]


def scenario_composite_shape_mismatch():
    return [A(lambda: Composite(a=Unbounded((2, 3)), shape=(3,))), A(lambda: Composite(a=Unbounded(()), shape=(1,))),
            A(lambda: Composite(a=Unbounded((2, 3)), shape=(2, 3, 4)))]


def scenario_composite_reserved_and_bad_entries():
    return [A(lambda: Composite(a=3)),
            A(lambda: Composite(dtype=torch.float32)), A(lambda: Composite(shape=(2,), device="cpu", a=Unbounded((2,))))]


def scenario_is_in_return_types():
    specs = [SPECS[k]() for k in ("unbounded", "bounded", "categorical", "categorical_mask", "onehot", "binary",
                                   "multicat", "multionehot", "composite")]
    return [[type(s.is_in(s.zero())).__name__, type(s == s.clone()).__name__] for s in specs]


def scenario_composite_deprecated_name():
    import importlib
    return parity.warns(lambda: getattr(importlib.import_module("torchrl.data.tensor_specs"), "CompositeSpec").__name__)


def scenario_deprecated_names_present():
    import torchrl.data
    import torchrl.data.tensor_specs as ts
    names = ["BoundedTensorSpec", "CompositeSpec", "OneHotDiscreteTensorSpec", "UnboundedContinuousTensorSpec",
             "UnboundedDiscreteTensorSpec", "DiscreteTensorSpec", "MultiDiscreteTensorSpec",
             "MultiOneHotDiscreteTensorSpec", "BinaryDiscreteTensorSpec", "NonTensorSpec", "LazyStackedTensorSpec",
             "LazyStackedCompositeSpec"]
    return [[n, hasattr(ts, n), hasattr(torchrl.data, n)] for n in names]


def scenario_composite_attrs():
    c = _nested()
    return [c.shape, c.batch_size, c.ndim, c.ndimension(), c.device, len(c), list(c), c.is_locked, c.locked,
            c.names, c.is_empty(), c.empty().is_empty(), c.data_cls, c.domain]


def scenario_composite_space_attribute():
    return A(lambda: _nested().space)


def scenario_composite_keys_views():
    c = _nested()
    return [_keys(c.keys()), _keys(c.keys(True)), _keys(c.keys(True, True)), _keys(c.keys(False, True)),
            _keys(c.keys(include_nested=True, leaves_only=True)), _keys(k for k, _ in c.items(True, True)),
            [type(v).__name__ for v in c.values(True, True)], len(c.keys(True)), ("agents", "action") in c.keys(True),
            ("agents", "action") in c.keys(), "obs" in c.keys(), "agents" in c,
            _keys(c.keys(True, True, is_leaf=lambda cls: True))]


def scenario_composite_getitem_nested():
    c = _nested()
    return [c["obs"], c["agents", "action"], c[("agents",)], c["agents"]["done"], A(lambda: c["missing"]),
            A(lambda: c["agents", "missing"]), A(lambda: c["obs", "x"]), c.get("missing", None),
            c.get(("agents", "action"))]


def scenario_composite_get_without_default():
    return A(lambda: _nested().get("missing"))


def scenario_composite_set_and_del():
    c = _nested()
    c["new"] = Unbounded((4, 1))
    c["deep", "er", "leaf"] = Categorical(3, (4,))
    c.set("other", Binary(shape=(4, 2)))
    del c["obs"]
    del c["agents", "done"]
    out = [_keys(c.keys(True, True)), c["deep"].shape, c["deep", "er"].shape]
    out.append(A(lambda: c.__delitem__("missing")))
    out.append(A(lambda: c.__setitem__("bad", Unbounded((3, 1)))))
    out.append(A(lambda: c.__setitem__(("obs2", "x"), Unbounded((5,)))))
    out.append(_keys(c.keys(True, True)))
    out.append(A(lambda: c.__setitem__(3, Unbounded((4,)))))
    out.append(A(lambda: c.__setitem__(("new", "x"), Unbounded((4,)))))
    return out


def scenario_composite_pop():
    c = _nested()
    return [c.pop("obs"), A(lambda: c.pop("obs")), c.pop("obs", None), c.pop(("agents", "action")), _keys(c.keys(True))]


def scenario_composite_update():
    c = Composite(a=Unbounded(2), b=Composite(x=Unbounded(1)))
    c.update(Composite(a=Bounded(0.0, 1.0, (2,)), b=Composite(y=Unbounded(3)), c=Unbounded(4)))
    c.update({"d": Unbounded(1), ("e", "f"): Unbounded(2)})
    return [_keys(c.keys(True, True)), c["a"], A(lambda: c.update(Composite(g=Unbounded((2, 1)), shape=(2,))))]


def scenario_composite_lock():
    c = _nested()
    c.lock_()
    out = [c.is_locked, c["agents"].is_locked, A(lambda: c.__setitem__("x", Unbounded((4,)))),
           A(lambda: c["agents"].__setitem__("y", Unbounded((4, 2))))]
    cl = c.clone()
    out.append(cl.is_locked)
    c.unlock_()
    out.append([c.is_locked, c["agents"].is_locked])
    c.lock_(recurse=False)
    out.append([c.is_locked, c["agents"].is_locked])
    return out


def scenario_composite_empty():
    c = _nested()
    e = c.empty()
    return [e, e.shape, len(e), c.is_empty(), Composite(a=Composite()).is_empty(),
            ]


def scenario_composite_is_empty_recurse():
    return [Composite(a=Composite()).is_empty(recurse=True), Composite(a=Composite(b=Composite())).is_empty(True)]


def scenario_composite_select_exclude():
    c = _nested()
    return [_keys(c.select("obs").keys(True, True)), _keys(c.select(("agents", "action")).keys(True, True)),
            A(lambda: c.select("missing")), _keys(c.select("obs", "missing", strict=False).keys(True, True)),
            _keys(c.exclude("obs").keys(True, True)), _keys(c.exclude(("agents", "done")).keys(True, True)),
            _keys(c.exclude("missing").keys(True, True)), _keys(c.keys(True, True))]


def scenario_composite_separates():
    c = _nested()
    out = c.separates("obs", ("agents", "done"))
    return [_keys(out.keys(True, True)), _keys(c.keys(True, True))]


def scenario_composite_separates_missing():
    c = _nested()
    return [A(lambda: c.separates("missing")), A(lambda: c.separates("missing", default=None))]


def scenario_composite_rand_zero_shapes():
    c = _nested()
    return [S(c.rand()), c.zero(), S(c.rand((2,))), S(c.zero([2, 3])), c.one((1,)).exclude(("agents", "done")),
            S(c.rand(torch.Size([2]))), type(c.rand()).__name__]


def scenario_composite_is_in():
    c = _nested()
    z = c.zero()
    bad = z.clone()
    bad["agents", "action"] = torch.full((4, 2, 1), 5.0)
    missing = z.exclude("obs")
    extra = z.clone()
    extra["extra"] = torch.zeros(4)
    return [c.is_in(z), c.is_in(bad), c.is_in(extra), c.is_in(c.zero((3,))),
            A(lambda: c.assert_is_in(bad))]


def scenario_composite_is_in_dict():
    return A(lambda: _nested().is_in({"obs": torch.zeros(4, 3)}))


def scenario_composite_project():
    c = _nested()
    z = c.zero()
    z["agents", "action"] = torch.full((4, 2, 1), 5.0)
    return c.project(z)


def scenario_composite_encode_to_numpy():
    c = Composite(a=Unbounded(2), b=Categorical(3), n=Composite(x=Bounded(0, 5, (1,), dtype=torch.int64)))
    enc = c.encode({"a": np.array([1.0, 2.0]), "b": 2, "n": {"x": np.array([3])}})
    return [enc, c.to_numpy(enc), A(lambda: c.encode({"zz": 1}))]


def scenario_composite_eq():
    a = _nested()
    b = _nested()
    c = _nested()
    c["obs"] = Unbounded((4, 4))
    d = _nested()
    del d["obs"]
    return [a == b, a != b, a == c, a == d, a == a.clone(), a == 1, a.to("cpu") == a,
            Composite(a=Unbounded(1)) == Composite(a=Unbounded(1), device="cpu")]


def scenario_composite_expand():
    c = _nested()
    return [c.expand(2, 4), A(lambda: c.expand(3)), A(lambda: c.expand(2, 5)), c.expand(torch.Size([2, 4])),
            c.expand((2, 4)), A(lambda: c.expand(2, -1))]


def scenario_composite_squeeze_unsqueeze():
    c = _nested()
    u = c.unsqueeze(0)
    return [u, u.squeeze(0), u.squeeze(), c.unsqueeze(-1), A(lambda: c.unsqueeze(3)), c.squeeze(0),
            A(lambda: c.squeeze(3))]


def scenario_composite_index_and_unbind():
    c = _nested()
    return [c[0], c[:2], c[torch.tensor([0, 2])], c[..., 1], A(lambda: c[0, 0]), c.unbind(0),
            A(lambda: c.unbind(1)), c[None]]


def scenario_composite_reshape():
    c = Composite(a=Unbounded((2, 3, 1)), shape=(2, 3))
    return [c.reshape(6), c.reshape(3, 2), c.view(6), c.flatten(0, 1)]


def scenario_composite_reshape_minus_one_and_bad():
    c = Composite(a=Unbounded((2, 3, 1)), shape=(2, 3))
    return [A(lambda: c.reshape(-1)), A(lambda: c.reshape(5))]


def scenario_composite_to():
    c = _nested()
    return [c.to(torch.float64), c.to("cpu"), c.cpu(), c.to(torch.device("cpu")).device, c.clone().clear_device_().device]


def scenario_composite_device():
    c = Composite(a=Unbounded(2), device="cpu")
    d = Composite(a=Unbounded(2))
    out = [c.device, d.device, c["a"].device]
    out.append(A(lambda: setattr(d, "device", None)))
    return out


def scenario_composite_device_setter():
    d = Composite(a=Unbounded(2))
    d.device = "cpu"
    return d.device
    return out


def scenario_composite_shape_setter():
    c = Composite(a=Unbounded((2, 3)))
    c.shape = (2,)
    out = [c.shape]
    out.append(A(lambda: setattr(c, "shape", (3,))))
    c.batch_size = ()
    return [out[0], out[1]]


def scenario_composite_shape_setter_value():
    c = Composite(a=Unbounded((2, 3)))
    c.batch_size = ()
    return c.shape


def scenario_composite_nested_shape_inherited():
    c = Composite(shape=(3,))
    c["a", "b"] = Unbounded((3, 2))
    return [c["a"].shape, c["a", "b"].shape, A(lambda: c.__setitem__(("x", "y"), Unbounded((2,))))]


def scenario_composite_rand_update():
    c = Composite(a=Unbounded(2), shape=())
    td = TensorDict({"b": torch.ones(1)}, [])
    c.zeros_update(td)
    out = [td.clone()]
    c.ones_update(td)
    out.append(td.clone())
    c.rand_update(td)
    out.append(S(td))
    return out


def scenario_composite_type_check():
    c = Composite(a=Unbounded(2), b=Categorical(3))
    good = TensorDict({"a": torch.zeros(2), "b": torch.tensor(1)}, [])
    bad = TensorDict({"a": torch.zeros(2, dtype=torch.float64), "b": torch.tensor(1)}, [])
    return [A(lambda: c.type_check(good)), A(lambda: c.type_check(bad)), A(lambda: c.type_check(bad, "b")),
            A(lambda: c.type_check(torch.zeros(2), "a")), A(lambda: c.type_check(torch.zeros(2)))]


def scenario_composite_zero_with_none_entry():
    c = Composite(a=Unbounded(2), b=None)
    return [c.zero(), _keys(c.keys()), A(lambda: c.is_in(c.zero())), A(lambda: c.rand())]


def scenario_composite_refine_names():
    c = Composite(a=Unbounded((2, 3)), shape=(2,))
    c.refine_names("batch")
    return [c.names, c.zero().names, A(lambda: c.refine_names("a", "b"))]


def scenario_composite_index_method():
    c = Composite(a=Categorical(3))
    return A(lambda: c.index(torch.tensor(1), TensorDict({"a": torch.arange(3.0)}, [])))


def scenario_composite_repr():
    return repr(Composite(a=Unbounded(3), b=Composite(c=Categorical(2))))


def scenario_leaf_reprs():
    return [repr(Unbounded(3)), repr(Bounded(-1.0, 1.0, (2,))), repr(Categorical(3)), repr(OneHot(3)),
            repr(Binary(2)), repr(MultiCategorical([2, 3])), repr(MultiOneHot([2, 3])),
            repr(Unbounded(2, dtype=torch.int64))]


def scenario_composite_memoize_encode():
    c = Composite(a=Unbounded(2))
    c.memoize_encode()
    out = [c.encode({"a": np.zeros(2)})]
    c.erase_memoize_cache()
    c.memoize_encode(False)
    return out + [c.encode({"a": np.ones(2)})]


# stacked specs
def scenario_stack_equal_leaves():
    s = torch.stack([Bounded(-1.0, 1.0, (3,)), Bounded(-1.0, 1.0, (3,))], 0)
    return [type(s).__name__, s.shape, s, torch.stack([Unbounded(3)] * 3, 1).shape]


def scenario_stack_different_leaves():
    s = torch.stack([Bounded(-1.0, 1.0, (3,)), Bounded(-2.0, 2.0, (3,))], 0)
    return [type(s).__name__, s.shape, s[0], s[1], len(s), s.unbind(0), s.dtype, s.device, s.ndim]


def scenario_stack_heterogeneous_shapes():
    s = torch.stack([Unbounded(3), Unbounded(4)], 0)
    return [type(s).__name__, s.shape, s[0], s[1], s.is_in(s[0].zero()), A(lambda: s.is_in([torch.zeros(3), torch.zeros(4)]))]


def scenario_stack_errors():
    return [A(lambda: torch.stack([Unbounded(3), Categorical(3, (3,))], 0)),
            A(lambda: torch.stack([Unbounded(3), Unbounded((1, 3))], 0)),
            A(lambda: torch.stack([Unbounded(3), Composite()], 0)),
            A(lambda: torch.stack([Unbounded(3), Unbounded(3, dtype=torch.float64)], 0)),
            A(lambda: torch.stack([Unbounded(3), Unbounded(3)], 2)),
            A(lambda: torch.stack([], 0))]


def scenario_stack_composites_equal():
    s = torch.stack([Composite(a=Unbounded(3)), Composite(a=Unbounded(3))], 0)
    return [type(s).__name__, s.shape, s, S(s.rand()), type(s.rand()).__name__]


def scenario_stack_composites_heterogeneous():
    s = torch.stack([Composite(a=Unbounded(3), b=Unbounded(1)), Composite(a=Unbounded(4))], 0)
    r = s.zero()
    return [type(s).__name__, s.shape, _keys(s.keys()), type(r).__name__, r.batch_size, r[0]["b"].shape,
            r[1]["a"].shape, A(lambda: s["b"]), s[0], s[1], len(s), s.is_in(r)]


def scenario_stack_composites_set_and_index():
    s = torch.stack([Composite(a=Unbounded(3)), Composite(a=Unbounded(4))], 0)
    s["c"] = Unbounded((2, 1))
    return [_keys(s.keys()), s[0]["c"], s["c"], A(lambda: s.__setitem__("d", Unbounded((3, 1))))]


def scenario_stack_composites_dim1():
    s = torch.stack([Composite(a=Unbounded((2, 3)), shape=(2,)), Composite(a=Unbounded((2, 4)), shape=(2,))], 1)
    z = s.zero()
    return [s.shape, z.batch_size, type(z).__name__, s[:, 0], s.unbind(1)]


def scenario_stack_composites_index_other_dim():
    s = torch.stack([Composite(a=Unbounded((2, 3)), shape=(2,)), Composite(a=Unbounded((2, 4)), shape=(2,))], 1)
    return A(lambda: s[0])


def scenario_stack_nested_in_composite():
    st = torch.stack([Composite(obs=Unbounded(3)), Composite(obs=Unbounded(4))], 0)
    c = Composite(agents=st, shape=(2,))
    z = c.zero()
    return [c.shape, type(c["agents"]).__name__, _keys(c.keys(True, True)), type(z.get("agents")).__name__,
            c.is_in(z), S(c.rand())]


def scenario_unbounded_dtype_string():
    return A(lambda: Unbounded(shape=(2,), dtype="float64"))


def scenario_bounded_tensor_bounds_broadcast_to_shape():
    return A(lambda: Bounded(torch.zeros(3), torch.ones(3), shape=(2, 3)))


def scenario_categorical_int_shape():
    return A(lambda: Categorical(3, 2))


def scenario_multi_nvec_with_zero():
    return [A(lambda: MultiCategorical([2, 0])), A(lambda: MultiOneHot([2, 0]))]


def scenario_composite_tensor_entry():
    return A(lambda: Composite(a=torch.zeros(3)))


def scenario_composite_contains_nested_key():
    c = _nested()
    return [("agents", "action") in c, ("agents",) in c, ("zz", "x") in c]


def scenario_composite_delete_when_locked():
    c = _nested()
    c.lock_()
    return [A(lambda: c.__delitem__("obs")), A(lambda: c.pop("obs"))]


def scenario_composite_one_bool_leaf():
    return Composite(d=Categorical(2, (1,), dtype=torch.bool)).one()


def scenario_composite_is_in_missing_key():
    c = _nested()
    return A(lambda: c.is_in(c.zero().exclude("obs")))


def scenario_binary_project_floats():
    return Binary(3).project(torch.tensor([0.7, 0.2, 1.0]))
