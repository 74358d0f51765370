"""Composite specs (nested keys, views, locking, generation, shape ops, errors) and lazy stacks."""
from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from torchrl.data import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    NonTensor,
    OneHot,
    Stacked,
    StackedComposite,
    Unbounded,
)


def env_spec(batch=()) -> Composite:
    spec = Composite(
        observation=Unbounded(shape=(*batch, 4)),
        action=Bounded(-1.0, 1.0, shape=(*batch, 2)),
        reward=Unbounded(shape=(*batch, 1)),
        done=Categorical(2, shape=(*batch, 1), dtype=torch.bool),
        shape=batch,
    )
    spec["info", "step_count"] = Bounded(0, 1000, shape=(*batch, 1), dtype=torch.int64)
    return spec


class TestBuild:
    def test_kwargs_dict_and_batch_size(self):
        a = Composite(observation=Unbounded(3), shape=())
        b = Composite({"observation": Unbounded(3)})
        c = Composite({"observation": Unbounded((2, 3))}, batch_size=[2])
        assert a == b and c.shape == c.batch_size == (2,)
        with pytest.raises(ValueError, match="pass only one"):
            Composite(shape=(2,), batch_size=(3,))

    def test_tuple_keys_and_dicts_in_constructor(self):
        spec = Composite({("agents", "obs"): Unbounded((4, 3)), "extra": {"a": Unbounded((4, 1))}}, shape=(4,))
        assert spec["agents"].shape == (4,) and spec["extra"].shape == (4,)
        assert isinstance(spec["extra"], Composite) and spec["extra", "a"].shape == (4, 1)

    def test_none_entries(self):
        spec = Composite(a=None, b=Unbounded(1))
        assert spec["a"] is None and set(spec.rand().keys()) == {"b"}
        assert spec.is_in(TensorDict({"b": torch.zeros(1)}, []))

    def test_shape_must_prefix(self):
        with pytest.raises(ValueError, match=r"key 'obs' has shape torch.Size\(\[5, 3\]\), which does not start with the Composite's shape torch.Size\(\[4\]\)"):
            Composite(obs=Unbounded((5, 3)), shape=(4,))

    def test_nested_shape_error_names_full_key(self):
        spec = Composite(shape=(4,))
        with pytest.raises(ValueError, match=r"key \('agents', 'obs'\) has shape torch.Size\(\[5, 3\]\), which does not start with the Composite's shape torch.Size\(\[4\]\)"):
            spec["agents", "obs"] = Unbounded((5, 3))

    def test_device_mismatch(self):
        spec = Composite(device="meta")
        with pytest.raises(RuntimeError, match=r"key 'obs' is on device cpu but the Composite is on meta"):
            spec["obs"] = Unbounded(3)
        spec["obs"] = Unbounded(3, device="meta")
        assert spec["obs"].device == torch.device("meta")

    def test_device_none_subcomposite_moved(self):
        spec = Composite(device="cpu")
        spec["nested"] = Composite(a=Unbounded(1))
        assert spec["nested"].device == torch.device("cpu")

    def test_non_spec_value(self):
        with pytest.raises(TypeError, match="must be a TensorSpec, got int"):
            Composite(a=3)

    def test_too_many_positional(self):
        with pytest.raises(TypeError, match="at most one positional"):
            Composite({}, {})


