import doctest
import multiprocessing as mp

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms._group_env import AgentsEnv
from test.envs.transforms.contract import GroupContract, TransformContract
from torchrl.envs import (
    ParallelEnv,
    PendulumEnv,
    TransformedEnv,
    check_env_specs,
)
from torchrl.envs.transforms import ObservationNorm, VecNormV2
from torchrl.envs.transforms import _vecnorm_v2 as vecnorm_v2_module

X = torch.tensor([[1.0, 2.0], [3.0, 5.0], [4.0, 0.0]])
X2 = torch.tensor([[2.0, 2.0], [0.0, 1.0], [1.0, 1.0]])


def _state(t):
    return dict(t.state_dict()["_extra_state"])


def _step(t, value, batch=()):
    return t._step(TensorDict(batch_size=batch), TensorDict({"obs": value}, batch))["obs"]


def _shared_factory(shared, lock):
    return TransformedEnv(PendulumEnv(seed=0), VecNormV2(in_keys=["observation"], decay=1.0, shared_data=shared, lock=lock))


class TestVecNormV2(TransformContract, GroupContract):
    def make_transform(self):
        return VecNormV2(in_keys=["observation", "reward"], decay=0.99)

    def make_group_transform(self):
        return VecNormV2(in_keys=[("agents", "observation"), ("agents", "reward")],
                         out_keys=[("agents", "obs_n"), ("agents", "rew_n")], decay=1.0)

    def check_group(self, data):
        # per-agent statistics (the env ran check_env_specs before this rollout, so exact values depend on it)
        obs_n, rew_n = data["next", "agents", "obs_n"], data["next", "agents", "rew_n"]
        assert obs_n.shape == data["next", "agents", "observation"].shape and torch.isfinite(obs_n).all()
        assert rew_n.shape == data["next", "agents", "reward"].shape and torch.isfinite(rew_n).all()

    def test_group_known_answer(self):
        env = TransformedEnv(AgentsEnv(), self.make_group_transform())
        data = env.rollout(4, break_when_any_done=False)
        obs = torch.cat([data["agents", "observation"][:1], data["next", "agents", "observation"]])
        expected = (obs[-1] - obs.mean(0)) / obs.std(0, unbiased=False).clamp_min(1e-4)
        # E[x^2] - E[x]^2 in float32: a little cancellation
        torch.testing.assert_close(data["next", "agents", "obs_n"][-1], expected, atol=1e-3, rtol=1e-3)
        assert env.transform.loc[("agents", "observation")].shape == obs.shape[1:]  # one set per agent

    # -- known answers ------------------------------------------------------------------------------------
    def test_decay_one_is_numpy_mean_var(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0)
        g = torch.Generator().manual_seed(0)
        seen = []
        for _ in range(6):
            x = torch.randn(3, generator=g) * 2 + 1
            seen.append(x)
            out = _step(t, x)
        data = torch.stack(seen).numpy()
        np.testing.assert_allclose(t.loc["obs"].numpy(), data.mean(0), rtol=1e-5)
        np.testing.assert_allclose(t.scale["obs"].numpy(), data.std(0), rtol=1e-4)
        np.testing.assert_allclose(out.numpy(), (data[-1] - data.mean(0)) / data.std(0), rtol=1e-4)
        assert _state(t)["count.-|-.obs"].item() == 6 and _state(t)["count.-|-.obs"].dtype == torch.int64

    def test_decay_ema_by_hand(self):
        # decay 0.5, samples 1, 3, 4: loc = 0.5, 1.75, 2.875; var (2nd moment) = 0.5, 4.75, 10.375;
        # normalization after sample 3: c = 1 - 0.5^3 = 0.875, mean = 2.875 / c, std^2 = (10.375 - 2.875^2) / c
        t = VecNormV2(in_keys=["obs"], decay=0.5)
        outs = [_step(t, torch.tensor([v])).item() for v in (1.0, 3.0, 4.0)]
        state = _state(t)
        assert state["loc.-|-.obs"].item() == 2.875 and state["var.-|-.obs"].item() == 10.375
        mean, std = 2.875 / 0.875, ((10.375 - 2.875**2) / 0.875) ** 0.5
        assert outs[2] == pytest.approx((4 - mean) / std, rel=1e-5)
        # TorchRL 0.14.1 on the same input: outputs 0, 0.4444445, 0.4600436
        assert outs == pytest.approx([0.0, 0.4444445, 0.4600436], abs=1e-6)
        assert t.loc["obs"].item() == pytest.approx(mean) and t.scale["obs"].item() == pytest.approx(std)

    def test_per_element_statistics(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0)
        assert _step(t, X, (3,)).abs().max() == 0  # each element is its own mean after one sample
        out = _step(t, X2, (3,))
        torch.testing.assert_close(out, torch.tensor([[1.0, 0.0], [-1.0, -1.0], [-1.0, 1.0]]))
        assert _state(t)["loc.-|-.obs"].shape == (3, 2) and _state(t)["count.-|-.obs"].item() == 2

    def test_reduce_batch_dims(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0, reduce_batch_dims=True)
        _step(t, X, (3,))
        out = _step(t, X2, (3,))
        seen = torch.cat([X, X2])
        torch.testing.assert_close(t.loc["obs"], seen.mean(0))
        torch.testing.assert_close(out, (X2 - seen.mean(0)) / seen.std(0, unbiased=False))
        assert _state(t)["count.-|-.obs"].item() == 6
        # decay < 1: a batch of n weighs 1 - decay^n; TorchRL 0.14.1's numbers on the same input
        t = VecNormV2(in_keys=["obs"], decay=0.5, reduce_batch_dims=True)
        _step(t, X, (3,))
        out = _step(t, X2, (3,))
        torch.testing.assert_close(_state(t)["loc.-|-.obs"], torch.tensor([1.1667, 1.4219]), atol=1e-4, rtol=0)
        torch.testing.assert_close(out, torch.tensor([[0.7908, 0.6219], [-1.1502, -0.4975], [-0.1797, -0.4975]]),
                                   atol=1e-4, rtol=0)

    def test_eps_floors_std(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0, eps=0.01)
        _step(t, torch.tensor([2.0]))
        assert t.scale["obs"].item() == pytest.approx(0.01)

    def test_env_observation_and_reward(self):
        env = TransformedEnv(PendulumEnv(seed=0), VecNormV2(in_keys=["observation", "reward"],
                                                            out_keys=["obs_n", "rew_n"], decay=1.0))
        assert "obs_n" in env.observation_spec and "rew_n" in env.full_reward_spec
        check_env_specs(env, seed=0)
        env = TransformedEnv(PendulumEnv(seed=0), VecNormV2(in_keys=["observation", "reward"],
                                                            out_keys=["obs_n", "rew_n"], decay=1.0))
        data = env.rollout(6, break_when_any_done=False)
        state = _state(env.transform)
        assert state["count.-|-.observation"].item() == 7 and state["count.-|-.reward"].item() == 6  # reset: no reward
        obs = torch.cat([data["observation"][:1], data["next", "observation"]])
        torch.testing.assert_close(env.transform.loc["observation"], obs.mean(0))
        rewards = data["next", "reward"]
        torch.testing.assert_close(data["next", "rew_n"][-1],
                                   (rewards[-1] - rewards.mean(0)) / rewards.std(0, unbiased=False))
        torch.testing.assert_close(data["next", "reward"], rewards)  # the raw entry is kept

    # -- freezing and copies ----------------------------------------------------------------------------------
    def test_freeze_unfreeze_frozen_copy(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0)
        _step(t, torch.tensor([1.0]))
        _step(t, torch.tensor([3.0]))
        frozen = t.frozen_copy()
        assert frozen.frozen and not t.frozen
        _step(frozen, torch.tensor([100.0]))
        assert _state(t)["count.-|-.obs"].item() == 2  # the copy never updates
        _step(t, torch.tensor([5.0]))
        assert frozen.loc["obs"].item() == pytest.approx(3.0)  # ... but follows the original's statistics
        t.freeze()
        assert _step(t, torch.tensor([3.0])).item() == 0.0 and _state(t)["count.-|-.obs"].item() == 3
        t.unfreeze()
        _step(t, torch.tensor([3.0]))
        assert _state(t)["count.-|-.obs"].item() == 4
        with pytest.raises(RuntimeError, match="not initialized yet"):
            VecNormV2(in_keys=["obs"]).frozen_copy()

    def test_clone_is_independent(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0)
        _step(t, torch.tensor([1.0]))
        copy = t.clone()
        _step(copy, torch.tensor([3.0]))
        assert _state(t)["count.-|-.obs"].item() == 1 and _state(copy)["count.-|-.obs"].item() == 2

    def test_denorm_and_observation_norm(self):
        t = VecNormV2(in_keys=["obs"], out_keys=["obs_n"], decay=0.9)
        for x in (X, X2, X + 1):
            td = t._step(TensorDict(batch_size=[3]), TensorDict(obs=x, batch_size=[3]))
        raw = td["obs"].clone()
        del td["obs"]
        torch.testing.assert_close(t.denorm(td)["obs"], raw)
        norm = t.to_observation_norm()
        assert isinstance(norm, ObservationNorm)
        torch.testing.assert_close(norm(TensorDict(obs=raw, batch_size=[3]))["obs_n"], td["obs_n"])
        assert t.standard_normal

    # -- state ---------------------------------------------------------------------------------------------
    def test_state_dict_layout_and_round_trip(self):
        t = VecNormV2(in_keys=["obs", ("agents", "x")], decay=0.9)
        t._step(TensorDict(), TensorDict({"obs": torch.ones(2), ("agents", "x"): torch.ones(())}))
        sd = t.state_dict()
        assert list(sd) == ["initialized", "_extra_state"] and sd["initialized"].item()
        assert list(sd["_extra_state"]) == [  # as TorchRL
            "loc.-|-.obs", "loc.-|-.agents.-|-.x", "var.-|-.obs", "var.-|-.agents.-|-.x",
            "count.-|-.obs", "count.-|-.agents.-|-.x",
        ]
        fresh = VecNormV2(in_keys=["obs", ("agents", "x")], decay=0.9)
        fresh.load_state_dict(sd)
        for key, value in sd["_extra_state"].items():
            torch.testing.assert_close(_state(fresh)[key], value)
            assert _state(fresh)[key].data_ptr() != value.data_ptr()  # copied
        with pytest.warns(UserWarning, match="no statistics yet"):
            VecNormV2(in_keys=["obs"]).state_dict()

    def test_load_shared_state_binds(self):
        t = VecNormV2(in_keys=["obs"], decay=1.0)
        _step(t, torch.tensor([1.0]))
        shared = {k: v.clone().share_memory_() for k, v in _state(t).items()}
        other = VecNormV2(in_keys=["obs"], decay=1.0)
        other.load_state_dict({"initialized": torch.tensor(True), "_extra_state": shared})
        _step(other, torch.tensor([3.0]))
        assert shared["count.-|-.obs"].item() == 2 and shared["loc.-|-.obs"].item() == 2.0

    def test_statistics_shared_across_parallel_workers(self):
        base = PendulumEnv()
        shared = TensorDict(
            loc=TensorDict(observation=torch.zeros(3)), var=TensorDict(observation=torch.zeros(3)),
            count=TensorDict(observation=torch.zeros((), dtype=torch.int64)),
        ).share_memory_()
        base.close()
        lock = mp.Lock()  # one lock for every worker: updates of the shared statistics do not interleave
        env = ParallelEnv(2, lambda: _shared_factory(shared, lock), mp_start_method="fork")
        try:
            env.rollout(4, break_when_any_done=False)
        finally:
            env.close(raise_if_closed=False)
        # both workers wrote into the same statistics: 2 x (1 reset + 4 steps)
        assert shared["count", "observation"].item() == 10
        assert shared["loc", "observation"].abs().sum() > 0

    # -- stateless -------------------------------------------------------------------------------------------
    def test_stateless_statistics_travel_with_data(self):
        t = VecNormV2(in_keys=["observation"], decay=1.0, stateful=False)
        assert t.in_keys == ["observation", "_vecnorm_count", "_vecnorm_loc", "_vecnorm_var"]
        env = TransformedEnv(PendulumEnv(seed=0), t)
        assert ("_vecnorm_loc", "observation") in env.observation_spec.keys(True, True)
        count_spec = env.observation_spec["_vecnorm_count", "observation"]
        assert count_spec.dtype == torch.int64 and count_spec.shape == (3,)  # one count per element, as TorchRL
        check_env_specs(env, seed=0)
        stateful = TransformedEnv(PendulumEnv(seed=0), VecNormV2(in_keys=["observation"], decay=1.0))
        env.set_seed(0)
        stateful.set_seed(0)
        torch.manual_seed(0)
        a = env.rollout(5, break_when_any_done=False)
        torch.manual_seed(0)
        b = stateful.rollout(5, break_when_any_done=False)
        torch.testing.assert_close(a["next", "observation"], b["next", "observation"])  # same numbers
        assert a["next", "_vecnorm_count", "observation"][:, 0].tolist() == [2, 3, 4, 5, 6]
        raw = TransformedEnv(PendulumEnv(seed=0), VecNormV2(in_keys=["observation"], out_keys=["n"], decay=1.0))
        raw.set_seed(0)
        torch.manual_seed(0)
        c = raw.rollout(5, break_when_any_done=False)
        seen = torch.cat([c["observation"][:1], c["next", "observation"]])
        torch.testing.assert_close(a["next", "_vecnorm_loc", "observation"][-1], seen.mean(0))  # decay 1: the mean

    def test_stateless_known_answers(self):
        # TorchRL 0.14.1 on the same input (decay 0.5, batch of 2): the same numbers as the stateful maths
        t = VecNormV2(in_keys=["obs"], decay=0.5, stateful=False)
        root = t._reset(TensorDict(batch_size=[2]), TensorDict(obs=torch.tensor([[1.0, 2.0], [3.0, 4.0]]), batch_size=[2]))
        assert root["obs"].abs().max() == 0 and root["_vecnorm_count", "obs"].tolist() == [[1, 1], [1, 1]]
        out = t._step(root, TensorDict(obs=torch.tensor([[3.0, 5.0], [0.0, 1.0]]), batch_size=[2]))
        torch.testing.assert_close(out["obs"], torch.tensor([[0.4444, 0.4082], [-0.6667, -0.5774]]), atol=1e-4, rtol=0)
        torch.testing.assert_close(out["_vecnorm_loc", "obs"], torch.tensor([[1.75, 3.0], [0.75, 1.5]]))
        torch.testing.assert_close(out["_vecnorm_var", "obs"], torch.tensor([[4.75, 13.5], [2.25, 4.5]]))
        assert root["_vecnorm_loc", "obs"].tolist() == [[0.5, 1.0], [1.5, 2.0]]  # the input's statistics are kept
        t.freeze()
        frozen = t._step(out.clone(), TensorDict(obs=torch.tensor([[3.0, 5.0], [0.0, 1.0]]), batch_size=[2]))
        assert frozen["_vecnorm_count", "obs"].tolist() == [[2, 2], [2, 2]]
        assert dict(t.state_dict()) == {"_extra_state": {}}

    def test_stateless_errors(self):
        t = VecNormV2(in_keys=["obs"], stateful=False)
        with pytest.raises(RuntimeError, match="stateless"):
            t.loc
        with pytest.raises(RuntimeError, match="stateless"):
            t.frozen_copy()
        with pytest.raises(RuntimeError, match="reduce_batch_dims=True and stateful=False"):
            VecNormV2(in_keys=["obs"], stateful=False, reduce_batch_dims=True)

    # -- errors ----------------------------------------------------------------------------------------------
    def test_errors(self):
        with pytest.raises(ValueError, match="decay must be in"):
            VecNormV2(in_keys=["obs"], decay=1.5)
        with pytest.raises(ValueError, match="eps must be positive"):
            VecNormV2(in_keys=["obs"], eps=0.0)
        with pytest.raises(ValueError, match="differ in length"):
            VecNormV2(in_keys=["obs"], out_keys=["a", "b"])
        with pytest.raises(KeyError, match="bonus.* is neither an observation nor a reward"):
            TransformedEnv(PendulumEnv(), VecNormV2(in_keys=["bonus"]))
        t = VecNormV2(in_keys=["obs"])
        with pytest.raises(KeyError, match="key 'obs' not found"):
            t(TensorDict(other=torch.zeros(1)))
        _step(t, torch.zeros(3))
        with pytest.raises(RuntimeError, match=r"'obs' has shape \(4,\), but its statistics have shape \(3,\)"):
            _step(t, torch.zeros(4))

def test_doctests():
    result = doctest.testmod(vecnorm_v2_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
