"""Builders for the DQN recipe: train/eval envs and the Q-network with its epsilon-greedy policy."""
from __future__ import annotations

from tensordict.nn import TensorDictSequential

from torchrl.modules import EGreedyModule, MLP, QValueActor
from torchrl.train import ACTIVATIONS, make_batched_env


def make_envs(cfg, device):
    """The training envs (``env.num_envs`` of them) and the evaluation envs (``eval_episodes`` of them, so one
    rollout plays every evaluation episode)."""
    name, steps = cfg.env.name, cfg.env.max_episode_steps
    train_env = make_batched_env(name, cfg.env.num_envs, seed=cfg.seed, max_episode_steps=steps, device=device)
    eval_env = make_batched_env(name, cfg.eval_episodes, seed=cfg.seed + 1_000_000, max_episode_steps=steps,
                                device=device)
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
