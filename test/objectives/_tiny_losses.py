"""The five losses of the compile and host-sync tests, built as TorchRL's docs and recipes build them, with tiny
networks and a batch of 8: ``DQNLoss`` over a ``QValueActor``, ``DDPGLoss`` and ``TD3Loss`` over an ``Actor`` and
a ``ValueOperator``, ``SACLoss`` (v2, optionally with a value network) and ``ClipPPOLoss`` over a
``ProbabilisticActor`` with a ``TanhNormal`` head, PPO's advantage computed by ``GAE`` outside the loss (as the
recipes do) or inside it."""
from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl.data import Bounded, OneHot
from torchrl.modules import (
    MLP,
    Actor,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
)
from torchrl.objectives import ClipPPOLoss, DDPGLoss, DQNLoss, SACLoss, TD3Loss
from torchrl.objectives.value import GAE

N_OBS, N_ACT, BATCH = 3, 2, 8


class QNet(nn.Module):
    """``Q(s, a)``: a linear layer over the concatenated observation and action."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(N_OBS + N_ACT, 1)

    def forward(self, observation, action):
        return self.linear(torch.cat([observation, action], -1))


def batch(action: torch.Tensor) -> TensorDict:
    return TensorDict({
        "observation": torch.randn(BATCH, N_OBS), "action": action,
        ("next", "observation"): torch.randn(BATCH, N_OBS),
        ("next", "reward"): torch.randn(BATCH, 1),
        ("next", "done"): torch.zeros(BATCH, 1, dtype=torch.bool),
        ("next", "terminated"): torch.tensor([False] * (BATCH - 1) + [True]).unsqueeze(-1),
    }, [BATCH])


def box_spec() -> Bounded:
    return Bounded(-torch.ones(N_ACT), torch.ones(N_ACT), (N_ACT,))


def tanh_actor(spec) -> ProbabilisticActor:
    net = TensorDictModule(nn.Sequential(nn.Linear(N_OBS, 2 * N_ACT), NormalParamExtractor()),
                           in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(net, in_keys=["loc", "scale"], spec=spec, distribution_class=TanhNormal,
                              return_log_prob=True)


def dqn():
    spec = OneHot(N_ACT)
    actor = QValueActor(MLP(in_features=N_OBS, out_features=N_ACT, num_cells=[8]), in_keys=["observation"],
                        action_space=spec)
    return DQNLoss(actor, action_space=spec), batch(spec.rand((BATCH,)))


def ddpg():
    spec = box_spec()
    actor = Actor(spec=spec, module=nn.Linear(N_OBS, N_ACT))
    return DDPGLoss(actor, ValueOperator(QNet(), in_keys=["observation", "action"])), batch(spec.rand((BATCH,)))


def td3():
    spec = box_spec()
    actor = Actor(spec=spec, module=nn.Linear(N_OBS, N_ACT))
    qvalue = ValueOperator(QNet(), in_keys=["observation", "action"])
    return TD3Loss(actor, qvalue, action_spec=spec), batch(spec.rand((BATCH,)))


def sac(value_network: bool = False):
    spec = box_spec()
    extra = {"value_network": ValueOperator(nn.Linear(N_OBS, 1), in_keys=["observation"])} if value_network else {}
    loss = SACLoss(tanh_actor(spec), ValueOperator(QNet(), in_keys=["observation", "action"]), **extra)
    return loss, batch(spec.rand((BATCH,)))


def ppo(gae_inside: bool = False):
    spec = box_spec()
    value = ValueOperator(nn.Linear(N_OBS, 1), in_keys=["observation"])
    loss = ClipPPOLoss(tanh_actor(spec), value)
    data = batch(spec.rand((BATCH,)))
    data["action_log_prob"] = torch.randn(BATCH)
    if gae_inside:
        loss.make_value_estimator(gamma=0.9, lmbda=0.95)
    else:
        with torch.no_grad():
            GAE(gamma=0.9, lmbda=0.95, value_network=value)(data)
    return loss, data


LOSSES = {
    "dqn": dqn,
    "ddpg": ddpg,
    "td3": td3,
    "sac": sac,
    "sac_value_network": lambda: sac(value_network=True),
    "ppo_gae_outside": ppo,
    "ppo_gae_inside": lambda: ppo(gae_inside=True),
}


def total(out: TensorDict) -> torch.Tensor:
    """The sum of the ``"loss*"`` entries (what a training step backpropagates)."""
    return sum(v for k, v in out.items() if k.startswith("loss"))