class TestKeys:
    def test_get_set_del_nested(self):
        spec = Composite(shape=(2,), device="cpu")
        spec["a", "b", "c"] = Unbounded((2, 3))
        assert isinstance(spec["a"], Composite) and spec["a"].shape == (2,) and spec["a", "b"].device == torch.device("cpu")
        assert spec[("a", "b", "c")].shape == (2, 3) and spec["a"]["b"]["c"] is spec["a", "b", "c"]
        assert ("a", "b", "c") in spec and "a" in spec and ("a", "x") not in spec and "c" not in spec
        del spec["a", "b", "c"]
        assert ("a", "b", "c") not in spec and ("a", "b") in spec

    def test_missing_key_lists_available(self):
        spec = Composite(observation=Unbounded(1), reward=Unbounded(1))
        with pytest.raises(KeyError, match=r"key 'obs' not found in Composite; available keys: \['observation', 'reward'\]"):
            spec["obs"]
        spec["agents", "obs"] = Unbounded(1)
        with pytest.raises(KeyError, match=r"key \('agents', 'act'\) not found in Composite; available keys under 'agents': \['obs'\]"):
            spec["agents", "act"]
        with pytest.raises(KeyError, match=r"'reward' is a UnboundedContinuous, not a Composite"):
            spec["reward", "x"]
        with pytest.raises(KeyError, match="not found"):
            del spec["nope"]

    def test_set_under_leaf(self):
        spec = Composite(reward=Unbounded(1))
        with pytest.raises(ValueError, match=r"'reward' is a UnboundedContinuous, not a Composite"):
            spec["reward", "x"] = Unbounded(1)

    def test_keys_views(self):
        spec = env_spec()
        assert list(spec.keys()) == ["observation", "action", "reward", "done", "info"]
        nested = list(spec.keys(include_nested=True))
        assert ("info", "step_count") in nested and "info" in nested
        leaves = list(spec.keys(True, True))
        assert "info" not in leaves and ("info", "step_count") in leaves and len(leaves) == 5
        assert len(spec.keys(True, True)) == 5 and ("info", "step_count") in spec.keys(True)
        assert ("info", "step_count") not in spec.keys()
        assert dict(spec.items())["action"] is spec["action"]
        assert spec["info", "step_count"] in list(spec.values(True, True))
        assert "keys" in repr(spec.keys()).lower()

    def test_keys_is_leaf(self):
        # TorchRL: is_leaf says which entries leaves_only keeps; nested Composites are still entered
        spec = env_spec()
        keys = list(spec.keys(True, True, is_leaf=lambda cls: True))
        assert keys == ["observation", "action", "reward", "done", ("info", "step_count"), "info"]
        assert list(spec.keys(True, True, is_leaf=lambda cls: issubclass(cls, Composite))) == ["info"]

    def test_nested_keys_come_before_their_parent(self):
        assert list(env_spec().keys(True)) == ["observation", "action", "reward", "done", ("info", "step_count"), "info"]

    def test_step_mdp_static_only(self):
        # TorchRL: a Composite marked step_mdp_static is a leaf (not entered); other entries are unaffected
        spec = Composite(a=Unbounded(1), n=Composite(x=Unbounded(1)), static=Composite(z=Unbounded(1), step_mdp_static=True))
        assert list(spec.keys(True, True, step_mdp_static_only=True)) == ["a", ("n", "x"), "static"]
        assert list(spec.keys(True, step_mdp_static_only=True)) == ["a", ("n", "x"), "n", "static"]
        assert list(spec.keys(True, True)) == ["a", ("n", "x"), ("static", "z")]

    def test_iter_len_contains(self):
        spec = env_spec()
        assert list(spec) == list(spec.keys()) and len(spec) == 5

    def test_get_pop_set(self):
        spec = env_spec()
        assert spec.get("nope", None) is None
        with pytest.raises(KeyError):
            spec.get("nope")
        assert spec.set("extra", Unbounded(2)) is spec and "extra" in spec
        popped = spec.pop("extra")
        assert popped == Unbounded(2) and "extra" not in spec
        assert spec.pop("extra", 7) == 7

    def test_select_exclude(self):
        spec = env_spec()
        sel = spec.select("observation", ("info", "step_count"))
        assert list(sel.keys(True, True)) == ["observation", ("info", "step_count")]
        with pytest.raises(KeyError, match="available keys"):
            spec.select("nope")
        assert list(spec.select("nope", "reward", strict=False).keys()) == ["reward"]
        ex = spec.exclude("action", ("info", "step_count"))
        assert "action" not in ex and ("info", "step_count") not in ex and "info" in ex
        assert ("info", "step_count") in spec and "action" in spec  # untouched

    def test_update(self):
        spec = env_spec()
        spec.update({"reward": Unbounded(2), "info": Composite(other=Unbounded(1))})
        assert spec["reward"].shape == (2,)
        assert ("info", "step_count") in spec and ("info", "other") in spec
        other = Composite(new=Unbounded(1))
        spec.update(other)
        assert "new" in spec

    def test_separates_empty(self):
        spec = env_spec()
        out = spec.separates("reward", "done")
        assert list(out.keys()) == ["reward", "done"] and "reward" not in spec
        assert spec.separates("nope", default="none") == "none"
        empty = spec.empty()
        assert len(empty) == 0 and empty.shape == spec.shape and empty.is_empty()
        nested_empty = Composite(a=Composite(b=Composite()))
        assert not nested_empty.is_empty() and nested_empty.is_empty(recurse=True)


