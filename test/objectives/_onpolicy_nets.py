"""Small actors, critics, batches and plain-torch reference math shared by the PPO / A2C / REINFORCE tests."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import CompositeDistribution, NormalParamExtractor, TensorDictModule
from torch import distributions as D

from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, TanhNormal, ValueOperator

N_OBS, N_ACT, N_CAT = 3, 2, 4
GAMMA, LMBDA = 0.99, 0.95


def tanh_actor(low=-1.0, high=1.0):
    net = TensorDictModule(
        torch.nn.Sequential(MLP(in_features=N_OBS, out_features=2 * N_ACT, num_cells=[16]), NormalParamExtractor()),
        ["observation"], ["loc", "scale"],
    )
    return ProbabilisticActor(net, ["loc", "scale"], distribution_class=TanhNormal,
                              distribution_kwargs={"low": low, "high": high}, return_log_prob=True)


def categorical_actor():
    net = TensorDictModule(MLP(in_features=N_OBS, out_features=N_CAT, num_cells=[16]), ["observation"], ["logits"])
    return ProbabilisticActor(net, ["logits"], distribution_class=OneHotCategorical, return_log_prob=True)


def critic_net():
    return ValueOperator(MLP(in_features=N_OBS, out_features=1, num_cells=[16]), ["observation"])


class _CompositeNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = MLP(in_features=N_OBS, out_features=2 * N_ACT + N_CAT, num_cells=[16])

    def forward(self, obs):
        y = self.body(obs)
        return y[..., :N_ACT], F.softplus(y[..., N_ACT:2 * N_ACT]) + 0.1, y[..., 2 * N_ACT:]


def composite_actor():
    net = TensorDictModule(_CompositeNet(), ["observation"],
                           [("params", "cont", "loc"), ("params", "cont", "scale"), ("params", "disc", "logits")])
    return ProbabilisticActor(net, ["params"], distribution_class=CompositeDistribution,
                              distribution_kwargs={"distribution_map": {"cont": D.Normal, "disc": D.Categorical}},
                              return_log_prob=True)


def batch(batch_size=(8,), seed=1, kind="tanh"):
    """Data as a collector would give it: stored actions and behaviour log-probabilities (of another policy)."""
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(*batch_size, 1, generator=g) < 0.15
    data = {
        "observation": torch.randn(*batch_size, N_OBS, generator=g),
        "next": {
            "observation": torch.randn(*batch_size, N_OBS, generator=g),
            "reward": torch.randn(*batch_size, 1, generator=g),
            "done": terminated | (torch.rand(*batch_size, 1, generator=g) < 0.15),
            "terminated": terminated,
        },
    }
    if kind == "tanh":
        data["action"] = torch.rand(*batch_size, N_ACT, generator=g) * 1.8 - 0.9
        data["action_log_prob"] = torch.randn(*batch_size, generator=g) * 0.3 - 1.0
        data["loc"] = torch.randn(*batch_size, N_ACT, generator=g) * 0.3
        data["scale"] = torch.rand(*batch_size, N_ACT, generator=g) + 0.5
    elif kind == "categorical":
        idx = torch.randint(N_CAT, batch_size, generator=g)
        data["action"] = F.one_hot(idx, N_CAT).long()
        data["action_log_prob"] = -torch.rand(*batch_size, generator=g) - 1.0
        data["logits"] = torch.randn(*batch_size, N_CAT, generator=g) * 0.5
    elif kind == "composite":
        data["cont"] = torch.randn(*batch_size, N_ACT, generator=g)
        data["disc"] = torch.randint(N_CAT, batch_size, generator=g)
        data["cont_log_prob"] = torch.randn(*batch_size, N_ACT, generator=g) * 0.3 - 1.0
        data["disc_log_prob"] = -torch.rand(*batch_size, generator=g) - 1.0
    return TensorDict(data, batch_size)


# ------------------------------------------------------------------------------------- reference math
def gae(value, next_value, reward, done, terminated, gamma=GAMMA, lmbda=LMBDA):
    """GAE along the last batch dim (time), written as the textbook backward loop."""
    adv = torch.zeros_like(value)
    running = torch.zeros_like(value[..., 0, :])
    for t in reversed(range(value.shape[-2])):
        not_term = 1.0 - terminated[..., t, :].float()
        not_done = 1.0 - done[..., t, :].float()
        delta = reward[..., t, :] + gamma * not_term * next_value[..., t, :] - value[..., t, :]
        running = delta + gamma * lmbda * not_done * running
        adv[..., t, :] = running
    return adv, adv + value


def advantage_and_target(critic, td):
    with torch.no_grad():
        v, nv = critic(td["observation"]), critic(td["next", "observation"])
        return gae(v, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"])


def tanh_normal_log_prob(loc, scale, action, low=-1.0, high=1.0):
    mid, half = (high + low) / 2, (high - low) / 2
    y = ((action - mid) / half).clamp(-1 + 1e-6, 1 - 1e-6)
    u = torch.atanh(y)
    lp = D.Normal(loc, scale).log_prob(u) - torch.log1p(-y.pow(2)) - math.log(half)
    return lp.sum(-1)


def tanh_normal_mc_entropy(loc, scale, low=-1.0, high=1.0):
    """``-log p(x)`` at one reparameterised draw (one ``randn`` of ``loc``'s shape, as the loss draws)."""
    half = (high - low) / 2
    u = loc + scale * torch.randn(1, *loc.shape)[0]
    log_det = 2 * (math.log(2) - u - F.softplus(-2 * u))  # log(1 - tanh(u)^2)
    return -(D.Normal(loc, scale).log_prob(u) - log_det - math.log(half)).sum(-1)


def actor_params(loss, obs):
    return loss.actor_network.module[0].module(obs)


def critic_value(loss, obs):
    return loss.critic_network.module(obs)
