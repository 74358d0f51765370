import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import EnvBase, PendulumEnv


class _SpeclessCounter(EnvBase):
    """An env written without specs: auto_specs_ must infer them."""

    def _reset(self, td, **kwargs):
        return TensorDict(observation=torch.zeros(3), done=torch.zeros(1, dtype=torch.bool))

    def _step(self, td):
        obs = td["observation"] + td["action"].sum()
        return TensorDict(observation=obs, reward=obs[:1], done=obs[:1] > 10)

    def _set_seed(self, seed):
        pass


def test_auto_specs_infers_from_a_policy_run():
    env = _SpeclessCounter(spec_locked=False)

    def policy(td):
        return td.set("action", torch.ones(2))

    env.auto_specs_(policy)
    assert env.observation_spec["observation"].shape == (3,)
    assert env.action_spec.shape == (2,)
    assert env.reward_spec.shape == (1,)
    assert set(env.done_keys) >= {"done", "terminated"}
    data = env.rollout(3, policy)
    assert data["next", "observation"][-1].tolist() == [6.0, 6.0, 6.0]


def test_compile_and_eager_give_the_same_steps():
    env = PendulumEnv(seed=0)
    env.compile(backend="eager")
    env.set_seed(0)
    torch.manual_seed(0)
    a = env.rollout(5)
    env.eager()
    env.set_seed(0)
    torch.manual_seed(0)
    b = env.rollout(5)
    torch.testing.assert_close(a["next", "observation"], b["next", "observation"])


def test_make_parallel_requires_batched_envs_module_message():
    # the hook is registered by torchrl.envs.batched_envs; the error names what to import when it is absent
    from torchrl.envs import _env_extras

    saved = _env_extras._EXTRA_HOOKS.pop("make_parallel", None)
    try:
        with pytest.raises(RuntimeError, match="needs torchrl.envs.batched_envs"):
            PendulumEnv.make_parallel(PendulumEnv, num_envs=2)
    finally:
        if saved is not None:
            _env_extras._EXTRA_HOOKS["make_parallel"] = saved
