"""EnvPool pools under ``MultiThreadedEnv`` / ``MultiThreadedEnvWrapper``.

The reference for every rollout is the same pool stepped by hand (same seed, same actions), restarting
finished sub-envs with EnvPool's own ``reset(env_id)``: the wrapper must give exactly those numbers, keep
each episode's final observation in ``"next"`` and start the next episode from the observation EnvPool
itself would have produced.
"""
from __future__ import annotations

import doctest
import re
import warnings

import numpy as np
import pytest
import torch
from tensordict import TensorDict

envpool = pytest.importorskip("envpool")

from torchrl.data.tensor_specs import Bounded, Categorical, OneHot, Unbounded  # noqa: E402
from torchrl.envs import check_env_specs  # noqa: E402
from torchrl.envs.common import EnvBase  # noqa: E402
from torchrl.envs.libs import envpool as envpool_module  # noqa: E402
from torchrl.envs.libs.envpool import MultiThreadedEnv, MultiThreadedEnvWrapper  # noqa: E402
from torchrl.envs.transforms import StepCounter, TransformedEnv  # noqa: E402

N = 3
pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered.*")


def _pool(task: str, n: int = N, env_type: str = "gymnasium", **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return envpool.make(task, env_type=env_type, num_envs=n, **kwargs)


def _actions(task: str, steps: int, n: int = N, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    if task == "CartPole-v1":
        return torch.as_tensor(rng.integers(0, 2, size=(steps, n)))
    return torch.as_tensor(rng.uniform(-2, 2, size=(steps, n, 1)).astype(np.float32))


def _replay(pool, actions: torch.Tensor) -> dict[str, np.ndarray]:
    """Steps ``pool`` by hand with ``actions``; restarts finished sub-envs with ``pool.reset(ids)``."""
    obs, _ = pool.reset()
    rows = {"observation": [], "next_observation": [], "reward": [], "terminated": [], "truncated": []}
    for a in actions.numpy():
        rows["observation"].append(obs.copy())
        nxt, reward, terminated, truncated, _ = pool.step(a)
        rows["next_observation"].append(nxt)
        rows["reward"].append(reward)
        rows["terminated"].append(terminated)
        rows["truncated"].append(truncated)
        obs = nxt.copy()
        ended = np.flatnonzero(terminated | truncated).astype(np.int32)
        if ended.size:
            fresh, info = pool.reset(ended)
            obs[info["env_id"]] = fresh
    return {k: np.stack(v, 1) for k, v in rows.items()}  # (n, T, ...)


def _assert_matches(td: TensorDict, ref: dict[str, np.ndarray]) -> None:
    np.testing.assert_array_equal(td["observation"].numpy(), ref["observation"])
    np.testing.assert_array_equal(td["next", "observation"].numpy(), ref["next_observation"])
    np.testing.assert_array_equal(td["next", "reward"].squeeze(-1).numpy(), ref["reward"])
    np.testing.assert_array_equal(td["next", "terminated"].squeeze(-1).numpy(), ref["terminated"])
    np.testing.assert_array_equal(td["next", "truncated"].squeeze(-1).numpy(), ref["truncated"])
    np.testing.assert_array_equal(td["next", "done"].squeeze(-1).numpy(), ref["terminated"] | ref["truncated"])


# ------------------------------------------------------------------------------------------------- specs
def test_cartpole_specs():
    env = MultiThreadedEnv(N, "CartPole-v1")
    assert env.batch_size == torch.Size([N])
    obs = env.observation_spec["observation"]
    assert isinstance(obs, Bounded) and obs.shape == torch.Size([N, 4]) and obs.dtype == torch.float32
    assert obs.space.high[0, 0].item() == pytest.approx(4.8) and obs.space.high[0, 1].item() == float("inf")
    assert isinstance(env.action_spec, OneHot) and env.action_spec.shape == torch.Size([N, 2])
    assert isinstance(env.reward_spec, Unbounded) and env.reward_spec.shape == torch.Size([N, 1])
    assert env.reward_spec.dtype == torch.float32
    assert sorted(env.done_keys) == ["done", "terminated", "truncated"]
    assert env.full_done_spec["truncated"].shape == torch.Size([N, 1]) and env.full_done_spec["done"].dtype == torch.bool
    assert env.device == torch.device("cpu")
    check_env_specs(env, break_when_any_done="both")


def test_categorical_action_encoding():
    env = MultiThreadedEnv(N, "CartPole-v1", categorical_action_encoding=True)
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == torch.Size([N])
    assert env.action_spec.n == 2
    check_env_specs(env)


def test_pendulum_specs():
    env = MultiThreadedEnv(2, "Pendulum-v1")
    action = env.action_spec
    assert isinstance(action, Bounded) and action.shape == torch.Size([2, 1])
    assert action.space.low.flatten().tolist() == [-2.0, -2.0] and action.space.high.flatten().tolist() == [2.0, 2.0]
    obs = env.observation_spec["observation"]
    assert obs.space.high[0].tolist() == [1.0, 1.0, 8.0] and obs.space.low[0].tolist() == [-1.0, -1.0, -8.0]
    check_env_specs(env, break_when_any_done="both")


def test_default_float_bounds_are_unbounded():
    # EnvPool leaves unbounded float observations at C++'s numeric_limits min (smallest *positive*) / max
    pool = _pool("BipedalWalker-v3", 2)
    raw = pool.spec.gymnasium_observation_space
    assert raw.low[0] > 0  # the quirk this handles
    env = MultiThreadedEnvWrapper(pool)
    assert isinstance(env.observation_spec["observation"], Unbounded)
    check_env_specs(env)


def test_dict_observation_space():
    env = MultiThreadedEnv(2, "MiniGrid-Empty-5x5-v0", create_env_kwargs={"seed": 1})
    assert set(env.observation_spec.keys()) == {"direction", "image", "mission"}
    assert isinstance(env.observation_spec["direction"], OneHot) and env.observation_spec["direction"].shape == (2, 4)
    assert env.observation_spec["image"].shape == (2, 7, 7, 3) and env.observation_spec["image"].dtype == torch.uint8
    check_env_specs(env, break_when_any_done="both")
    td = env.rollout(4, break_when_any_done=False)
    assert td["next", "image"].shape == (2, 4, 7, 7, 3)


# ------------------------------------------------------------------------------------------------- data
@pytest.mark.parametrize(
    "task,kwargs", [("CartPole-v1", {}), ("Pendulum-v1", {"max_episode_steps": 7})], ids=["cartpole", "pendulum"]
)
def test_rollout_equals_raw_envpool(task, kwargs):
    steps = 60
    actions = _actions(task, steps)
    env = MultiThreadedEnv(N, task, create_env_kwargs={"seed": 3, **kwargs}, categorical_action_encoding=True)
    td = env.rollout(steps, actions=actions, break_when_any_done=False)
    ref = _replay(_pool(task, seed=3, **kwargs), actions)
    assert (ref["terminated"] | ref["truncated"]).sum() >= 3  # several episodes ended in the rollout
    _assert_matches(td, ref)


def test_one_hot_actions_reach_envpool_as_indices():
    steps = 40
    actions = _actions("CartPole-v1", steps)
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 0})
    td = env.rollout(steps, actions=torch.nn.functional.one_hot(actions, 2), break_when_any_done=False)
    _assert_matches(td, _replay(_pool("CartPole-v1", seed=0), actions))


