"""Gym spaces ↔ TorchRL specs (``torchrl/envs/libs/_gym_specs.py``) and the per-step readers/writers."""
from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from torchrl.data.tensor_specs import (
    Binary,
    BoundedContinuous,
    BoundedDiscrete,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Stacked,
    Unbounded,
)
from torchrl.envs.libs._gym_specs import gym_space_to_spec, spec_to_gym_space
from torchrl.envs.libs._gym_utils import action_writer, obs_reader
from torchrl.envs.libs.gym import register_gym_spec_conversion

S = gymnasium.spaces

ROUND_TRIP_SPACES = [
    S.Box(-1.0, 1.0, (3,)),
    S.Box(np.array([-1.0, 0.0]), np.array([1.0, 5.0]), dtype=np.float64),
    S.Box(-np.inf, np.inf, (2, 2), np.float64),
    S.Box(0, 255, (4, 5, 3), np.uint8),
    S.Box(-3, 7, (2,), np.int32),
    S.Discrete(5),
    S.MultiDiscrete([2, 3, 4]),
    S.MultiDiscrete([[2, 2], [2, 2]]),
    S.MultiBinary(4),
    S.MultiBinary([2, 3]),
    S.Text(7),
    S.Text(5, min_length=2, charset="abc"),
    S.Dict({"a": S.Box(-1, 1, (2,)), "b": S.Dict({"c": S.Discrete(3), "d": S.MultiBinary(2)})}),
    S.Tuple((S.Box(-1, 1, (2,)), S.Discrete(3))),
    S.Tuple((S.Discrete(2), S.Dict({"x": S.Box(0, 1, (1,))}))),
]


@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("space", ROUND_TRIP_SPACES, ids=repr)
def test_space_spec_round_trip(space, categorical):
    spec = gym_space_to_spec(space, categorical_action_encoding=categorical)
    assert spec_to_gym_space(spec, backend=gymnasium) == space


@pytest.mark.parametrize(
    "space,cls,shape,dtype",
    [
        (S.Box(-1.0, 1.0, (3,)), BoundedContinuous, (3,), torch.float32),
        (S.Box(-1.0, 1.0, (3,), np.float64), BoundedContinuous, (3,), torch.float64),
        (S.Box(-np.inf, np.inf, (2,), np.float64), Unbounded, (2,), torch.float64),
        # bounds spanning the whole dtype are no bounds (as TorchRL): Unbounded
        (S.Box(0, 255, (4, 5, 3), np.uint8), Unbounded, (4, 5, 3), torch.uint8),
        (S.Box(0, 10, (4, 5, 3), np.uint8), BoundedDiscrete, (4, 5, 3), torch.uint8),
        (S.Box(-128, 127, (2,), np.int8), Unbounded, (2,), torch.int8),
        (S.Box(np.finfo(np.float32).min, np.finfo(np.float32).max, (2,)), Unbounded, (2,), torch.float32),
        (S.Box(-np.inf, 1.0, (2,)), BoundedContinuous, (2,), torch.float32),
        # a scalar Box is read as a (1,) entry (as TorchRL)
        (S.Box(-1.0, 1.0, ()), BoundedContinuous, (1,), torch.float32),
        (S.Box(-np.inf, np.inf, ()), Unbounded, (1,), torch.float32),
        (S.Discrete(5), OneHot, (5,), torch.int64),
        (S.MultiDiscrete([2, 3]), MultiOneHot, (5,), torch.int64),
        (S.MultiBinary(4), Binary, (4,), torch.int8),
    ],
)
def test_default_specs(space, cls, shape, dtype):
    spec = gym_space_to_spec(space)
    assert isinstance(spec, cls)
    assert spec.shape == torch.Size(shape)
    assert spec.dtype == dtype


def test_box_keeps_partially_infinite_bounds():
    # CartPole's observation: two finite, two infinite bounds -> Bounded with the infinities kept
    space = gymnasium.make("CartPole-v1").observation_space
    spec = gym_space_to_spec(space)
    assert isinstance(spec, BoundedContinuous)
    assert torch.equal(spec.space.high, torch.as_tensor(space.high))
    assert torch.isinf(spec.space.high[1])


