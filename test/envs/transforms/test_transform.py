"""Transform (the base class): key defaults and the data path, as TorchRL 0.14.1."""
import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import ObservationTransform, Transform


class Double(Transform):
    def _apply_transform(self, x):
        return x * 2

    def _inv_apply_transform(self, x):
        return x / 2


def test_out_keys_default_to_empty_on_the_base_class():
    t = Transform(in_keys=["a", ("b", "c")], in_keys_inv=["action"])
    assert t.in_keys == ["a", ("b", "c")] and t.out_keys == []
    assert t.in_keys_inv == ["action"] and t.out_keys_inv == []
    assert ObservationTransform().in_keys == ["observation", "pixels"] and ObservationTransform().out_keys == []
    assert Transform(in_keys="a", out_keys="b").out_keys == ["b"]


def test_in_keys_without_out_keys_raise_on_call():
    with pytest.raises(ValueError, match=r"in_keys \['a'\] and out_keys \[\] differ in length"):
        Double(in_keys=["a"])(TensorDict(a=torch.ones(2)))
    with pytest.raises(ValueError, match="differ in length"):
        Double(in_keys=["a", "b"], out_keys=["c"])(TensorDict(a=torch.ones(1), b=torch.ones(1)))
    with pytest.raises(ValueError, match=r"in_keys_inv \['action'\] and out_keys_inv \[\]"):
        Double(in_keys_inv=["action"]).inv(TensorDict(action=torch.ones(1)))


def test_in_place_and_renamed_calls():
    td = Double(in_keys=["a"], out_keys=["a"])(TensorDict(a=torch.ones(2)))
    assert td["a"].tolist() == [2.0, 2.0]
    td = Double(in_keys=["a"], out_keys=["b"])(TensorDict(a=torch.ones(2)))
    assert td["a"].tolist() == [1.0, 1.0] and td["b"].tolist() == [2.0, 2.0]
    inv = Double(in_keys_inv=["action"], out_keys_inv=["act"]).inv(TensorDict(act=torch.tensor([4.0])))
    assert inv["action"].tolist() == [2.0]


def test_missing_key_and_tolerance():
    t = Double(in_keys=["nope"], out_keys=["nope"])
    with pytest.raises(KeyError, match="nope"):
        t(TensorDict(a=torch.zeros(2)))
    t.set_missing_tolerance(True)
    assert list(t(TensorDict(a=torch.zeros(2))).keys()) == ["a"]
