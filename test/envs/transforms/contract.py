"""The contract every transform meets; each transform's test class subclasses ``TransformContract``.

A subclass provides ``make_transform()`` and, when Pendulum does not suit it, ``make_env(batch_size)``.
The contract then checks, for free: specs agree with data on a plain env, on a batch-size env and on a
``SerialEnv`` of envs (via ``check_env_specs``), the transform works inside a ``Compose`` next to another
transform, ``clone`` gives a detached, equivalent copy, the transformed env's rollouts are reproducible
under seeding, and inside a replay buffer the transform either runs on sampled data or (for transforms
that only make sense in an env, ``env_only = True``) refuses with a clear error. It also runs over a
``ParallelEnv`` (transform in the main process), its state survives a ``state_dict`` round trip into a fresh
copy and a worker restart (transform inside the workers), and ``to(device)`` moves every tensor it holds.

``GroupContract`` (opt-in, with ``make_group_transform()``) checks a transform on a multi-agent group: an
entry ``("agents", "observation")`` with an agent dimension, next to a root ``"observation"``.
"""
from __future__ import annotations

import functools

import pytest
import torch

from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl.testing import get_default_devices
from torchrl.envs import Compose, ParallelEnv, PendulumEnv, SerialEnv, StepCounter, TransformedEnv, check_env_specs


class TransformContract:
    #: rollout length used by the contract checks
    steps = 5
    #: transforms that count or drive env steps (StepCounter, FrameSkip, ...) cannot run on stored data
    env_only = False

    def make_transform(self):
        raise NotImplementedError

    def make_env(self, batch_size=()):
        return PendulumEnv(batch_size=batch_size, seed=0)

    def policy(self):
        """The policy of rollouts over a ``ParallelEnv`` whose workers hold the transform (``None``: random
        actions from the batched env's action spec)."""
        return None

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

    def test_contract_parallel_env(self):
        env = self.wrap(ParallelEnv(2, self.make_env, mp_start_method="fork"), self.make_transform())
        try:
            check_env_specs(env, seed=0)
            assert env.rollout(self.steps).batch_size[0] == 2
        finally:
            env.close(raise_if_closed=False)

    def test_contract_state_dict_round_trip(self):
        env = self.wrap(self.make_env(), self.make_transform())
        env.set_seed(0)
        env.rollout(self.steps, break_when_any_done=False)
        state = env.transform.state_dict()
        fresh = self.wrap(self.make_env(), self.make_transform()).transform
        fresh.load_state_dict(state)
        assert_states_equal(fresh.state_dict(), state)

    def test_contract_state_survives_worker_restart(self):
        env = ParallelEnv(2, functools.partial(_wrapped_env, self), mp_start_method="fork")
        try:
            env.set_seed(0)
            env.rollout(self.steps, self.policy(), break_when_any_done=False)
            state = env.state_dict()
            env.close()
            env.start()  # fresh workers: the state comes back only through load_state_dict
            env.load_state_dict(state)
            assert_states_equal(env.state_dict(), state)
            env.rollout(self.steps, self.policy(), break_when_any_done=False)
        finally:
            env.close(raise_if_closed=False)

    def test_contract_to_device(self):
        t = self.make_transform()
        env = self.wrap(self.make_env(), t)
        env.rollout(2, break_when_any_done=False)
        t.to("meta")
        for name, value in _tensors(t.state_dict()):
            assert value.device.type == "meta", f"{name} stayed on {value.device} after .to('meta')"

    @pytest.mark.parametrize("device", get_default_devices())
    def test_contract_env_to_device(self, device):
        env = self.wrap(self.make_env(), self.make_transform()).to(device)
        data = env.rollout(self.steps, break_when_any_done=False)
        for name, value in _tensors(env.transform.state_dict()):
            assert value.device == torch.device(device), f"{name} is on {value.device}, not {device}"
        assert all(v.device == torch.device(device) for v in data.values(True, True) if isinstance(v, torch.Tensor))

def _wrapped_env(contract: TransformContract):
    return contract.wrap(contract.make_env(), contract.make_transform())


def _tensors(state, prefix=""):
    """``(name, tensor)`` for every tensor in a (possibly nested) state dict."""
    for name, value in state.items():
        if isinstance(value, torch.Tensor):
            yield prefix + str(name), value
        elif hasattr(value, "items"):
            yield from _tensors(value, f"{prefix}{name}.")


def assert_states_equal(actual, expected):
    a, e = dict(_tensors(actual)), dict(_tensors(expected))
    assert a.keys() == e.keys(), (sorted(a), sorted(e))
    for name, value in e.items():
        torch.testing.assert_close(a[name], value, equal_nan=True, msg=lambda m, n=name: f"{n}: {m}")