def test_categorical_encoding():
    assert isinstance(gym_space_to_spec(S.Discrete(4), categorical_action_encoding=True), Categorical)
    spec = gym_space_to_spec(S.Discrete(4), categorical_action_encoding=True)
    assert spec.shape == torch.Size([]) and spec.n == 4
    multi = gym_space_to_spec(S.MultiDiscrete([2, 5]), categorical_action_encoding=True)
    assert isinstance(multi, MultiCategorical) and multi.nvec.tolist() == [2, 5]


def test_batch_size_prefix():
    spec = gym_space_to_spec(S.Dict({"a": S.Box(-1, 1, (2,)), "b": S.Discrete(3)}), batch_size=(4,))
    assert spec.shape == torch.Size([4])
    assert spec["a"].shape == torch.Size([4, 2])
    assert spec["b"].shape == torch.Size([4, 3])


def test_dict_state_key_becomes_observation():
    spec = gym_space_to_spec(S.Dict({"state": S.Box(-1, 1, (2,)), "pixels": S.Box(0, 255, (2, 2, 3), np.uint8)}))
    assert sorted(spec.keys()) == ["observation", "pixels"]
    nested = gym_space_to_spec(S.Dict({"outer": S.Dict({"state": S.Discrete(2)})}))
    assert list(nested["outer"].keys()) == ["state"]  # only the top level is renamed


def test_tuple_of_equal_spaces_stacks():
    spec = gym_space_to_spec(S.Tuple((S.Box(-1, 1, (2,)), S.Box(-1, 1, (2,)), S.Box(-1, 1, (2,)))))
    assert isinstance(spec, BoundedContinuous) and spec.shape == torch.Size([3, 2])
    blackjack = gym_space_to_spec(S.Tuple((S.Discrete(32), S.Discrete(11), S.Discrete(2))), categorical_action_encoding=True)
    assert isinstance(blackjack, Stacked) and blackjack.shape == torch.Size([3])
    assert [s.n for s in blackjack._stack] == [32, 11, 2]


def test_tuple_of_different_spaces_is_composite():
    spec = gym_space_to_spec(S.Tuple((S.Box(-1, 1, (2,)), S.Discrete(3))))
    assert isinstance(spec, Composite) and list(spec.keys()) == ["0", "1"]
    assert isinstance(spec["1"], OneHot)


def test_text_is_non_tensor():
    spec = gym_space_to_spec(S.Text(5, min_length=2, charset="xy"))
    assert isinstance(spec, NonTensor)
    sample = spec.rand()
    assert S.Text(5, min_length=2, charset="xy").contains(sample.data)


def test_unknown_space_raises():
    class Weird(S.Space):
        pass

    with pytest.raises(NotImplementedError, match="register_gym_spec_conversion"):
        gym_space_to_spec(Weird())


def test_register_custom_conversion():
    class Angle(S.Box):
        pass

    @register_gym_spec_conversion(Angle)
    def convert(space, device=None, batch_size=(), **kwargs):
        return Unbounded(shape=(*batch_size, *space.shape), dtype=torch.float16, device=device)

    spec = gym_space_to_spec(Angle(-1, 1, (2,)), batch_size=(3,))
    assert isinstance(spec, Unbounded) and spec.dtype == torch.float16 and spec.shape == torch.Size([3, 2])
    # subclasses of registered spaces find the registration through their MRO
    assert gym_space_to_spec(type("SubAngle", (Angle,), {})(-1, 1, (1,))).dtype == torch.float16


def test_register_by_name_and_bad_type():
    class Graphish(S.Space):
        pass

    register_gym_spec_conversion("Graphish")(lambda space, **kw: Unbounded(shape=(1,)))
    with pytest.raises(NotImplementedError):  # names only match classes of gym(nasium).spaces
        gym_space_to_spec(Graphish())
    with pytest.raises(TypeError, match="space class or its name"):
        register_gym_spec_conversion(3)


def test_spec_to_space_errors():
    with pytest.raises(NotImplementedError, match="no gym space"):
        spec_to_gym_space(NonTensor(shape=()), backend=gymnasium)