class TestLock:
    def test_locked_set_and_delete(self):
        spec = env_spec()
        spec.lock_()
        assert spec.is_locked and spec.locked and spec["info"].is_locked
        with pytest.raises(RuntimeError, match=r"Cannot set key 'new': the Composite is locked"):
            spec["new"] = Unbounded(1)
        with pytest.raises(RuntimeError, match=r"Cannot delete key 'reward'"):
            del spec["reward"]
        with pytest.raises(RuntimeError, match=r"Cannot set key \('info', 'x'\)"):
            spec["info", "x"] = Unbounded(1)
        with pytest.raises(RuntimeError, match="locked"):
            spec.shape = (1,)
        assert not spec.clone().is_locked
        spec.unlock_()
        spec["new"] = Unbounded(1)
        assert not spec["info"].is_locked

    def test_lock_not_recursive(self):
        spec = env_spec()
        spec.lock_(recurse=False)
        spec["info", "x"] = Unbounded(1)
        assert ("info", "x") in spec


class TestGenerate:
    def test_rand_zero_one(self):
        spec = env_spec()
        td = spec.rand()
        assert isinstance(td, TensorDict) and td.batch_size == () and spec.is_in(td)
        assert td["info", "step_count"].dtype == torch.int64 and td["done"].dtype == torch.bool
        z = spec.zero()
        assert not z["observation"].any() and spec.zeros().batch_size == ()
        assert bool(spec.one()["observation"].all()) and bool(spec.ones()["reward"].all())

    def test_rand_shape(self):
        spec = env_spec((3,))
        td = spec.rand((2,))
        assert td.batch_size == (2, 3) and td["info"].batch_size == (2, 3)
        assert td["action"].shape == (2, 3, 2) and spec.is_in(td)
        assert spec.rand(torch.Size([5])).batch_size == (5, 3)

    def test_device_propagates(self):
        spec = Composite(obs=Unbounded(1), device="cpu")
        spec["nested", "x"] = Unbounded(1)
        td = spec.rand()
        assert td.device == torch.device("cpu") and td["nested"].device == torch.device("cpu")
        assert Composite(obs=Unbounded(1)).rand().device is None

    def test_is_in_failures(self):
        spec = env_spec()
        td = spec.rand()
        td["action"] = torch.full((2,), 5.0)
        assert not spec.is_in(td)
        with pytest.raises(AssertionError, match=r"at key 'action'.*Value 5.0 at index \(0,\) is outside \[-1.0, 1.0\]"):
            spec.assert_is_in(td)
        td = spec.rand()
        del td["info", "step_count"]
        with pytest.raises(AssertionError, match=r"key \('info', 'step_count'\) is missing from the value"):
            spec.assert_is_in(td)
        td = spec.rand()
        td["info", "step_count"] = td["info", "step_count"].float()
        with pytest.raises(AssertionError, match=r"at key \('info', 'step_count'\): value has dtype torch.float32, expected torch.int64"):
            spec.assert_is_in(td)

    def test_type_check(self):
        spec = env_spec()
        spec.type_check(spec.rand())
        spec.type_check(torch.zeros(2), "action")
        with pytest.raises(TypeError, match="at key 'action': value has dtype torch.float64"):
            spec.type_check(torch.zeros(2, dtype=torch.float64), "action")
        bad = spec.rand()
        bad["info", "step_count"] = bad["info", "step_count"].float()
        with pytest.raises(TypeError, match="step_count"):
            spec.type_check(bad)
        with pytest.raises(TypeError, match="pass the key of the tensor"):
            spec.type_check(torch.zeros(2))

    def test_project(self):
        spec = env_spec()
        td = spec.rand()
        td["action"] = torch.tensor([3.0, -3.0])
        out = spec.project(td)
        assert out["action"].tolist() == [1.0, -1.0] and spec.is_in(out)

    def test_encode_to_numpy_round_trip(self):
        spec = env_spec()
        td = spec.rand()
        arrays = spec.to_numpy(td)
        assert set(arrays) == {"observation", "action", "reward", "done", "info"} and arrays["info"]["step_count"].shape == (1,)
        back = spec.encode(arrays)
        assert (back == td).all() and spec.is_in(back)

    def test_updates(self):
        spec = env_spec((2,))
        td = TensorDict({"other": torch.ones(4, 2)}, [4, 2])
        spec.zeros_update(td)
        assert td["observation"].shape == (4, 2, 4) and not td["observation"].any() and "other" in td.keys()
        spec.ones_update(td)
        assert bool(td["reward"].all())
        spec.rand_update(td)
        assert spec.is_in(td)

    def test_cardinality_enumerate(self):
        spec = Composite(a=Categorical(2), b=OneHot(3))
        spec["c", "d"] = Binary(1)
        assert spec.cardinality() == 12
        values = spec.enumerate()
        assert values.batch_size == (12,) and all(spec.is_in(v) for v in values.unbind(0))
        assert len({(int(v["a"]), int(v["b"].int().argmax()), int(v["c", "d"])) for v in values.unbind(0)}) == 12

    def test_index(self):
        spec = Composite(a=Categorical(3, shape=(2,)))
        values = TensorDict({"a": torch.arange(6.0).reshape(2, 3)}, [])
        with pytest.raises(NotImplementedError, match="`index` is not implemented for Composite"):
            spec.index(TensorDict({"a": torch.tensor([2, 0])}, []), values)

    def test_names(self):
        spec = env_spec((3,))
        spec.refine_names("env")
        assert spec.names == ["env"] and spec.rand().names == ["env"]
        # as in TorchRL: names are not padded for a larger generated batch (expand the spec first)
        with pytest.raises(ValueError, match=r"dim names \['env'\] do not match the 2 batch dims"):
            spec.rand((2,))
        assert spec.expand(2, 3).names == [None, "env"] and spec.expand(2, 3).rand().names == [None, "env"]
        with pytest.raises(RuntimeError, match="2 names for 1 dims"):
            spec.refine_names("a", "b")
        with pytest.raises(RuntimeError, match=r"cannot coerce Composite names \['env'\] with \('u',\)"):
            spec.refine_names("u")

    def test_names_and_dtype_keywords(self):
        # TorchRL 0.14.1: names= is an option (not an entry), dtype= is refused as an entry name
        spec = Composite(a=Unbounded((3, 2)), shape=(3,), names=["time"])
        assert list(spec.keys()) == ["a"] and spec.names == ["time"] and spec.zero().names == ["time"]
        assert spec.clone().names == ["time"] and spec.unsqueeze(0).names == [None, "time"]
        assert spec.unsqueeze(-1).names == ["time", None] and spec.unsqueeze(-1).squeeze(-1).names == ["time"]
        assert spec[0].names == [] and Composite(shape=(3,), names="t").names == ["t"]
        assert Composite(shape=(3, 2), names=["b", None]).rand().names == ["b", None]
        assert Composite(a=Unbounded((3, 2)), shape=(3,), names=None).names == [None]
        for reserved in ("dtype", "shape", "device", "space"):
            empty = Composite(shape=())
            with pytest.raises(AttributeError, match=rf"Composite\[{reserved}\] cannot be set"):
                empty[reserved] = Unbounded(1)
        with pytest.raises(AttributeError, match=r"Composite\[dtype\] cannot be set"):
            Composite(a=Unbounded((3, 2)), shape=(3,), dtype=torch.float64)
        # an entry that is not a spec: TorchRL raises AttributeError; ours is also a TypeError
        with pytest.raises(AttributeError, match="key 'lock' must be a TensorSpec, got bool"):
            Composite(shape=(3,), lock=True)
        with pytest.raises(TypeError, match="must be a TensorSpec"):
            Composite(a=3)

    def test_non_tensor_entry(self):
        spec = Composite(text=NonTensor(shape=(), example_data="hi"), obs=Unbounded(1))
        td = spec.rand()
        assert td["text"] == "hi" and spec.is_in(td)