class GroupContract:
    """Opt-in checks on a multi-agent group (``test/envs/transforms/_group_env.py``): a subclass provides
    ``make_group_transform()``, configured for ``("agents", "observation")`` / ``("agents", "reward")`` /
    ``("agents", "action")``; ``check_group(data)`` may assert the transform's answer on a rollout."""

    def make_group_transform(self):
        raise NotImplementedError

    def check_group(self, data) -> None:
        """Per-transform assertions on a rollout of the transformed group env (none by default)."""

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_env(self, batch_size):
        from test.envs.transforms._group_env import AgentsEnv

        env = TransformedEnv(AgentsEnv(batch_size=batch_size), self.make_group_transform())
        check_env_specs(env, seed=0)
        data = env.rollout(4, break_when_any_done=False)
        assert data.batch_size == (*batch_size, 4)
        assert data.get("agents").batch_size == (*batch_size, 4, 3)  # the agent dimension survives
        self.check_group(data)

    def test_group_serial_env(self):
        from test.envs.transforms._group_env import AgentsEnv

        env = TransformedEnv(SerialEnv(2, AgentsEnv), self.make_group_transform())
        try:
            check_env_specs(env, seed=0)
            self.check_group(env.rollout(4, break_when_any_done=False))
        finally:
            env.close(raise_if_closed=False)


class BufferOnlyContract(TransformContract):
    """The contract for transforms TorchRL refuses in environments: every env check asserts the refusal
    (``refusal``: exception type and message, raised when the transformed env is built or, at the latest,
    when it steps), the buffer checks run as usual. Subclassed by MultiStepTransform, Reward2GoTransform,
    BurnInTransform and RandomCropTensorDict."""

    full_transitions = True
    #: ``(exception type, message pattern)`` of the refusal; every subclass sets it
    refusal: tuple[type[Exception], str]

    def _refused(self, base, transform=None, error=None):
        error = error or self.refusal[0]
        try:
            with pytest.raises(error, match=self.refusal[1]):
                env = self.wrap(base, transform if transform is not None else self.make_transform())
                env.rollout(self.steps)
        finally:
            base.close(raise_if_closed=False)

    def test_contract_single_env(self):
        self._refused(self.make_env())

    def test_contract_batched_env(self):
        self._refused(self.make_env(batch_size=(3,)))

    def test_contract_in_compose(self):
        self._refused(self.make_env(), Compose(StepCounter(), self.make_transform()))

    def test_contract_serial_env(self):
        self._refused(SerialEnv(2, lambda: self.make_env()))

    def test_contract_parallel_env(self):
        self._refused(ParallelEnv(2, self.make_env, mp_start_method="fork"))

    def test_contract_clone(self):
        t = self.make_transform()
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=t)
        copy = t.clone()
        assert copy.container is None and t.container is rb.transform
        assert type(copy) is type(t) and repr(copy) == repr(t)

    def test_contract_state_survives_worker_restart(self):
        # the refusal comes from building the env (in the main process) or from a worker's step (wrapped in
        # a RuntimeError naming the worker)
        def run():
            env = ParallelEnv(2, lambda: self.wrap(self.make_env(), self.make_transform()), mp_start_method="fork")
            try:
                env.rollout(self.steps)
            finally:
                env.close(raise_if_closed=False)

        with pytest.raises((RuntimeError, self.refusal[0]), match=self.refusal[1]):
            run()

    def buffer_data(self):
        return self.replay_buffer_data()

    def test_contract_seeded_rollouts_match(self):
        # no rollout can run; the buffer path is deterministic: the same data give the same result
        data = self.buffer_data()
        torch.manual_seed(0)
        a = self.make_transform().inv(data.clone())
        torch.manual_seed(0)
        b = self.make_transform().inv(data.clone())
        assert (a == b).all()

    def test_contract_state_dict_round_trip(self):
        t = self.make_transform()
        t.inv(self.buffer_data())
        fresh = self.make_transform()
        fresh.load_state_dict(t.state_dict())
        assert_states_equal(fresh.state_dict(), t.state_dict())

    def test_contract_to_device(self):
        t = self.make_transform()
        t.inv(self.buffer_data())
        t.to("meta")
        for name, value in _tensors(t.state_dict()):
            assert value.device.type == "meta", f"{name} stayed on {value.device} after .to('meta')"

    @pytest.mark.parametrize("device", get_default_devices())
    def test_contract_env_to_device(self, device):
        t = self.make_transform().to(device)
        for name, value in _tensors(t.state_dict()):
            assert value.device == torch.device(device), f"{name} is on {value.device}, not {device}"
        self._refused(self.make_env().to(device), t)
