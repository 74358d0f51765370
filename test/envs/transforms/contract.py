"""The contract every transform meets; each transform's test class subclasses ``TransformContract``.

A subclass provides ``make_transform()`` and, when Pendulum does not suit it, ``make_env(batch_size)``.
The contract then checks, for free: specs agree with data on a plain env, on a batch-size env and on a
``SerialEnv`` of envs (via ``check_env_specs``), the transform works inside a ``Compose`` next to another
transform, ``clone`` gives a detached, equivalent copy, the transformed env's rollouts are reproducible
under seeding, and inside a replay buffer the transform either runs on sampled data or (for transforms
that only make sense in an env, ``env_only = True``) refuses with a clear error.
"""
from __future__ import annotations

import pytest
import torch

from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.envs import Compose, PendulumEnv, SerialEnv, StepCounter, TransformedEnv, check_env_specs


class TransformContract:
    #: rollout length used by the contract checks
    steps = 5
    #: transforms that count or drive env steps (StepCounter, FrameSkip, ...) cannot run on stored data
    env_only = False

    def make_transform(self):
        raise NotImplementedError

    def make_env(self, batch_size=()):
        return PendulumEnv(batch_size=batch_size, seed=0)

    def wrap(self, env, transform):
        """The transformed env the contract checks (an ``AutoResetEnv`` for ``AutoResetTransform``)."""
        return TransformedEnv(env, transform)

    def test_contract_single_env(self):
        env = self.wrap(self.make_env(), self.make_transform())
        check_env_specs(env, seed=0)
        data = env.rollout(self.steps)
        assert data.batch_size[-1] <= self.steps

    def test_contract_batched_env(self):
        env = self.wrap(self.make_env(batch_size=(3,)), self.make_transform())
        check_env_specs(env, seed=0)
        assert env.rollout(self.steps).batch_size[0] == 3

    def test_contract_in_compose(self):
        env = self.wrap(self.make_env(), Compose(StepCounter(), self.make_transform()))
        check_env_specs(env, seed=0)

    def test_contract_clone(self):
        t = self.make_transform()
        env = self.wrap(self.make_env(), t)
        copy = t.clone()
        assert copy.container is None and t.container is not None
        env2 = self.wrap(self.make_env(), copy)
        assert set(env2.observation_spec.keys(True, True)) == set(env.observation_spec.keys(True, True))

    def test_contract_seeded_rollouts_match(self):
        def run():
            env = self.wrap(self.make_env(), self.make_transform())
            env.set_seed(0)
            torch.manual_seed(0)
            return env.rollout(self.steps, break_when_any_done=False)

        a, b = run(), run()
        for key in a.keys(True, True):
            va, vb = a.get(key), b.get(key)
            if isinstance(va, torch.Tensor) and va.is_floating_point():
                torch.testing.assert_close(va, vb, equal_nan=True)

    def test_contract_serial_env(self):
        env = self.wrap(SerialEnv(2, lambda: self.make_env()), self.make_transform())
        try:
            check_env_specs(env, seed=0)
            assert env.rollout(self.steps).batch_size[0] == 2
        finally:
            env.close(raise_if_closed=False)

    #: store full transitions (root + "next") in the buffer instead of the flattened step outputs
    full_transitions = False

    def replay_buffer_data(self):
        """What the contract stores in a buffer. By default, each step's outputs (observations, rewards,
        dones) with its action, all at the root, where transforms configured as for an env look for them;
        with ``full_transitions``, the rollout as is (for transforms that read ``("next", ...)`` entries)."""
        env = self.make_env()
        if self.env_only:  # the data only has to exist; let the transform drive the env that makes it
            env = self.wrap(env, self.make_transform())
        data = env.rollout(self.steps, break_when_any_done=False)
        if self.full_transitions:
            return data
        flat = data.get("next").copy()
        for key in env.action_keys:
            flat.set(key, data.get(key))
        return flat

    def test_contract_replay_buffer(self):
        data = self.replay_buffer_data()
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(data.numel()), batch_size=3)
        rb.append_transform(self.make_transform())
        rb.extend(data.reshape(-1))
        if self.env_only:
            with pytest.raises((RuntimeError, NotImplementedError), match="cannot be applied to stored data"):
                rb.sample()
        else:
            sample = rb.sample()
            assert sample.batch_size == (3,)