def test_new_episode_starts_where_envpool_autoreset_would():
    # a single sub-env: after an episode ends, EnvPool's own next step would ignore the action and return
    # the new episode's first observation; the wrapper must put that observation at the root, not in "next"
    env = MultiThreadedEnv(1, "CartPole-v1", create_env_kwargs={"seed": 7}, categorical_action_encoding=True)
    actions = torch.ones(30, 1, dtype=torch.int64)  # always push right: the pole falls within ~10 steps
    td = env.rollout(30, actions=actions, break_when_any_done=False)
    end = int(td["next", "done"][0, :, 0].nonzero()[0])
    raw = _pool("CartPole-v1", 1, seed=7)
    raw.reset()
    for _ in range(end + 1):
        final, _, terminated, _, _ = raw.step(np.ones(1, np.int64))
    assert terminated[0]
    restarted, reward, _, _, info = raw.step(np.ones(1, np.int64))  # EnvPool's autoreset step
    assert info["elapsed_step"][0] == 0 and reward[0] == 0
    np.testing.assert_array_equal(td["next", "observation"][0, end].numpy(), final[0])
    np.testing.assert_array_equal(td["observation"][0, end + 1].numpy(), restarted[0])
    assert not torch.equal(td["observation"][0, end + 1], td["next", "observation"][0, end])


