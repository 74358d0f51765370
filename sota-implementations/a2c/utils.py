"""Builders for the A2C recipe: train/eval envs (optionally with observation normalisation) and the actor /
critic pair for discrete or continuous actions."""
from __future__ import annotations

from torchrl.train import make_actor_critic, make_batched_env, normalize_observations


def make_envs(cfg, device):
    """The training envs (``env.num_envs``) and the evaluation envs (``eval_episodes``, so one rollout plays
    every evaluation episode). With ``env.normalize_observations`` the training env standardises observations
    with running statistics and the evaluation env reads the same statistics without updating them."""
    name, steps = cfg.env.name, cfg.env.max_episode_steps
    train_env = make_batched_env(name, cfg.env.num_envs, seed=cfg.seed, max_episode_steps=steps, device=device)
    eval_env = make_batched_env(name, cfg.eval_episodes, seed=cfg.seed + 1_000_000, max_episode_steps=steps,
                                device=device)
    if cfg.env.normalize_observations:
        train_env, eval_env = normalize_observations(train_env, eval_env)
    return train_env, eval_env


def make_a2c_models(cfg, env, device):
    """The stochastic actor (categorical over the actions, or a tanh-Gaussian inside the action box) and the
    state-value critic, two separate MLPs."""
    net = cfg.network
    return make_actor_critic(env, hidden_sizes=net.hidden_sizes, activation=net.activation, scale_lb=net.scale_lb,
                             device=device)
