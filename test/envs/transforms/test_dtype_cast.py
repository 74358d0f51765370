import doctest
import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms._dtype_cast import DoubleToFloat, DTypeCastTransform
from torchrl.envs.transforms import _dtype_cast as dtype_cast_module

from test.envs.transforms._envs_batch_a import DoubleEnv
from test.envs.transforms.contract import TransformContract


class TestDoubleToFloatAuto(TransformContract):
    """No keys: every float64 entry of the specs is cast; actions and states are cast back."""

    def make_env(self, batch_size=()):
        return DoubleEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return DoubleToFloat()

    def test_keys_read_from_specs(self):
        t = DoubleToFloat()
        TransformedEnv(DoubleEnv(), t)
        assert t.in_keys == ["observation", "x", ("agent", "pos"), "reward"]
        assert t.in_keys_inv == ["action", "x"]

    def test_specs_cast_and_bounds_kept(self):
        env = TransformedEnv(DoubleEnv(), DoubleToFloat())
        obs = env.observation_spec["observation"]
        assert obs.dtype == torch.float32
        assert obs.low.tolist() == [-1.0] * 3 and obs.high.tolist() == [1.0] * 3
        assert env.observation_spec["agent", "pos"].dtype == torch.float32
        assert env.full_reward_spec["reward"].dtype == torch.float32
        assert env.full_action_spec["action"].dtype == torch.float32
        assert env.full_state_spec["x"].dtype == torch.float32
        assert env.base_env.full_action_spec["action"].dtype == torch.float64

    def test_values_match_base_env_and_actions_reach_it_as_float64(self):
        base = DoubleEnv(seed=3)
        env = TransformedEnv(DoubleEnv(seed=3), DoubleToFloat())
        td_b, td_t = base.reset(), env.reset()
        for a in (0.25, -0.5, 0.125):
            td_b["action"] = torch.tensor([a], dtype=torch.float64)
            td_t["action"] = torch.tensor([a], dtype=torch.float32)
            td_b, td_t = base.step(td_b), env.step(td_t)  # DoubleEnv raises unless it gets float64
            for key in ("observation", "x", ("agent", "pos"), "reward"):
                got = td_t["next", key]
                assert got.dtype == torch.float32
                torch.testing.assert_close(got, td_b["next", key].float())
            td_b, td_t = base.step_mdp(td_b), env.step_mdp(td_t)

    def test_inverse_casts_copy_only(self):
        t = DoubleToFloat()
        TransformedEnv(DoubleEnv(), t)
        td = TensorDict(action=torch.ones(1), x=torch.zeros(1))
        out = t.inv(td)
        assert out["action"].dtype == torch.float64 and out["x"].dtype == torch.float64
        assert td["action"].dtype == torch.float32

    def test_partial_reset_sends_float64_state(self):
        env = TransformedEnv(DoubleEnv(batch_size=(2,), seed=0), DoubleToFloat())
        td = env.reset()
        x_before = td["x"].clone()
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)  # DoubleEnv raises if the kept state arrives as float32
        assert out["x"].dtype == torch.float32
        torch.testing.assert_close(out["x"][1], x_before[1])

    def test_standalone_scans_dtypes(self):
        t = DoubleToFloat()
        td = TensorDict(a=torch.zeros(2, dtype=torch.float64), b=torch.zeros(2, dtype=torch.int64), n=TensorDict(c=torch.zeros(1, dtype=torch.float64)))
        t(td)
        assert td["a"].dtype == torch.float32 and td["n", "c"].dtype == torch.float32
        assert td["b"].dtype == torch.int64
        back = t.inv(TensorDict(a=torch.zeros(1)))
        assert back["a"].dtype == torch.float64