def test_dm_pool_equals_gymnasium_pool():
    steps = 40
    actions = _actions("Pendulum-v1", steps)
    out = {}
    for env_type in ("gymnasium", "dm"):
        env = MultiThreadedEnvWrapper(_pool("Pendulum-v1", env_type=env_type, seed=2, max_episode_steps=9))
        check_env_specs(env)
        out[env_type] = env.rollout(steps, actions=actions, break_when_any_done=False)
    assert out["dm"]["next", "truncated"].any()
    assert not out["dm"]["next", "terminated"].any()  # dm_env's discount says 0 here; the state's trunc flag does not
    for key in out["gymnasium"].keys(True, True):
        torch.testing.assert_close(out["dm"][key], out["gymnasium"][key], rtol=0, atol=0, msg=str(key))


def test_terminated_vs_truncated():
    pendulum = MultiThreadedEnv(2, "Pendulum-v1", create_env_kwargs={"max_episode_steps": 5})
    td = pendulum.rollout(5)
    assert td["next", "truncated"][:, :4].sum() == 0 and td["next", "truncated"][:, 4].all()
    assert not td["next", "terminated"].any()
    assert torch.equal(td["next", "done"], td["next", "truncated"])
    cartpole = MultiThreadedEnv(2, "CartPole-v1", create_env_kwargs={"seed": 0}, categorical_action_encoding=True)
    td = cartpole.rollout(100, actions=torch.ones(100, 2, dtype=torch.int64), break_when_any_done=False)
    assert td["next", "terminated"].any() and not td["next", "truncated"].any()
    assert torch.equal(td["next", "done"], td["next", "terminated"])


# ------------------------------------------------------------------------------------------------- resets
def test_partial_reset_restarts_only_masked_sub_envs():
    actions = _actions("CartPole-v1", 3)
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 4}, categorical_action_encoding=True)
    twin = _pool("CartPole-v1", seed=4)
    td = env.reset()
    twin.reset()
    for a in actions:
        td = env.step_mdp(env.step(td.set("action", a)))
        twin.step(a.numpy())
    before = td["observation"].clone()
    td.set("_reset", torch.tensor([[False], [True], [False]]))
    out = env.reset(td)
    assert "_reset" not in out.keys()
    fresh, info = twin.reset(np.array([1], np.int32))
    np.testing.assert_array_equal(out["observation"][1].numpy(), fresh[0])
    assert torch.equal(out["observation"][[0, 2]], before[[0, 2]])
    assert not out["done"].any()
    # the pool carries on from there: sub-env 1 restarted, the others untouched
    td = env.step(out.set("action", actions[0]))
    ref = twin.step(actions[0].numpy())[0]
    np.testing.assert_array_equal(td["next", "observation"].numpy(), ref)


def test_reset_with_empty_mask_changes_nothing():
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 0})
    td = env.rand_step(env.reset())
    td = env.step_mdp(td)
    out = env.reset(td.clone().set("_reset", torch.zeros(N, 1, dtype=torch.bool)))
    assert torch.equal(out["observation"], td["observation"])