class TestShapeOps:
    def test_expand(self):
        spec = env_spec()
        e = spec.expand(5)
        assert e.shape == (5,) and e["info", "step_count"].shape == (5, 1) and e["info"].shape == (5,)
        assert e.is_in(e.rand()) and spec.expand((5,)) == e and spec.expand(torch.Size([5])) == e
        e2 = env_spec((1,)).expand(3, 4)
        assert e2.shape == (3, 4) and e2["action"].shape == (3, 4, 2)
        with pytest.raises(ValueError, match="does not fit the spec's shape"):
            env_spec((2,)).expand(3)
        dynamic = env_spec((1,)).expand(3, -1)  # -1 makes the dim dynamic, as in TorchRL
        assert dynamic.shape == (3, -1) and dynamic["action"].shape == (3, -1, 2)

    def test_index_matches_td(self):
        spec = env_spec((4, 3))
        td = spec.rand()
        for idx in (0, slice(1, 3), (0, 1), (Ellipsis, 0), [0, 2], torch.tensor([True, False, True, False])):
            sub = spec[idx]
            assert sub.shape == td[idx].batch_size, idx
            assert sub.is_in(td[idx])
        with pytest.raises(IndexError, match="Composite"):
            spec[0, 0, 0]

    def test_unbind(self):
        spec = env_spec((3,))
        parts = spec.unbind(0)
        assert len(parts) == 3 and all(p == env_spec() for p in parts)
        assert torch.unbind(spec, 0) == parts

    def test_squeeze_unsqueeze(self):
        spec = env_spec((1, 3))
        assert spec.squeeze().shape == (3,) and spec.squeeze(0)["action"].shape == (3, 2)
        assert spec.squeeze(1) is spec
        u = env_spec((3,)).unsqueeze(0)
        assert u.shape == (1, 3) and u["info", "step_count"].shape == (1, 3, 1) and u.squeeze(0) == env_spec((3,))
        assert env_spec((3,)).unsqueeze(-1).shape == (3, 1)
        with pytest.raises(ValueError, match="out of range"):
            env_spec().unsqueeze(2)

    def test_reshape(self):
        spec = env_spec((2, 3))
        r = spec.reshape(6)
        assert r.shape == (6,) and r["action"].shape == (6, 2) and spec.reshape(-1) == r
        assert spec.view(3, 2).shape == (3, 2)
        with pytest.raises(ValueError, match="cannot reshape"):
            spec.reshape(4)

    def test_shape_setter(self):
        spec = env_spec((2,))
        spec.shape = ()
        assert spec.shape == () and spec.ndim == 0
        with pytest.raises(ValueError, match="key 'observation' has shape"):
            spec.shape = (3,)
        spec.batch_size = (2,)
        assert spec.batch_size == (2,)


