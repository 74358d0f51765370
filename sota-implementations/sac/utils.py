"""Builders for the SAC recipe: train/eval envs and the actor / Q-network pair."""
from __future__ import annotations

from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.train import ACTIVATIONS, make_env, NATIVE_ENVS

def make_envs(cfg, device):
    """The training env and the evaluation env (a batch of ``eval_episodes`` pendulums for the native env,
    so one rollout evaluates every episode; one env played repeatedly otherwise)."""
    name, steps = cfg.env.name, cfg.env.max_episode_steps
    train_env = make_env(name, seed=cfg.seed, max_episode_steps=steps, device=device)
    eval_batch = cfg.eval_episodes if name in NATIVE_ENVS else None
    eval_env = make_env(name, seed=cfg.seed + 1_000_000, max_episode_steps=steps, batch_size=eval_batch, device=device)
    return train_env, eval_env


def make_sac_agent(cfg, env, device):
    """A tanh-Gaussian actor (MLP -> loc, scale) and a Q-network Q(observation, action)."""
    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    hidden, activation = list(cfg.network.hidden_sizes), ACTIVATIONS[cfg.network.activation]

    actor_net = nn.Sequential(
        MLP(in_features=obs_dim, out_features=2 * act_dim, num_cells=hidden, activation_class=activation),
        NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=cfg.network.scale_lb),
    )
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=action_spec,
        distribution_class=TanhNormal,
        distribution_kwargs={"low": action_spec.space.low, "high": action_spec.space.high},
    )
    qvalue = ValueOperator(
        MLP(in_features=obs_dim + act_dim, out_features=1, num_cells=hidden, activation_class=activation),
        in_keys=["observation", "action"],
    )
    return actor.to(device), qvalue.to(device)
