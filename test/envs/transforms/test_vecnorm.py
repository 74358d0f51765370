import doctest
import multiprocessing
import pickle
import warnings

import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import Compose, PendulumEnv, TransformedEnv
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl._utils import _deprecation
from torchrl.envs.transforms.vecnorm import VecNorm, VecNormV2
from torchrl.envs.transforms import vecnorm as vecnorm_module

from test.envs.transforms._envs_batch_a import PosVelEnv
from test.envs.transforms.contract import TransformContract


def _obs(*rows):
    return TensorDict(obs=torch.tensor(rows, dtype=torch.float32).reshape(len(rows), -1), batch_size=[len(rows)])


class TestVecNorm(TransformContract):
    def make_transform(self):
        return VecNorm(in_keys=["observation", "reward"], decay=0.99)

    def test_known_answer_cumulative(self):
        t = VecNorm(in_keys=["obs"], decay=1.0)
        assert t(_obs(1.0, 3.0))["obs"].squeeze(-1).tolist() == [-1.0, 1.0]  # mean 2, std 1
        out = t(_obs(5.0))["obs"].item()  # sum 9, ssq 35, count 3: mean 3, var 35/3 - 9
        assert out == pytest.approx(2.0 / (35 / 3 - 9) ** 0.5, rel=1e-5)
        assert t.loc["obs"].item() == pytest.approx(3.0)

    def test_known_answer_decay(self):
        t = VecNorm(in_keys=["obs"], decay=0.5)
        t(_obs(2.0))
        out = t(_obs(4.0))["obs"].item()  # sum 5, ssq 18, count 1.5
        mean, var = 5 / 1.5, 18 / 1.5 - (5 / 1.5) ** 2
        assert out == pytest.approx((4 - mean) / var**0.5, rel=1e-5)
        assert t._td["obs_count"].item() == pytest.approx(1.5)

    def test_eps_floors_std(self):
        t = VecNorm(in_keys=["obs"], eps=0.25)
        assert t(_obs(1.0, 1.0))["obs"].abs().max().item() == 0.0
        assert t.scale["obs"].item() == 0.25

    def test_freeze_unfreeze_and_eval(self):
        t = VecNorm(in_keys=["obs"], decay=1.0)
        t(_obs(1.0, 3.0))
        assert t.freeze() is t and t.frozen
        assert t(_obs(100.0))["obs"].item() == 98.0
        assert t.loc["obs"].item() == 2.0
        t.unfreeze().eval()
        t(_obs(100.0))
        assert t.loc["obs"].item() == 2.0  # eval mode does not update either
        t.train()
        t(_obs(5.0))
        assert t.loc["obs"].item() == 3.0

    def test_frozen_copy_follows_source(self):
        t = VecNorm(in_keys=["obs"], decay=1.0)
        with pytest.raises(RuntimeError, match="not initialized"):
            t.frozen_copy()
        t(_obs(1.0, 3.0))
        copy = t.frozen_copy()
        assert copy.frozen and not t.frozen
        copy(_obs(50.0))
        assert t.loc["obs"].item() == 2.0  # the copy never updates
        t(_obs(5.0))
        assert copy.loc["obs"].item() == 3.0  # but it reads the source's statistics

    def test_to_observation_norm(self):
        t = VecNorm(in_keys=["obs"], decay=1.0)
        t(_obs(1.0, 2.0, 6.0))
        norm = t.to_observation_norm()
        assert isinstance(norm, ObservationNorm) and norm.standard_normal
        data = _obs(4.0, -1.0)
        expected = t.freeze()(data.clone())["obs"]
        torch.testing.assert_close(norm(data.clone())["obs"], expected)
        t(_obs(100.0))  # later updates do not reach the static copy (t is frozen here anyway)
        two = VecNorm(in_keys=["a", "b"])
        two(TensorDict(a=torch.ones(2, 1), b=torch.zeros(2, 2), batch_size=[2]))
        both = two.to_observation_norm()
        assert isinstance(both, Compose) and [n.in_keys for n in both] == [["a"], ["b"]]

    def test_denorm_round_trip(self):
        t = VecNorm(in_keys=["obs"], out_keys=["obs_n"], decay=1.0)
        t(_obs(1.0, 2.0, 6.0))
        t.freeze()
        td = t(_obs(4.0, -1.0))
        td["obs"] = torch.zeros_like(td["obs"])
        torch.testing.assert_close(t.denorm(td)["obs"].squeeze(-1), torch.tensor([4.0, -1.0]))

    def test_state_dict_round_trip_in_place(self):
        t = VecNorm(in_keys=["obs"], decay=1.0)
        t(_obs(1.0, 3.0))
        fresh = VecNorm(in_keys=["obs"])
        fresh.load_state_dict(t.state_dict())
        assert fresh.loc["obs"].item() == 2.0 and fresh.scale["obs"].item() == 1.0
        shared = VecNorm.build_td_for_shared_vecnorm(PendulumEnv(), keys=["reward"])
        holder = VecNorm(in_keys=["reward"], shared_td=shared)
        holder.load_state_dict(_trained_reward_state())
        assert holder._td is shared and shared["reward_sum"].item() == 2.0  # restored in place

    def test_batched_env_counts_every_sub_env(self):
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=[3]), VecNorm(decay=1.0))
        env.rollout(2)
        assert env.transform._td["observation_count"].item() == 9.0  # reset (3) + 2 steps (6)
        assert env.transform._td["reward_count"].item() == 6.0

    def test_missing_key_raises(self):
        with pytest.raises(KeyError, match="reward.* not found"):
            VecNorm()(TensorDict(observation=torch.zeros(1, 3), batch_size=[1]))

    def test_shape_mismatch_raises(self):
        t = VecNorm(in_keys=["obs"])
        t(_obs(1.0, 2.0))
        with pytest.raises(RuntimeError, match="feature shape"):
            t(TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="decay"):
            VecNorm(decay=0.0)
        with pytest.raises(ValueError, match="shapes"):
            VecNorm(in_keys=["a", "b"], shapes=[(1,)])