class TestCopies:
    def test_clone_eq(self):
        spec = env_spec((2,))
        c = spec.clone()
        assert c == spec and c is not spec and c["info"] is not spec["info"]
        c["info", "step_count"] = Bounded(0, 5, shape=(2, 1), dtype=torch.int64)
        assert c != spec and spec["info", "step_count"].high.max() == 1000

    def test_eq(self):
        assert env_spec() != env_spec((1,)).squeeze(0).to("cpu")  # device differs (None vs cpu)
        assert env_spec() == env_spec()
        assert Composite(a=Unbounded(1)) != Composite(b=Unbounded(1))

    def test_to_device_and_dtype(self):
        spec = env_spec()
        moved = spec.to("cpu")
        assert moved.device == torch.device("cpu") and moved["info"].device == torch.device("cpu")
        assert moved.to("cpu") is moved
        assert spec.to(torch.float64)["observation"].dtype == torch.float64
        assert moved.clear_device_().device is None and moved["info"].device is None

    def test_device_setter(self):
        spec = env_spec()
        spec.device = "cpu"
        assert spec.device == torch.device("cpu") and spec["info"].device == torch.device("cpu")
        with pytest.raises(RuntimeError, match="clear_device_"):
            spec.device = None
        with pytest.raises(RuntimeError, match="key 'observation' is on cpu"):
            spec.device = "meta"

    def test_repr(self):
        text = repr(Composite(observation=Bounded(-1.0, 1.0, shape=(3,))))
        assert text.startswith("Composite(\n    observation: BoundedContinuous(\n        shape=torch.Size([3]),")
        assert text.endswith("    device=None,\n    shape=torch.Size([]),\n    data_cls=None)")