class TestDTypeCastExplicitKeys(TransformContract):
    def make_env(self, batch_size=()):
        return DoubleEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return DTypeCastTransform(
            torch.float64,
            torch.float32,
            in_keys=["observation", "x", ("agent", "pos"), "reward"],
            in_keys_inv=["action", "x"],
        )

    def test_only_given_keys(self):
        t = DoubleToFloat(in_keys=["a"])
        td = t(TensorDict(a=torch.zeros(1, dtype=torch.float64), b=torch.zeros(1, dtype=torch.float64)))
        assert td["a"].dtype == torch.float32 and td["b"].dtype == torch.float64
        assert t.in_keys_inv == []  # giving one side leaves the other empty

    def test_out_keys_keep_original(self):
        t = DoubleToFloat(in_keys=["a"], out_keys=["a32"])
        td = t(TensorDict(a=torch.full((2,), 1.5, dtype=torch.float64)))
        assert td["a"].dtype == torch.float64 and td["a32"].dtype == torch.float32
        assert td["a32"].tolist() == [1.5, 1.5]

    def test_renamed_action(self):
        t = DoubleToFloat(in_keys=["observation", "x", ("agent", "pos"), "reward"], in_keys_inv=["action", "x"], out_keys_inv=["action_f32", "x"])
        env = TransformedEnv(DoubleEnv(), t)
        assert list(env.full_action_spec.keys()) == ["action_f32"]
        assert env.full_action_spec["action_f32"].dtype == torch.float32
        check_env_specs(env, seed=0)
        td = env.rand_step(env.reset())
        assert "action_f32" in td.keys()

    def test_float32_to_float64_on_pendulum(self):
        env = TransformedEnv(PendulumEnv(seed=0), DTypeCastTransform(torch.float32, torch.float64))
        check_env_specs(env, seed=0)
        data = env.rollout(3)
        assert data["next", "observation"].dtype == torch.float64
        assert data["action"].dtype == torch.float64
        assert env.full_state_spec["params", "g"].dtype == torch.float64

    def test_missing_key_raises(self):
        with pytest.raises(KeyError, match=r"nope.* not found"):
            DoubleToFloat(in_keys=["nope"])(TensorDict(a=torch.zeros(1)))

    def test_missing_inverse_key_in_specs_raises(self):
        with pytest.raises(KeyError, match="throttle"):
            TransformedEnv(DoubleEnv(), DoubleToFloat(in_keys_inv=["throttle"]))

    def test_out_keys_without_in_keys(self):
        with pytest.raises(ValueError, match="out_keys=.* given without in_keys"):
            DoubleToFloat(out_keys=["a"])
        with pytest.raises(ValueError, match="out_keys_inv"):
            DoubleToFloat(out_keys_inv=["a"])

    def test_bad_dtype(self):
        with pytest.raises(TypeError, match="torch.dtype"):
            DTypeCastTransform("float64", torch.float32)


class TestDoubleToFloatOnFloat32Env(TransformContract):
    """On a float32 env nothing is float64: the transform is a no-op (and adds no inverse work)."""

    def make_transform(self):
        return DoubleToFloat()

    def test_noop(self):
        t = DoubleToFloat()
        env = TransformedEnv(PendulumEnv(seed=0), t)
        assert t.in_keys == [] and t.in_keys_inv == [] and not t._has_inverse
        td = TensorDict(action=torch.zeros(1))
        assert t.inv(td) is td
        assert env.rollout(2)["next", "observation"].dtype == torch.float32


def test_doctests():
    result = doctest.testmod(dtype_cast_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_without_in_keys_every_output_is_cast_even_with_in_keys_inv():
    # as TorchRL: in_keys=None casts every dtype_in output entry; in_keys_inv only names the inputs
    t = DTypeCastTransform(torch.float32, torch.float64, in_keys_inv=["action"])
    assert t.in_keys is None and t.in_keys_inv == ["action"]
    env = TransformedEnv(PendulumEnv(seed=0), t)
    assert env.observation_spec["observation"].dtype == torch.float64
    assert env.full_reward_spec["reward"].dtype == torch.float64
    assert env.full_action_spec["action"].dtype == torch.float64
    data = env.rollout(2, lambda td: td.set("action", torch.zeros(1, dtype=torch.float64)))
    assert data["next", "observation"].dtype == torch.float64


def test_keys_are_none_until_resolved_and_bounds_are_cast():
    t = DoubleToFloat()
    assert t.in_keys is None and t.out_keys is None and t.in_keys_inv is None and t.out_keys_inv is None
    env = TransformedEnv(PendulumEnv(), DTypeCastTransform(torch.float32, torch.float64, in_keys=["th"]))
    low = env.observation_spec["th"].space.low
    assert low.dtype == torch.float64 and low.item() == torch.finfo(torch.float32).min  # cast, not re-made


def test_named_entries_must_have_dtype_in():
    with pytest.raises(TypeError, match="casts from dtype_in=torch.float64"):
        TransformedEnv(PendulumEnv(), DoubleToFloat(in_keys=["observation"]))  # float32