def test_step_and_maybe_reset_matches_generic_path():
    actions = _actions("CartPole-v1", 50)
    envs = [MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 9}, categorical_action_encoding=True) for _ in range(2)]
    fast, generic = envs[0].reset(), envs[1].reset()
    ends = 0
    for a in actions:
        out_fast, fast = envs[0].step_and_maybe_reset(fast.set("action", a))
        out_generic, generic = EnvBase.step_and_maybe_reset(envs[1], generic.set("action", a))
        assert (out_fast == out_generic).all()
        assert (fast == generic.exclude("_reset")).all()
        done = out_fast["next", "done"].squeeze(-1)
        if done.any():
            ends += 1
            assert not fast["done"].any()
            assert not torch.equal(fast["observation"][done], out_fast["next", "observation"][done])
    assert ends >= 2


def test_step_after_episode_end_without_reset_raises():
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 0}, categorical_action_encoding=True)
    td = env.reset()
    push = torch.ones(N, dtype=torch.int64)
    while True:
        td = env.step(td.set("action", push))
        if td["next", "done"].any():
            break
        td = env.step_mdp(td)
    ended = td["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist()
    td = env.step_mdp(td)
    with pytest.raises(RuntimeError, match=re.escape(f"sub-envs {ended} finished their episode and were not reset")):
        env.step(td.set("action", push))
    td = env.maybe_reset(td)  # the documented remedy
    env.step(td.set("action", push))


def test_break_when_any_done_then_continue():
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 0})
    first = env.rollout(200)
    assert first["next", "done"][:, -1].any()
    second = env.rollout(5, auto_reset=False, tensordict=env.step_mdp(first[..., -1]), break_when_any_done=False)
    assert second.shape == torch.Size([N, 5])


def test_step_before_reset_raises():
    env = MultiThreadedEnv(N, "CartPole-v1")
    td = env.full_observation_spec.zero().update(env.full_action_spec.rand())
    with pytest.raises(RuntimeError, match="has not been reset since its pool was built; call env.reset"):
        env.step(td)


def test_step_counter_truncation_resets_base_sub_envs():
    env = TransformedEnv(MultiThreadedEnv(N, "Pendulum-v1", create_env_kwargs={"seed": 0}), StepCounter(max_steps=4))
    td = env.rollout(10, break_when_any_done=False)
    assert td["next", "truncated"][:, 3].all() and td["next", "truncated"][:, 7].all()
    assert td["step_count"][0, :, 0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]


# ------------------------------------------------------------------------------------------------- options
def test_seeding_rebuilds_the_pool():
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 0})
    env.set_seed(5)
    a = env.reset()["observation"]
    env.set_seed(5)
    b = env.reset()["observation"]
    env.set_seed(6)
    c = env.reset()["observation"]
    assert torch.equal(a, b) and not torch.equal(a, c)
    made = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 5}).reset()["observation"]
    assert torch.equal(a, made)  # sub-env i gets seed + i, as with envpool.make(seed=...)
    assert env._env.config["seed"] == 6
    assert env.set_seed(2**40) != 2**40  # a 64-bit seed is folded into EnvPool's int32 range
    env.reset()


def test_frame_skip_sums_rewards_and_stops_at_episode_end():
    steps, skip = 12, 3
    actions = _actions("CartPole-v1", steps)
    env = MultiThreadedEnv(N, "CartPole-v1", create_env_kwargs={"seed": 1}, frame_skip=skip, categorical_action_encoding=True)
    td = env.rollout(steps, actions=actions, break_when_any_done=False)
    pool = _pool("CartPole-v1", seed=1)
    pool.reset()
    for t in range(steps):
        total = np.zeros(N, np.float32)
        alive = np.ones(N, bool)
        last = None
        for k in range(skip):
            ids = np.flatnonzero(alive).astype(np.int32)
            if not ids.size:
                break
            obs, reward, terminated, truncated, info = pool.step(actions[t].numpy()[ids], ids)
            if last is None:
                last = obs
            else:
                last[info["env_id"]] = obs
            total[info["env_id"]] += reward
            alive[info["env_id"][terminated | truncated]] = False
        np.testing.assert_array_equal(td["next", "observation"][:, t].numpy(), last)
        np.testing.assert_array_equal(td["next", "reward"][:, t, 0].numpy(), total)
        np.testing.assert_array_equal(td["next", "done"][:, t, 0].numpy(), ~alive)
        if (~alive).any():
            pool.reset(np.flatnonzero(~alive).astype(np.int32))
    assert (td["next", "reward"] < skip).any()  # some repeat was cut short by an episode end


