"""Builders for the DQN recipe: train/eval envs and the Q-network with its epsilon-greedy policy."""
from __future__ import annotations

from functools import partial

from tensordict.nn import TensorDictSequential
from torch import nn

from torchrl.envs import SerialEnv
from torchrl.modules import EGreedyModule, MLP, QValueActor
from torchrl.train import make_env

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU}


def make_batched_env(cfg, num_envs, seed, device):
    """``num_envs`` copies of the configured env stepped together (a :class:`~torchrl.envs.SerialEnv`; a single
    env when ``num_envs`` is 1), each with the recipes' standard transforms (time limit, ``RewardSum``)."""
    build = partial(make_env, cfg.env.name, max_episode_steps=cfg.env.max_episode_steps, device=device)
    if num_envs == 1:
        return build(seed=seed)
    env = SerialEnv(num_envs, build, device=device)
    env.set_seed(seed)
    return env


def make_envs(cfg, device):
    """The training envs (``env.num_envs`` of them) and the evaluation envs (``eval_episodes`` of them, so one
    rollout plays every evaluation episode)."""
    train_env = make_batched_env(cfg, cfg.env.num_envs, cfg.seed, device)
    eval_env = make_batched_env(cfg, cfg.eval_episodes, cfg.seed + 1_000_000, device)
    return train_env, eval_env


def make_dqn_agent(cfg, env, device):
    """The Q-network (an MLP over the observation, one output per action; the greedy policy) and the
    exploration policy (Q-network followed by epsilon-greedy)."""
    action_spec = env.action_spec_unbatched
    obs_dim = env.observation_spec["observation"].shape[-1]
    mlp = MLP(
        in_features=obs_dim,
        out_features=action_spec.shape[-1],
        num_cells=list(cfg.network.hidden_sizes),
        activation_class=ACTIVATIONS[cfg.network.activation],
    )
    qnet = QValueActor(mlp, in_keys=["observation"], spec=action_spec).to(device)
    greedy = EGreedyModule(
        action_spec,
        eps_init=cfg.exploration.eps_init,
        eps_end=cfg.exploration.eps_end,
        annealing_num_steps=cfg.exploration.annealing_frames,
        device=device,
    )
    return qnet, TensorDictSequential(qnet, greedy)
