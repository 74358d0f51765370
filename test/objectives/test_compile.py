"""Losses under ``torch.compile``: one graph (no break) for the forward of DQN, DDPG, TD3, SAC and clipped PPO, and
the compiled loss gives eager's values and gradients.

``torch._dynamo.explain`` misses breaks that happen before the first traced op of a frame (it reported 0 for
losses that ``fullgraph=True`` refused), so each loss is also compiled with ``fullgraph=True``, which raises at
the first break. The ``"eager"`` backend runs the captured graph op by op: enough to find breaks, no C++
compiler needed, and random draws happen in eager's order (so SAC and PPO sample the same actions).
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
from tensordict import TensorDict
from torch import nn

from test.objectives._tiny_losses import (
    BATCH,
    LOSSES,
    N_ACT,
    N_OBS,
    QNet,
    box_spec,
    tanh_actor,
    total,
)
from torchrl._fast import direct_module_call
from torchrl.data import Bounded, OneHot
from torchrl.modules import MLP, Actor, QValueActor, ValueOperator
from torchrl.objectives import DDPGLoss


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _build(name: str):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no target network updater": not what these tests are about
        return LOSSES[name]()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_explain_reports_no_graph_break(name):
    loss, data = _build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explanation = torch._dynamo.explain(loss)(data.clone())
    assert explanation.graph_break_count == 0, [str(r.reason)[:200] for r in explanation.break_reasons]
    assert explanation.graph_count == 1


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_compiled_loss_matches_eager(name):
    loss, data = _build(name)
    params = [p for p in loss.parameters() if p.requires_grad]

    def run(fn):
        torch.manual_seed(1)
        batch = data.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(batch)
        grads = torch.autograd.grad(total(out), params, allow_unused=True)
        return out, batch, grads

    # compiled first: the first call's lazy work (value estimator, key caches, the target-updater warning) is
    # traced too, as when a script compiles its loss before using it
    compiled = torch.compile(loss, backend="eager", fullgraph=True)  # raises at any graph break
    out, batch, grads = run(compiled)
    eager_out, eager_batch, eager_grads = run(loss)
    assert set(out.keys()) == set(eager_out.keys())
    for key, value in eager_out.items():
        torch.testing.assert_close(out[key], value, rtol=1e-5, atol=1e-5, msg=f"{name}: {key}")
        assert out[key].requires_grad == value.requires_grad, key
    for key in ("td_error",):  # the priorities written into the batch
        if key in eager_batch.keys():  # noqa: SIM118 - TensorDict.__contains__ refuses keys
            torch.testing.assert_close(batch[key], eager_batch[key], rtol=1e-5, atol=1e-5)
    assert sum(g is not None for g in eager_grads) > 0
    for p, g, ref in zip(params, grads, eager_grads):
        assert (g is None) == (ref is None), p.shape
        if ref is not None:
            torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-5)


def test_compiled_loss_does_not_recompile_for_new_values():
    """After an eager warm-up call (which builds the value estimator and the key caches, as
    ``compile_with_warmup`` does), another batch of the same shapes reuses the graph: no guard on values."""
    loss, data = _build("sac")
    frames = []

    def backend(gm, example_inputs):
        frames.append(gm)
        return gm.forward

    compiled = torch.compile(loss, backend=backend, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss(data.clone())
        compiled(data.clone())
        other = data.clone()
        other["observation"] = torch.randn_like(other["observation"])
        compiled(other)
    assert len(frames) == 1


def test_ddpg_actor_loss_leaves_the_critic_untrained_when_compiled():
    """Compiled, DDPG reads the critic's parameters detached (``requires_grad_`` does not trace): the actor
    loss gives the actor gradients and the critic none, as ``hold_out_params`` does in eager mode."""
    loss, data = _build("ddpg")
    compiled = torch.compile(loss.loss_actor, backend="eager", fullgraph=True)
    value, _ = compiled(data.clone())
    actor = list(loss.actor_network.parameters())
    critic = list(loss.value_network.parameters())
    grads = torch.autograd.grad(value, actor + critic, allow_unused=True)
    assert all(g is not None for g in grads[: len(actor)])
    assert all(g is None for g in grads[len(actor):])
    assert all(p.requires_grad for p in critic)


def test_ddpg_with_a_shared_trunk_keeps_it_out_of_the_critic_loss_when_compiled():
    """``separate_losses=True`` with a trunk shared by actor and critic: compiled, the critic loss reads the trunk
    detached (eager mode holds it out), so it trains the critic's head only, with eager's values."""
    trunk = nn.Linear(3, 4)

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk, self.head = trunk, nn.Linear(6, 1)

        def forward(self, observation, action):
            return self.head(torch.cat([self.trunk(observation), action], -1))

    torch.manual_seed(0)
    actor = Actor(nn.Sequential(trunk, nn.Linear(4, 2)), spec=Bounded(-1, 1, (2,)))
    critic = ValueOperator(Critic(), in_keys=["observation", "action"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = DDPGLoss(actor, critic, separate_losses=True)
    data = TensorDict({
        "observation": torch.randn(8, 3), "action": torch.rand(8, 2) * 2 - 1,
        ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ("next", "done"): torch.zeros(8, 1, dtype=torch.bool), ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool),
    }, [8])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = loss(data.clone())["loss_value"]
        compiled = torch.compile(loss, backend="eager", fullgraph=True)(data.clone())["loss_value"]
    torch.testing.assert_close(compiled, eager)
    head = critic.module.head.weight
    trunk_grad, head_grad = torch.autograd.grad(compiled, [trunk.weight, head], allow_unused=True)
    assert trunk_grad is None
    torch.testing.assert_close(head_grad, torch.autograd.grad(eager, head)[0])


def _policies():
    return {
        "qvalue_actor": QValueActor(MLP(in_features=N_OBS, out_features=N_ACT, num_cells=[8]),
                                    in_keys=["observation"], action_space=OneHot(N_ACT)),
        "actor": Actor(nn.Linear(N_OBS, N_ACT), spec=box_spec()),
        "tanh_normal_actor": tanh_actor(box_spec()),
        "q_value_operator": ValueOperator(QNet(), in_keys=["observation", "action"]),
    }


@pytest.mark.parametrize("name", ["qvalue_actor", "actor", "tanh_normal_actor", "q_value_operator"])
def test_policies_compile_through_their_direct_calls(name):
    """The fast paths the losses and policies take (entry-dict reads and writes, ``SafeModule``'s direct forward,
    ``direct_module_call``) trace as one graph, and give eager's outputs: they need no fallback while compiling.
    With ``TORCHRL_FAST_PATHS=0`` the same test runs the general paths."""
    torch.manual_seed(0)
    module = _policies()[name]
    data = TensorDict(observation=torch.randn(BATCH, N_OBS), action=torch.rand(BATCH, N_ACT), batch_size=[BATCH])
    calls = [module] + [c for c in [direct_module_call(module)] if c is not None]
    for call in calls:
        torch._dynamo.reset()
        torch.manual_seed(1)
        eager = call(data.clone())
        torch.manual_seed(1)
        compiled = torch.compile(call, backend="eager", fullgraph=True)(data.clone())
        assert set(compiled.keys()) == set(eager.keys())
        for key in eager.keys():  # noqa: SIM118 - a TensorDict iterates over its batch, not its keys
            torch.testing.assert_close(compiled[key], eager[key])
