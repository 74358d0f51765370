"""The contract every transform meets; each transform's test class subclasses ``TransformContract``.

A subclass provides ``make_transform()`` and, when Pendulum does not suit it, ``make_env(batch_size)``.
The contract then checks, for free: specs agree with data on a plain env and on a batched env (via
``check_env_specs``), the transform works inside a ``Compose`` next to another transform, ``clone``
gives a detached, equivalent copy, and the transformed env's rollouts are reproducible under seeding.
"""
from __future__ import annotations

import torch

from torchrl.envs import Compose, PendulumEnv, StepCounter, TransformedEnv, check_env_specs


class TransformContract:
    #: rollout length used by the contract checks
    steps = 5

    def make_transform(self):
        raise NotImplementedError

    def make_env(self, batch_size=()):
        return PendulumEnv(batch_size=batch_size, seed=0)

    def test_contract_single_env(self):
        env = TransformedEnv(self.make_env(), self.make_transform())
        check_env_specs(env, seed=0)
        data = env.rollout(self.steps)
        assert data.batch_size[-1] <= self.steps

    def test_contract_batched_env(self):
        env = TransformedEnv(self.make_env(batch_size=(3,)), self.make_transform())
        check_env_specs(env, seed=0)
        assert env.rollout(self.steps).batch_size[0] == 3

    def test_contract_in_compose(self):
        env = TransformedEnv(self.make_env(), Compose(StepCounter(), self.make_transform()))
        check_env_specs(env, seed=0)

    def test_contract_clone(self):
        t = self.make_transform()
        env = TransformedEnv(self.make_env(), t)
        copy = t.clone()
        assert copy.container is None and t.container is not None
        env2 = TransformedEnv(self.make_env(), copy)
        assert set(env2.observation_spec.keys(True, True)) == set(env.observation_spec.keys(True, True))

    def test_contract_seeded_rollouts_match(self):
        def run():
            env = TransformedEnv(self.make_env(), self.make_transform())
            env.set_seed(0)
            torch.manual_seed(0)
            return env.rollout(self.steps, break_when_any_done=False)

        a, b = run(), run()
        for key in a.keys(True, True):
            va, vb = a.get(key), b.get(key)
            if isinstance(va, torch.Tensor) and va.is_floating_point():
                torch.testing.assert_close(va, vb, equal_nan=True)
