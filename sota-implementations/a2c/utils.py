"""Builders for the A2C recipe: train/eval envs (optionally with observation normalisation) and the actor /
critic pair for discrete or continuous actions."""
from __future__ import annotations

from functools import partial

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl.data.tensor_specs import Categorical, OneHot
from torchrl.envs import SerialEnv, TransformedEnv, VecNorm
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.train import make_env, NATIVE_ENVS

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU}


def make_batched_env(cfg, num_envs, seed, device):
    """``num_envs`` copies of the configured env stepped together: a batched native env, a
    :class:`~torchrl.envs.SerialEnv` of gymnasium envs, or a single env; each with the recipes' standard
    transforms (time limit, float32 observations, ``RewardSum``)."""
    name, steps = cfg.env.name, cfg.env.max_episode_steps
    if name in NATIVE_ENVS:
        return make_env(name, seed=seed, max_episode_steps=steps, batch_size=num_envs, device=device)
    build = partial(make_env, name, max_episode_steps=steps, device=device)
    if num_envs == 1:
        return build(seed=seed)
    env = SerialEnv(num_envs, build, device=device)
    env.set_seed(seed)
    return env


def make_envs(cfg, device):
    """The training envs (``env.num_envs``) and the evaluation envs (``eval_episodes``, so one rollout plays
    every evaluation episode). With ``env.normalize_observations`` the training env standardises observations
    with running statistics (:class:`~torchrl.envs.VecNorm`) and the evaluation env reads the same statistics
    without updating them."""
    train_env = make_batched_env(cfg, cfg.env.num_envs, cfg.seed, device)
    eval_env = make_batched_env(cfg, cfg.eval_episodes, cfg.seed + 1_000_000, device)
    if cfg.env.normalize_observations:
        vecnorm = VecNorm(in_keys=["observation"], decay=0.99999)
        train_env = _append(train_env, vecnorm)
        train_env.observation_spec  # noqa: B018 - building the specs creates the statistics the copy shares
        eval_env = _append(eval_env, vecnorm.frozen_copy())
    return train_env, eval_env


def _append(env, transform):
    if isinstance(env, TransformedEnv):
        env.append_transform(transform)
        return env
    return TransformedEnv(env, transform)


def make_a2c_models(cfg, env, device):
    """The stochastic actor (categorical over the actions, or a tanh-Gaussian inside the action box) and the
    state-value critic, two separate MLPs."""
    action_spec = env.action_spec_unbatched
    obs_dim = env.observation_spec["observation"].shape[-1]
    hidden, activation = list(cfg.network.hidden_sizes), ACTIVATIONS[cfg.network.activation]
    if isinstance(action_spec, (OneHot, Categorical)):
        n_actions = action_spec.space.n
        net = MLP(in_features=obs_dim, out_features=n_actions, num_cells=hidden, activation_class=activation)
        module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
        dist_class = OneHotCategorical if isinstance(action_spec, OneHot) else torch.distributions.Categorical
        actor = ProbabilisticActor(module, in_keys=["logits"], spec=action_spec, distribution_class=dist_class,
                                   return_log_prob=True)
    else:
        act_dim = action_spec.shape[-1]
        net = nn.Sequential(
            MLP(in_features=obs_dim, out_features=2 * act_dim, num_cells=hidden, activation_class=activation),
            NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=cfg.network.scale_lb),
        )
        module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
        actor = ProbabilisticActor(
            module, in_keys=["loc", "scale"], spec=action_spec, distribution_class=TanhNormal,
            distribution_kwargs={"low": action_spec.space.low, "high": action_spec.space.high}, return_log_prob=True,
        )
    critic = ValueOperator(MLP(in_features=obs_dim, out_features=1, num_cells=hidden, activation_class=activation),
                           in_keys=["observation"])
    return actor.to(device), critic.to(device)