class TestStack:
    def test_equal_leaves_expand(self):
        spec = Bounded(-1.0, 1.0, shape=(3,))
        out = torch.stack([spec, spec.clone()], 0)
        assert type(out) is type(spec) and out.shape == (2, 3) and out.is_in(out.rand())
        assert torch.stack([spec, spec], dim=1).shape == (3, 2)
        assert torch.stack([spec, spec], -1).shape == (3, 2)

    def test_heterogeneous_leaves(self):
        a, b = Bounded(0.0, 1.0, shape=(2,)), Bounded(5.0, 6.0, shape=(2,))
        out = torch.stack([a, b], 0)
        assert isinstance(out, Stacked) and out.shape == (2, 2) and len(out) == 2
        x = out.rand()
        assert out.is_in(x) and bool((x[1] >= 5).all()) and out.rand((3,)).shape == (3, 2, 2)
        assert out[0] == a and out[1] == b and out.unbind(0) == [a, b]
        assert not out.is_in(torch.zeros(2, 2))
        with pytest.raises(AssertionError, match="stack index 1"):
            out.assert_is_in(torch.zeros(2, 2))
        assert out.clone() == out and out.expand(4, 2, 2).shape == (4, 2, 2)
        assert out[:, 0].shape == (2,) and out.unsqueeze(0).shape == (1, 2, 2)
        assert out.unsqueeze(0).squeeze(0) == out

    def test_heterogeneous_shapes(self):
        out = torch.stack([Unbounded(2), Unbounded(3)], 0)
        assert out.shape == (2, -1)
        with pytest.raises(ValueError, match="different shapes"):
            out.rand()
        assert out.is_in([torch.zeros(2), torch.zeros(3)])

    def test_stack_errors(self):
        with pytest.raises(ValueError, match="different classes"):
            torch.stack([Unbounded(2), Bounded(0.0, 1.0, shape=(2,))], 0)
        with pytest.raises(ValueError, match="same number of dims"):
            torch.stack([Unbounded(2), Unbounded((2, 2))], 0)
        with pytest.raises(ValueError, match="mix Composite"):
            torch.stack([Unbounded(2), Composite()], 0)

    def test_equal_composites_expand(self):
        out = torch.stack([env_spec(), env_spec()], 0)
        assert type(out) is Composite and out.shape == (2,) and out["info", "step_count"].shape == (2, 1)

    def test_stacked_composite(self):
        a = Composite(obs=Unbounded(3), extra=Unbounded(1))
        b = Composite(obs=Unbounded(4))
        out = torch.stack([a, b], 0)
        assert isinstance(out, StackedComposite) and isinstance(out, Composite)
        assert out.shape == (2,) and list(out.keys()) == ["obs"] and len(out) == 2  # len: stacked Composites
        td = out.rand()
        assert isinstance(td, LazyStackedTensorDict) and out.is_in(td)
        assert td[0]["extra"].shape == (1,) and td[1]["obs"].shape == (4,)
        assert isinstance(out["obs"], Stacked) and out[0] == a
        with pytest.raises(KeyError, match=r"missing from the stacked spec\(s\) at index \[1\]"):
            out["extra"]
        assert "0: ['extra']" in out.repr_exclusive_keys()
        assert out.zero((3,)).batch_size == (3, 2)

    def test_stacked_composite_set(self):
        out = torch.stack([Composite(obs=Unbounded(3)), Composite(obs=Unbounded(4))], 0)
        out["action"] = Categorical(2, shape=(2,))
        assert out[0]["action"].shape == () and out.is_in(out.rand())
        out["each"] = Unbounded(3)  # a spec without the stack dim: every stacked Composite gets a copy
        assert out[0]["each"] == Unbounded(3) and out["each"].shape == (2, 3)
        assert out.empty().shape == (2,) and len(out.empty().keys()) == 0
        out.lock_()
        with pytest.raises(RuntimeError, match="locked"):
            out["x"] = Categorical(2, shape=(2,))
        assert out.clone() == out

    def test_stacked_composite_nested_keys(self):
        a = Composite(agent=Composite(obs=Unbounded(3), pos=Unbounded(2)))
        b = Composite(agent=Composite(obs=Unbounded(5), pos=Unbounded(2)))
        out = torch.stack([a, b], 0)
        keys = list(out.keys(True, True))
        assert ("agent", "obs") in keys and ("agent", "pos") in keys
        assert out["agent", "pos"].shape == (2, 2) and not isinstance(out["agent", "pos"], Stacked)


