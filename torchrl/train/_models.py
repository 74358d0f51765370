"""Network builders the recipes share: activation names and the actor-critic pair of PPO and A2C."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl.data.tensor_specs import Categorical, OneHot
from torchrl.envs.common import EnvBase
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, TanhNormal, ValueOperator

__all__ = ["ACTIVATIONS", "make_actor_critic"]

#: Activation classes by the name a recipe config uses (``network.activation``).
ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU}


def make_actor_critic(env: EnvBase, *, hidden_sizes: Sequence[int], activation: str = "tanh",
                      scale_lb: float = 1e-4, device=None) -> tuple[ProbabilisticActor, ValueOperator]:
    """A stochastic actor and a state-value critic, two separate MLPs over ``"observation"``.

    The actor is categorical over a ``OneHot``/``Categorical`` action spec (one-hot or index samples), and
    a tanh-Gaussian inside the action box otherwise (standard deviation at least ``scale_lb``); it writes
    the sample's log-probability.

    Args:
        env: the env whose observation and action specs size the networks.

    Keyword Args:
        hidden_sizes: hidden layer widths of both MLPs.
        activation: a key of :data:`ACTIVATIONS`.
        scale_lb: lower bound of the Gaussian's standard deviation (continuous actions).
        device: where the networks live.

    Examples:
        >>> from torchrl.train import make_env
        >>> env = make_env("PendulumEnv", max_episode_steps=200)
        >>> actor, critic = make_actor_critic(env, hidden_sizes=[16])
        >>> td = critic(actor(env.reset()))
        >>> td["action"].shape, td["state_value"].shape
        (torch.Size([1]), torch.Size([1]))
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"make_actor_critic: unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}.")
    action_spec = env.action_spec_unbatched
    obs_dim = env.observation_spec["observation"].shape[-1]
    hidden, act_cls = list(hidden_sizes), ACTIVATIONS[activation]
    if isinstance(action_spec, (OneHot, Categorical)):
        net = MLP(in_features=obs_dim, out_features=action_spec.space.n, num_cells=hidden, activation_class=act_cls)
        module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
        dist_class = OneHotCategorical if isinstance(action_spec, OneHot) else torch.distributions.Categorical
        actor = ProbabilisticActor(module, in_keys=["logits"], spec=action_spec, distribution_class=dist_class,
                                   return_log_prob=True)
    else:
        act_dim = action_spec.shape[-1]
        net = nn.Sequential(
            MLP(in_features=obs_dim, out_features=2 * act_dim, num_cells=hidden, activation_class=act_cls),
            NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=scale_lb),
        )
        module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
        actor = ProbabilisticActor(
            module, in_keys=["loc", "scale"], spec=action_spec, distribution_class=TanhNormal,
            distribution_kwargs={"low": action_spec.space.low, "high": action_spec.space.high}, return_log_prob=True,
        )
    critic = ValueOperator(MLP(in_features=obs_dim, out_features=1, num_cells=hidden, activation_class=act_cls),
                           in_keys=["observation"])
    return actor.to(device), critic.to(device)