def _trained_reward_state():
    t = VecNorm(in_keys=["reward"], decay=1.0)
    t(TensorDict(reward=torch.tensor([[2.0]]), batch_size=[1]))
    return t.state_dict()


class TestVecNormNested(TransformContract):
    def make_env(self, batch_size=()):
        return PosVelEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return VecNorm(in_keys=[("agent", "speed"), "position"], decay=0.9)

    def test_nested_statistics_entries(self):
        t = self.make_transform()
        env = TransformedEnv(self.make_env(), t)
        env.rollout(3)
        assert set(t._td.keys(True, True)) >= {("agent", "speed_sum"), ("agent", "speed_ssq"), ("agent", "speed_count"), "position_sum"}
        assert env.observation_spec["agent", "speed"].__class__.__name__ == "UnboundedContinuous"


def _child_step(vecnorm):
    vecnorm(TensorDict(observation=torch.full((4, 3), 2.0), batch_size=[4]))


class TestSharedVecNorm:
    def test_build_td(self):
        td = VecNorm.build_td_for_shared_vecnorm(PendulumEnv(batch_size=[2]))
        assert td.is_shared()
        assert td["observation_sum"].shape == (3,) and td["reward_ssq"].shape == (1,)
        assert td["observation_count"].shape == ()
        with pytest.raises(KeyError, match="pixels.* is neither an observation nor a reward"):
            VecNorm.build_td_for_shared_vecnorm(PendulumEnv(), keys=["pixels"])

    def test_instances_share_statistics(self):
        td = VecNorm.build_td_for_shared_vecnorm(PendulumEnv(), keys=["observation"])
        a = VecNorm(in_keys=["observation"], shared_td=td, decay=1.0)
        b = VecNorm(in_keys=["observation"], shared_td=td, decay=1.0)
        a(TensorDict(observation=torch.ones(2, 3), batch_size=[2]))
        assert b.loc["observation"].tolist() == [1.0, 1.0, 1.0]
        assert td["observation_count"].item() == 2.0

    def test_shared_across_processes(self):
        td = VecNorm.build_td_for_shared_vecnorm(PendulumEnv(), keys=["observation"])
        t = VecNorm(in_keys=["observation"], shared_td=td, decay=1.0)
        proc = multiprocessing.get_context("fork").Process(target=_child_step, args=(t,))
        proc.start()
        proc.join(30)
        assert proc.exitcode == 0
        assert td["observation_count"].item() == 4.0
        assert t.loc["observation"].tolist() == [2.0, 2.0, 2.0]

    def test_unshared_td_rejected(self):
        with pytest.raises(RuntimeError, match="shared memory"):
            VecNorm(shared_td=TensorDict(observation_sum=torch.zeros(3)))