# ----------------------------------------------------------------------------------------------- readers/writers
def _decode(spec, value):
    """The gym-side value encoded in ``value`` (indices for one-hot specs)."""
    if isinstance(spec, MultiOneHot):
        return spec.to_categorical(value).numpy()
    if isinstance(spec, OneHot):
        return value.argmax(-1).numpy()
    return value.numpy()


@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize(
    "space",
    [
        S.Box(-1.0, 1.0, (3,), np.float64),
        S.Box(0, 255, (2, 2, 3), np.uint8),
        S.Discrete(6),
        S.Discrete(4, start=-2),
        S.MultiDiscrete([3, 5]),
        S.MultiDiscrete([3, 5], start=[1, -1]),
        S.MultiBinary(5),
    ],
    ids=repr,
)
@pytest.mark.parametrize("nb", [0, 1])
def test_leaf_reader_writer_round_trip(space, categorical, nb):
    space.seed(0)
    batch = (3,) if nb else ()
    spec = gym_space_to_spec(space, categorical_action_encoding=categorical, batch_size=batch)
    read, write = obs_reader(space, spec, nb), action_writer(space, spec, nb)
    raw = np.stack([space.sample() for _ in range(3)]) if nb else space.sample()
    tensor = read(raw)
    assert tensor.shape == spec.shape and tensor.dtype == spec.dtype
    assert spec.is_in(tensor)
    start = np.asarray(getattr(space, "start", 0))
    assert np.array_equal(_decode(spec, tensor), np.asarray(raw) - start)
    back = write(tensor)
    assert np.array_equal(np.asarray(back), np.asarray(raw))
    if not nb:
        assert space.contains(back)


def test_reader_copies_the_buffer():
    space = S.Box(-1, 1, (2,))
    read = obs_reader(space, gym_space_to_spec(space))
    buffer = np.zeros(2, np.float32)
    out = read(buffer)
    buffer[:] = 1
    assert out.tolist() == [0.0, 0.0]


def test_nested_dict_and_tuple_readers():
    space = S.Dict(
        {
            "state": S.Box(-1, 1, (2,)),
            "pair": S.Tuple((S.Discrete(3), S.Box(0, 1, (1,), np.float64))),
            "same": S.Tuple((S.Discrete(3), S.Discrete(4))),
            "text": S.Text(4),
        }
    )
    space.seed(1)
    spec = gym_space_to_spec(space, categorical_action_encoding=True)
    read = obs_reader(space, spec, 0)
    raw = space.sample()
    out = TensorDict(read(raw), batch_size=[])
    assert torch.equal(out["observation"], torch.as_tensor(raw["state"]))
    assert out["pair", "0"].item() == raw["pair"][0]
    assert out["pair", "1"].dtype == torch.float64
    assert out["same"].tolist() == list(raw["same"])
    assert out["text"] == raw["text"]
    assert spec.is_in(out)


def test_dict_and_tuple_action_writers():
    space = S.Dict({"move": S.Discrete(3), "arm": S.Tuple((S.Box(-1, 1, (2,)), S.MultiBinary(2)))})
    spec = gym_space_to_spec(space)
    write = action_writer(space, spec, 0)
    torch.manual_seed(0)
    action = spec.rand()
    gym_action = write(action)
    assert space.contains(gym_action)
    assert gym_action["move"] == int(action["move"].argmax())
    np.testing.assert_array_equal(gym_action["arm"][0], action["arm", "0"].numpy())


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    dtype=st.sampled_from([np.float32, np.float64, np.int16, np.uint8]),
    low=st.integers(-5, 0),
    width=st.integers(1, 5),
)
def test_box_round_trip_property(shape, dtype, low, width):
    space = S.Box(low, low + width, tuple(shape), dtype) if dtype != np.uint8 else S.Box(0, width, tuple(shape), dtype)
    spec = gym_space_to_spec(space)
    assert spec.dtype == torch.from_numpy(np.zeros(0, dtype)).dtype
    assert spec_to_gym_space(spec, backend=gymnasium) == space
    space.seed(0)
    sample = space.sample()
    assert torch.equal(obs_reader(space, spec)(sample), torch.from_numpy(sample))
