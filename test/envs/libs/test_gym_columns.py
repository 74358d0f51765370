"""The column-wise gym loop (``torchrl/envs/libs/_gym_columns.py``) gives exactly what the generic step loop gives."""
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl._fast import fast_paths_enabled, set_fast_paths
from torchrl.collectors import Collector
from torchrl.envs import GymEnv, StepCounter, TransformedEnv
from torchrl.envs.gym_like import default_info_dict_reader


class CartPolePolicy(nn.Module):
    """Deterministic, not very good: episodes end after a few dozen steps."""

    def forward(self, obs):
        push_right = (obs[..., 1] > 0).long()  # pushes along the cart velocity: the pole falls soon
        return torch.nn.functional.one_hot(push_right, 2)


class PendulumPolicy(nn.Module):
    """Two outputs: the action and an extra entry (as a policy writing ``loc`` would)."""

    def forward(self, obs):
        loc = (obs[..., :1] * 1.5).clamp(-2, 2)
        return loc, loc * 2


def _policy(name):
    if name == "CartPole-v1":
        return TensorDictModule(CartPolePolicy(), in_keys=["observation"], out_keys=["action"])
    return TensorDictModule(PendulumPolicy(), in_keys=["observation"], out_keys=["action", "loc"])


def _generic(env):
    env._column_loop = lambda policy: None  # the instance attribute hides the method: generic loop
    return env


def _assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    assert a.batch_size == b.batch_size
    for key in a.keys(True, True):
        va, vb = a.get(key), b.get(key)
        assert va.dtype == vb.dtype and va.shape == vb.shape, key
        torch.testing.assert_close(va, vb, msg=f"entry {key}")


def _pair(name, seed=3, **kwargs):
    envs = []
    for generic in (False, True):
        env = GymEnv(name, **kwargs)
        env.set_seed(seed)
        env.rand_step(env.reset())  # validated: the column-wise loop applies from now on
        env.set_seed(seed)
        envs.append(_generic(env) if generic else env)
    return envs


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("break_when_any_done", [True, False])
@pytest.mark.parametrize("set_truncated", [False, True])
def test_rollout_matches_generic(name, break_when_any_done, set_truncated):
    fast, slow = _pair(name)
    policy = _policy(name)
    assert (fast._column_loop(policy) is not None) is fast_paths_enabled()  # a fast path: off with the switch
    steps = 300 if name == "CartPole-v1" else 450  # several CartPole episodes; Pendulum truncates at 200
    a = fast.rollout(steps, policy, break_when_any_done=break_when_any_done, set_truncated=set_truncated)
    b = slow.rollout(steps, policy, break_when_any_done=break_when_any_done, set_truncated=set_truncated)
    _assert_same(a, b)
    if not break_when_any_done:
        assert a.shape == (steps,) and int(a["next", "done"].sum()) >= 2  # crossed episode ends


def test_random_rollout_matches_generic():
    fast, slow = _pair("CartPole-v1")
    torch.manual_seed(0)
    a = fast.rollout(200, break_when_any_done=False)
    torch.manual_seed(0)
    b = slow.rollout(200, break_when_any_done=False)
    _assert_same(a, b)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("set_truncated", [False, True])
def test_collector_matches_generic(name, set_truncated):
    batches = []
    for env in _pair(name):
        collector = Collector(env, _policy(name), frames_per_batch=64, total_frames=64 * 8, set_truncated=set_truncated)
        batches.append(list(collector))
        collector.shutdown()
    for a, b in zip(*batches):
        _assert_same(a, b)
    ids = torch.cat([b["collector", "traj_ids"] for b in batches[0]])
    assert int(ids.max()) >= 2  # trajectories ended inside and across batches


def test_collector_state_survives_switching_loops():
    # random frames first (generic or column-wise alike), then the policy: trajectory ids stay consistent
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    collector = Collector(env, _policy("CartPole-v1"), frames_per_batch=50, total_frames=300, init_random_frames=100)
    data = torch.cat([b["collector", "traj_ids"] for b in collector])
    collector.shutdown()
    assert (data.diff() >= 0).all()  # ids never go back
    assert data[0] == 0


def test_bad_action_shape_names_the_key():
    env, _ = _pair("Pendulum-v1")
    bad = TensorDictModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"])
    with pytest.raises(ValueError, match="action"):
        env.rollout(5, bad)


def test_not_used_where_it_does_not_apply():
    env, _ = _pair("CartPole-v1")
    policy = _policy("CartPole-v1")
    if not fast_paths_enabled():
        assert env._column_loop(policy) is None
        return
    assert env._column_loop(policy) is not None
    # a hooked policy, a probabilistic / non-plain callable, an unknown input key
    hooked = _policy("CartPole-v1")
    hooked.register_forward_hook(lambda *args: None)
    assert env._column_loop(hooked) is None
    assert env._column_loop(lambda td: td) is None
    other = TensorDictModule(CartPolePolicy(), in_keys=["other"], out_keys=["action"])
    assert env._column_loop(other) is None
    # a root TensorDict with entries the loop does not carry
    td = env.reset()
    assert env._column_loop(policy).accepts(td)
    td["extra"] = torch.zeros(())
    assert not env._column_loop(policy).accepts(td)
    # transforms, info readers, vectorized envs
    assert TransformedEnv(env, StepCounter())._column_loop(policy) is None
    reader = GymEnv("CartPole-v1").set_info_dict_reader(default_info_dict_reader(["x"]))
    assert reader._column_loop(policy) is None
    vec = GymEnv("CartPole-v1", num_envs=2)
    vec.rollout(2)
    assert vec._column_loop(policy) is None


def test_extra_root_entries_keep_the_generic_path():
    fast, slow = _pair("CartPole-v1")
    policy = _policy("CartPole-v1")
    start = [e.reset(TensorDict({"extra": torch.ones(())}, [])) for e in (fast, slow)]
    a = fast.rollout(20, policy, auto_reset=False, tensordict=start[0], break_when_any_done=False)
    b = slow.rollout(20, policy, auto_reset=False, tensordict=start[1], break_when_any_done=False)
    _assert_same(a, b)
    assert (a["extra"] == 1).all()


class _TensorDictOutput(nn.Module):
    def forward(self, obs):
        loc = (obs[..., :1] * 1.5).clamp(-2, 2)
        return loc, TensorDict({"scaled": loc * 2}, obs.shape[:-1])


def test_non_tensor_outputs_take_the_generic_loop():
    fast, slow = _pair("Pendulum-v1")
    policy = TensorDictModule(_TensorDictOutput(), in_keys=["observation"], out_keys=["action", "extra"])
    assert (fast._column_loop(policy) is not None) is fast_paths_enabled()  # planned, then given up before the first step
    a = fast.rollout(30, policy, break_when_any_done=False)
    b = slow.rollout(30, policy, break_when_any_done=False)
    _assert_same(a, b)
    assert a["extra", "scaled"].shape == (30, 1)
    collector = Collector(_pair("Pendulum-v1")[0], policy, frames_per_batch=10, total_frames=20)
    assert [batch["extra", "scaled"].shape for batch in collector] == [(10, 1), (10, 1)]
    collector.shutdown()


def test_fast_paths_off_takes_the_generic_loop_with_the_same_result():
    fast, slow = _pair("CartPole-v1")
    policy = _policy("CartPole-v1")
    a = fast.rollout(100, policy, break_when_any_done=False)
    with set_fast_paths(False):
        assert fast._column_loop(policy) is None
        assert fast._row_stepper(["action"], [torch.zeros(2)], [], []) is None
        b = slow.rollout(100, policy, break_when_any_done=False)
    _assert_same(a, b)