def test_doctests():
    result = doctest.testmod(vecnorm_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_state_dict_layout_as_torchrl():
    env = TransformedEnv(PendulumEnv(seed=0), VecNorm(in_keys=["observation", "reward"]))
    env.rollout(3)
    state = env.transform.state_dict()["_extra_state"]
    assert set(state) == {f"{k}_{s}" for k in ("observation", "reward") for s in ("sum", "ssq", "count")}
    assert state["observation_sum"].shape == (3,) and state["observation_count"].shape == (1,)
    fresh = VecNorm(in_keys=["observation", "reward"])
    fresh.load_state_dict(env.transform.state_dict())
    td = TensorDict(observation=torch.ones(3), reward=torch.ones(1))
    fresh.freeze()
    env.transform.freeze()
    torch.testing.assert_close(fresh(td.clone())["observation"], env.transform(td.clone())["observation"])


class TestNewApi:
    """``VecNorm(..., new_api=True)`` is TorchRL's way to build a ``VecNormV2``; without the flag it warns."""

    @staticmethod
    def _forget_warnings():
        _deprecation._WARNED.difference_update({vecnorm_module._DEFAULT_API_WARNING, vecnorm_module._LEGACY_WARNING})

    def test_new_api_returns_a_vecnorm_v2(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning with new_api=True
            t = VecNorm(["observation"], new_api=True, decay=0.5, eps=1e-3)
        assert type(t) is VecNormV2 and not isinstance(t, VecNorm)  # as TorchRL: a VecNormV2, not a VecNorm
        assert t.in_keys == ["observation"] and (t.decay, t.eps) == (0.5, 1e-3)
        env = TransformedEnv(PendulumEnv(seed=0), t)
        env.rollout(2)
        assert int(t.state_dict()["_extra_state"]["count.-|-.observation"]) == 3  # reset + 2 steps

    def test_new_api_known_answer(self):
        t = VecNorm(in_keys=["obs"], new_api=True, decay=1.0)
        t(TensorDict(obs=torch.tensor([2.0])))
        out = t(TensorDict(obs=torch.tensor([4.0])))["obs"].item()  # mean 3, var 10 - 9 = 1
        assert out == pytest.approx(1.0)

    def test_new_api_rejects_legacy_arguments(self):
        with pytest.raises(TypeError, match="takes no 'shared_td': pass shared_data"):
            VecNorm(in_keys=["obs"], new_api=True, shared_td=None)
        with pytest.raises(TypeError, match="takes no 'shapes'"):
            VecNorm(in_keys=["obs"], new_api=True, shapes=[(1,)])
        with pytest.raises(TypeError, match="in_keys"):
            VecNorm(new_api=True)  # VecNormV2 has no default keys (as TorchRL)

    def test_default_warns_once_about_new_api(self):
        self._forget_warnings()
        with pytest.warns(FutureWarning, match="pass new_api=True to get a VecNormV2"):
            t = VecNorm(in_keys=["obs"])
        assert type(t) is VecNorm
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            VecNorm(in_keys=["obs"])  # once per process

    def test_legacy_choice_still_warns_deprecation(self):
        self._forget_warnings()
        with pytest.warns(FutureWarning, match="to be deprecated in favor of torchrl.envs.VecNormV2"):
            t = VecNorm(in_keys=["obs"], new_api=False, decay=0.5)
        assert type(t) is VecNorm and t.decay == 0.5
        assert type(t.clone()) is VecNorm and type(pickle.loads(pickle.dumps(t))) is VecNorm

    def test_vecnorm_v2_importable_from_the_vecnorm_module(self):
        from torchrl.envs.transforms import VecNormV2 as exported

        assert vecnorm_module.VecNormV2 is exported is VecNormV2


def test_set_extra_state_adopts_shared_tensors():
    source = VecNorm(in_keys=["obs"], decay=1.0)
    source(_obs(1.0, 3.0))
    state = source.get_extra_state()
    for value in state.values():
        value.share_memory_()
    holder = VecNorm(in_keys=["obs"], decay=1.0)
    holder(_obs(10.0))  # its own statistics exist already: they are replaced by the shared ones
    holder.set_extra_state(state)
    holder(_obs(5.0))  # count 3, sum 9: written into the shared tensors
    assert state["obs_count"].item() == 3.0 and state["obs_sum"].item() == 9.0
    copied = VecNorm(in_keys=["obs"], decay=1.0)
    copied.set_extra_state(source.get_extra_state())  # not shared: copied
    copied(_obs(5.0))
    assert source.loc["obs"].item() == 2.0 and copied.loc["obs"].item() == 3.0
