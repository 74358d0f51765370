"""Builders for the DDPG recipe: train/eval envs, the deterministic actor, the critic and the exploration
policy (Gaussian or Ornstein-Uhlenbeck noise)."""
from __future__ import annotations

from tensordict.nn import TensorDictModule, TensorDictSequential

from torchrl.envs import InitTracker
from torchrl.modules import AdditiveGaussianModule, MLP, OrnsteinUhlenbeckProcessModule, TanhModule, ValueOperator
from torchrl.train import ACTIVATIONS, make_env, NATIVE_ENVS

NOISES = ("gaussian", "ou")


def make_envs(cfg, device):
    """The training env (with an ``InitTracker`` for OU noise, which restarts at each episode) and the
    evaluation env (a batch of ``eval_episodes`` pendulums for the native env)."""
    if cfg.exploration.type not in NOISES:
        raise ValueError(f"ddpg: exploration.type must be one of {list(NOISES)}, got {cfg.exploration.type!r}.")
    name, steps = cfg.env.name, cfg.env.max_episode_steps
    extra = [InitTracker()] if cfg.exploration.type == "ou" else []
    train_env = make_env(name, seed=cfg.seed, max_episode_steps=steps, device=device, transforms=extra)
    eval_batch = cfg.eval_episodes if name in NATIVE_ENVS else None
    eval_env = make_env(name, seed=cfg.seed + 1_000_000, max_episode_steps=steps, batch_size=eval_batch, device=device)
    return train_env, eval_env


def half_width(action_spec) -> float:
    """Mean half-width of the action box: noise scales in the config are fractions of it."""
    return float(((action_spec.space.high - action_spec.space.low) / 2).mean())


def make_ddpg_agent(cfg, env, device):
    """The deterministic actor (MLP squashed into the action box), the critic Q(observation, action) and the
    exploration policy (actor + noise, clipped to the box)."""
    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    hidden, activation = list(cfg.network.hidden_sizes), ACTIVATIONS[cfg.network.activation]

    actor = TensorDictSequential(
        TensorDictModule(MLP(in_features=obs_dim, out_features=act_dim, num_cells=hidden, activation_class=activation),
                         in_keys=["observation"], out_keys=["param"]),
        TanhModule(in_keys=["param"], out_keys=["action"], spec=action_spec),
    ).to(device)
    critic = ValueOperator(
        MLP(in_features=obs_dim + act_dim, out_features=1, num_cells=hidden, activation_class=activation),
        in_keys=["observation", "action"],
    ).to(device)
    sigma = cfg.exploration.sigma * half_width(action_spec)
    if cfg.exploration.type == "ou":
        # dt=1: sigma is the per-step noise scale; the stationary std is sigma / sqrt(2 theta)
        noise = OrnsteinUhlenbeckProcessModule(action_spec, eps_init=1.0, eps_end=1.0, theta=cfg.exploration.ou_theta,
                                               sigma=sigma, dt=1.0, safe=True, device=device)
    else:
        noise = AdditiveGaussianModule(action_spec, sigma_init=sigma, sigma_end=sigma, safe=True, device=device)
    return actor, critic, TensorDictSequential(actor, noise)
