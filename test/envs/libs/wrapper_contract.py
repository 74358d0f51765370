"""The contract every env wrapper meets; each wrapper's test module subclasses ``WrapperContract``.

A subclass provides ``make_env(seed=...)`` (a fresh wrapped env; the contract closes it) and may set
``steps``. The contract then checks, for free: specs agree with data (``check_env_specs``), reset and step
give TorchRL's keys and shapes (observations, ``reward``, ``done``/``terminated``/``truncated`` with
``done == terminated | truncated``), a rollout has the env's batch dims then a time dim named ``"time"``,
seeding makes rollouts reproducible (``set_seed`` returns the next seed, as TorchRL's chain), random actions
stay inside the action spec, the wrapper composes with a transform and with ``SerialEnv``, and ``close``
is final (a second ``close`` raises ``RuntimeError`` unless ``raise_if_closed=False``).

Adding a wrapper (``torchrl/envs/libs/<library>.py``): subclass ``_EnvWrapper`` (``torchrl/envs/libs/_wrapper.py``),
then write ``test/envs/libs/test_<library>.py`` with one ``class TestMyWrapperContract(WrapperContract)``
per kind of task (discrete/continuous actions, batched pools, ...) besides the library's own tests.
"""
from __future__ import annotations

import pytest
import torch

from torchrl.envs import SerialEnv, StepCounter, TransformedEnv, check_env_specs


class WrapperContract:
    #: rollout length used by the contract checks
    steps = 6

    def make_env(self, seed: int | None = None):
        raise NotImplementedError

    def _env(self, seed: int | None = 0):
        env = self.make_env(seed=seed)
        self._opened = getattr(self, "_opened", [])
        self._opened.append(env)
        return env

    def teardown_method(self):
        for env in getattr(self, "_opened", []):
            if not env.is_closed:
                env.close()
        self._opened = []

    def test_contract_specs_agree_with_data(self):
        check_env_specs(self._env(), seed=0)

    def test_contract_reset_and_step_keys(self):
        env = self._env()
        td = env.reset()
        assert td.batch_size == env.batch_size
        for key in env.observation_spec.keys(True, True):
            assert key in td.keys(True, True), key
        for key in env.done_keys:
            assert td.get(key).dtype == torch.bool, key
        td = env.rand_step(td)
        nxt = td.get("next")
        for key in (*env.reward_keys, *env.done_keys, *env.observation_spec.keys(True, True)):
            assert key in nxt.keys(True, True), key
        done, terminated, truncated = (nxt.get(k) for k in ("done", "terminated", "truncated"))
        assert torch.equal(done, terminated | truncated)

    def test_contract_rollout_shape_and_time_dim(self):
        env = self._env()
        data = env.rollout(self.steps, break_when_any_done=False)
        assert data.batch_size == (*env.batch_size, self.steps)
        assert data.names[-1] == "time"
        assert data.get(("next", "reward")).shape[: data.batch_dims] == data.batch_size

    def test_contract_seeded_rollouts_repeat(self):
        runs = []
        for _ in range(2):
            env = self._env(seed=None)
            next_seed = env.set_seed(3)
            torch.manual_seed(0)
            runs.append((next_seed, env.rollout(self.steps, break_when_any_done=False)))
        (seed_a, a), (seed_b, b) = runs
        assert seed_a == seed_b
        assert (a == b).all()

    def test_contract_random_actions_in_spec(self):
        env = self._env()
        data = env.rollout(self.steps, break_when_any_done=False)
        for t in range(self.steps):
            assert env.full_action_spec.is_in(data[..., t].select(*env.action_keys)), t

    def test_contract_with_a_transform_and_serial_env(self):
        env = TransformedEnv(self._env(), StepCounter(self.steps))
        data = env.rollout(self.steps, break_when_any_done=False)
        assert int(data.get(("next", "step_count")).max()) <= self.steps
        serial = SerialEnv(2, lambda: self.make_env(seed=None))
        try:
            check_env_specs(serial, seed=0)
        finally:
            serial.close()

    def test_contract_close_is_final(self):
        env = self._env()
        env.rollout(2)
        env.close()
        assert env.is_closed
        with pytest.raises(RuntimeError, match="already closed"):
            env.close()  # as TorchRL: a second close raises, unless asked not to
        env.close(raise_if_closed=False)
        assert env.is_closed
