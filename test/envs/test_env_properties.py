"""Property-based tests (hypothesis) over env steps: random batch sizes, random nested specs, random actions.

Each example checks what must hold whatever the draw: outputs inside their specs, ``done`` equal to
``terminated | truncated``, rollouts of the expected length and batch, ``step_mdp`` moving ``"next"`` up.
"""
from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from torchrl import set_check_mode
from torchrl.data import Categorical, Composite
from torchrl.envs import EnvBase, PendulumEnv, StepCounter, TransformedEnv, step_mdp
from torchrl.testing import CountingEnv

from test.data.test_tensor_specs_properties import composites, leaf_specs

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
batch_sizes = st.lists(st.integers(1, 3), max_size=2).map(tuple)


class SpecEnv(EnvBase):
    """Returns random values of its observation spec; done at random with probability ``p_done``."""

    def __init__(self, observation_spec: Composite, action_spec, p_done: float):
        super().__init__(batch_size=observation_spec.shape)
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        self.p_done = p_done

    def _reset(self, td):
        return self.full_observation_spec.rand()

    def _step(self, td):
        out = self.full_observation_spec.rand()
        out.set("reward", torch.randn(*self.batch_size, 1))
        terminated = torch.rand(*self.batch_size, 1) < self.p_done
        out.set("terminated", terminated)
        return out

    def _set_seed(self, seed):
        torch.manual_seed(seed)


@st.composite
def spec_envs(draw):
    obs = draw(composites())
    action = draw(leaf_specs(batch=tuple(obs.shape)))
    return SpecEnv(obs, action, draw(st.sampled_from([0.0, 0.2, 1.0])))


def _check_outputs(env, data: TensorDict) -> None:
    """Every step of rollout ``data`` (time dim last among the batch dims) inside the observation spec."""
    nxt = data.get("next")
    for key in env.full_observation_spec.keys(True, True):
        value = nxt.get(key)
        for t in range(data.shape[-1]):
            assert env.full_observation_spec[key].is_in(value.select(env.batch_dims, t)), (key, t)
    assert torch.equal(nxt.get("done"), nxt.get("terminated") | nxt.get("truncated", torch.zeros_like(nxt.get("done"))))


@SETTINGS
@given(env=spec_envs(), steps=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_random_nested_specs_roll_out_inside_their_specs(env, steps, seed):
    torch.manual_seed(seed)
    with set_check_mode(True):  # every random action is checked against the spec on the way in
        data = env.rollout(steps, break_when_any_done=False)
    assert data.batch_size == (*env.batch_size, steps)
    _check_outputs(env, data)
    first = data[(slice(None),) * env.batch_dims + (0,)]
    moved = step_mdp(first)
    assert "next" not in moved.keys()
    for key in env.full_observation_spec.keys(True, True):
        assert torch.equal(moved.get(key), first.get(("next", key)))


@SETTINGS
@given(env=spec_envs(), seed=st.integers(0, 2**16))
def test_rollout_stops_at_the_first_done(env, seed):
    torch.manual_seed(seed)
    data = env.rollout(8)
    done = data.get(("next", "done")).reshape(*env.batch_size, data.shape[-1], -1).any(-1)
    done = done.reshape(-1, data.shape[-1]).any(0)  # any sub-env done at step t
    assert not done[:-1].any()
    assert data.shape[-1] == 8 or done[-1]


@SETTINGS
@given(batch=batch_sizes, steps=st.integers(1, 30), max_steps=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_pendulum_random_actions_with_step_limit(batch, steps, max_steps, seed):
    torch.manual_seed(seed)
    env = TransformedEnv(PendulumEnv(batch_size=batch), StepCounter(max_steps=max_steps))
    with set_check_mode(True):
        data = env.rollout(steps, break_when_any_done=False)
    _check_outputs(env, data)
    counts = data.get(("next", "step_count")).squeeze(-1)
    assert int(counts.max()) <= max_steps  # the counter restarts at each truncation
    truncated = data.get(("next", "truncated")).squeeze(-1)
    assert torch.equal(truncated, counts == max_steps)


@SETTINGS
@given(batch=batch_sizes, max_steps=st.integers(1, 6), actions=st.lists(st.integers(0, 1), min_size=1, max_size=15))
def test_counting_env_counts_its_actions(batch, max_steps, actions):
    env = CountingEnv(max_steps=max_steps, batch_size=batch)
    td = env.reset()
    count = torch.zeros(*batch, 1, dtype=torch.int32)
    for a in actions:
        td.set("action", torch.full((*batch, 1), a, dtype=env.action_spec.dtype))
        td = env.step(td)
        count = count + a
        assert torch.equal(td.get(("next", "observation")).to(torch.int32), count)
        done = td.get(("next", "done"))
        assert torch.equal(done, count > max_steps)
        td = env.step_mdp(td)
        if done.any():
            td = env.reset(td.set("_reset", done))
            count = torch.where(done, torch.zeros_like(count), count)


@SETTINGS
@given(n=st.integers(2, 5), batch=batch_sizes, seed=st.integers(0, 2**16))
def test_masked_categorical_actions_respect_the_mask(n, batch, seed):
    torch.manual_seed(seed)
    mask = torch.rand(*batch, n) < 0.5
    mask[..., 0] = True
    spec = Categorical(n, shape=batch, mask=mask)
    action = spec.rand()
    assert mask.gather(-1, action.unsqueeze(-1)).all() and spec.is_in(action)