class TestNesting:
    def test_nested_composite_with_longer_shape(self):
        spec = Composite(obs=Unbounded(2))
        spec["agents"] = Composite(pos=Unbounded((3, 2)), shape=(3,))
        td = spec.rand((4,))
        assert td.batch_size == (4,) and td["agents"].batch_size == (4, 3) and spec.is_in(td)
        assert spec.expand(5)["agents"].shape == (5, 3)

    def test_stacked_composite_inside_composite(self):
        agents = torch.stack([Composite(obs=Unbounded(3), extra=Unbounded(1)), Composite(obs=Unbounded(4))], 0)
        top = Composite(agents=agents)
        top["agents", "action"] = Categorical(3, shape=(2,))
        assert top["agents"][0]["action"] == Categorical(3) and top["agents", "action"] == Categorical(3, shape=(2,))
        td = top.rand()
        assert isinstance(td["agents"], LazyStackedTensorDict) and top.is_in(td)
        assert top.zero((3,))["agents"].batch_size == (3, 2)
        del top["agents", "action"]
        assert list(top.keys(True, True)) == [("agents", "obs")]
        expanded = top.expand(4)
        assert expanded["agents"].shape == (4, 2) and expanded.is_in(expanded.rand())
        assert top.clone() == top


def test_pickle_composite_and_stacks():
    import pickle

    specs = [
        env_spec((2,)),
        torch.stack([Unbounded(2), Unbounded(3)], 0),
        torch.stack([Composite(a=Unbounded(1)), Composite(a=Unbounded(2))], 0),
    ]
    for spec in specs:
        out = pickle.loads(pickle.dumps(spec))
        assert out == spec and type(out) is type(spec)


def test_failed_nested_set_leaves_composite_unchanged():
    import pytest
    import torch

    from torchrl.data import Composite, Unbounded

    spec = Composite(obs=Unbounded((4, 3)), shape=(4,))
    with pytest.raises(ValueError, match=r"\('agents', 'obs'\) has shape"):
        spec["agents", "obs"] = Unbounded((5, 3))
    assert list(spec.keys()) == ["obs"]
    spec["agents", "obs"] = Unbounded((4, 2, 3))
    assert spec["agents", "obs"].shape == torch.Size([4, 2, 3])
