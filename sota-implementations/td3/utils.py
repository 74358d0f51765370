"""Builders for the TD3 recipe: train/eval envs, the deterministic actor, the Q-network and the
exploration policy."""
from __future__ import annotations

from tensordict.nn import TensorDictModule, TensorDictSequential

from torchrl.modules import AdditiveGaussianModule, MLP, TanhModule, ValueOperator
from torchrl.train import ACTIVATIONS, make_env, NATIVE_ENVS

def make_envs(cfg, device):
    """The training env and the evaluation env (a batch of ``eval_episodes`` pendulums for the native env)."""
    name, steps = cfg.env.name, cfg.env.max_episode_steps
    train_env = make_env(name, seed=cfg.seed, max_episode_steps=steps, device=device)
    eval_batch = cfg.eval_episodes if name in NATIVE_ENVS else None
    eval_env = make_env(name, seed=cfg.seed + 1_000_000, max_episode_steps=steps, batch_size=eval_batch, device=device)
    return train_env, eval_env


def half_width(action_spec) -> float:
    """Mean half-width of the action box: noise scales in the config are fractions of it."""
    return float(((action_spec.space.high - action_spec.space.low) / 2).mean())


def make_td3_agent(cfg, env, device):
    """The deterministic actor (MLP squashed into the action box), the Q-network Q(observation, action) and
    the exploration policy (actor + Gaussian noise, clipped to the box)."""
    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    hidden, activation = list(cfg.network.hidden_sizes), ACTIVATIONS[cfg.network.activation]

    actor = TensorDictSequential(
        TensorDictModule(MLP(in_features=obs_dim, out_features=act_dim, num_cells=hidden, activation_class=activation),
                         in_keys=["observation"], out_keys=["param"]),
        TanhModule(in_keys=["param"], out_keys=["action"], spec=action_spec),
    ).to(device)
    qvalue = ValueOperator(
        MLP(in_features=obs_dim + act_dim, out_features=1, num_cells=hidden, activation_class=activation),
        in_keys=["observation", "action"],
    ).to(device)
    sigma = cfg.exploration.sigma * half_width(action_spec)
    exploration_policy = TensorDictSequential(
        actor,
        AdditiveGaussianModule(action_spec, sigma_init=sigma, sigma_end=sigma, safe=True, device=device),
    )
    return actor, qvalue, exploration_policy