def test_wrapper_properties_and_close():
    env = MultiThreadedEnv(N, "CartPole-v1")
    assert env.lib is envpool
    assert "CartPole-v1" in MultiThreadedEnv.available_envs
    assert env.num_workers == N and env.env_name == "CartPole-v1"
    assert repr(env) == "MultiThreadedEnv(env=CartPole-v1, num_workers=3, device=cpu)"
    assert env.config["num_envs"] == N  # unknown attributes fall through to the pool
    td = env.reset()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.rand_step(td)


def test_wrapper_batch_size_and_run_type_checks():
    pool = _pool("Pendulum-v1", 2)
    env = MultiThreadedEnvWrapper(pool, batch_size=[2], run_type_checks=True)
    assert env.run_type_checks and env.batch_size == torch.Size([2])
    env.rollout(3)


# ------------------------------------------------------------------------------------------------- errors
def test_unknown_task_lists_close_matches():
    with pytest.raises(ValueError, match=r"'CartPole-v9' is not an EnvPool task id\. Close matches: \['CartPole-v"):
        MultiThreadedEnv(2, "CartPole-v9")


@pytest.mark.parametrize(
    "args,kwargs,exc,match",
    [
        ((0, "CartPole-v1"), {}, ValueError, "num_workers must be a positive integer, got 0"),
        ((2, 3), {}, TypeError, "env_name must be an EnvPool task id"),
        ((2, "CartPole-v1"), {"create_env_kwargs": {"num_envs": 3}}, ValueError, r"create_env_kwargs\['num_envs'\]=3 contradicts num_workers=2"),
        ((2, "CartPole-v1"), {"create_env_kwargs": {"batch_size": 1}}, ValueError, "asynchronous pools are not supported"),
        ((2, "CartPole-v1"), {"create_env_kwargs": [("seed", 0)]}, TypeError, "create_env_kwargs must be a dict, got list"),
        ((2, "CartPole-v1"), {"frame_skip": 0}, ValueError, "frame_skip must be an integer >= 1, got 0"),
        ((2, "CartPole-v1"), {"from_pixelz": True}, TypeError, r"unexpected keyword argument\(s\) \['from_pixelz'\]"),
    ],
)
def test_builder_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        MultiThreadedEnv(*args, **kwargs)


def test_wrapper_errors():
    with pytest.raises(TypeError, match="expected an EnvPool pool .* got builtins.dict"):
        MultiThreadedEnvWrapper({})
    with pytest.raises(TypeError, match="pass the pool to wrap"):
        MultiThreadedEnvWrapper()
    with pytest.raises(ValueError, match=r"the pool is asynchronous \(batch_size=1, num_envs=2\)"):
        MultiThreadedEnvWrapper(_pool("CartPole-v1", 2, batch_size=1))
    with pytest.raises(ValueError, match=r"batch_size \(3,\) contradicts the pool's num_envs=2"):
        MultiThreadedEnvWrapper(_pool("CartPole-v1", 2), batch_size=[3])
    env = MultiThreadedEnv(2, "CartPole-v1")
    with pytest.raises(TypeError, match=r"reset: unexpected keyword argument\(s\) \['seed'\]"):
        env.reset(seed=0)


def test_doctests():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = doctest.testmod(envpool_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0


def test_has_envpool_flag():
    assert envpool_module._has_envpool is True  # this module only runs with envpool installed
