"""Transforms that change values: ObservationNorm, RewardScaling, RewardClipping, ClipTransform, VecNorm
(deterministic envs from ``../_transform_envs.py``)."""
import torch
from tensordict import TensorDict

import parity
from _transform_envs import CountEnv, const_policy, ramp_policy, report, specs
from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from torchrl.envs import (
    ClipTransform,
    GymEnv,
    ObservationNorm,
    RewardClipping,
    RewardScaling,
    SerialEnv,
    TransformedEnv,
    VecNorm,
)


def _keys(t):
    return {"in_keys": t.in_keys, "out_keys": t.out_keys, "in_keys_inv": t.in_keys_inv, "out_keys_inv": t.out_keys_inv}


def _td():
    return TensorDict(observation=torch.arange(6.0).reshape(2, 3), reward=torch.tensor([[-3.0], [4.0]]),
                      action=torch.tensor([[0.5], [-2.0]]), batch_size=[2])


def _rb(transform):
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=2,
                      transform=transform)
    rb.extend(_td())
    return rb.sample()


# -- ObservationNorm ------------------------------------------------------------------------------------------------------
def scenario_obs_norm_defaults():
    t = ObservationNorm(loc=1.0, scale=2.0)
    return {**_keys(t), "loc": t.loc, "scale": t.scale, "standard_normal": t.standard_normal,
            "eps": parity.attempt(lambda: t.eps), "initialized": parity.attempt(lambda: t.initialized)}


def scenario_obs_norm_env():
    return report(TransformedEnv(CountEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"])), steps=3)


def scenario_obs_norm_standard_normal():
    env = TransformedEnv(CountEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], standard_normal=True))
    return report(env, steps=3)


def scenario_obs_norm_tensor_params_out_key():
    t = ObservationNorm(loc=torch.tensor([0.0, 1.0, 2.0]), scale=torch.tensor([1.0, 2.0, 4.0]), in_keys=["observation"],
                        out_keys=["obs_n"])
    return report(TransformedEnv(CountEnv(), t), steps=2)


def scenario_obs_norm_init_stats():
    env = TransformedEnv(CountEnv(max_count=100), ObservationNorm(in_keys=["observation"]))
    t = env.transform
    out = {"before": parity.attempt(lambda: t.initialized)}
    torch.manual_seed(0)
    t.init_stats(num_iter=5, reduce_dim=0, cat_dim=0)
    out.update(loc=parity.structure(t.loc), scale=parity.structure(t.scale), after=t.initialized,
               specs=parity.structure(specs(env)))
    return out


def scenario_obs_norm_init_stats_keep_dims():
    env = TransformedEnv(CountEnv(max_count=100), ObservationNorm(in_keys=["observation"], standard_normal=True))
    env.transform.init_stats(num_iter=4, reduce_dim=(0, 1), cat_dim=0, keep_dims=(0, 1))
    return {"loc": parity.structure(env.transform.loc), "scale": parity.structure(env.transform.scale)}


def scenario_obs_norm_uninitialized():
    env = TransformedEnv(CountEnv(), ObservationNorm(in_keys=["observation"]))
    return {"reset": parity.attempt(lambda: env.reset()), "spec": parity.attempt(lambda: env.observation_spec)}


def scenario_obs_norm_inverse():
    t = ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["action"])
    env = TransformedEnv(CountEnv(), t)
    out = specs(env)
    out["inv"] = t.inv(TensorDict(action=torch.tensor([3.0])))
    out["rollout"] = env.rollout(2, const_policy(0.5))
    return out


def scenario_obs_norm_call_and_rb():
    t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"])
    return {"call": t(_td()), "rb": _rb(ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"]))}


def scenario_obs_norm_errors():
    return {
        "missing": parity.attempt(lambda: ObservationNorm(loc=0.0, scale=1.0, in_keys=["nope"])(_td())),
        "missing_env": parity.attempt(lambda: specs(TransformedEnv(CountEnv(), ObservationNorm(loc=0.0, scale=1.0, in_keys=["nope"])))),
        "init_twice": parity.attempt(lambda: ObservationNorm(loc=0.0, scale=1.0, in_keys=["observation"]).init_stats(3)),
        "init_without_parent": parity.attempt(lambda: ObservationNorm(in_keys=["observation"]).init_stats(3)),
    }


# -- RewardScaling ---------------------------------------------------------------------------------------------------------
def scenario_reward_scaling_defaults():
    t = RewardScaling(1.0, 2.0)
    return {**_keys(t), "loc": t.loc, "scale": t.scale, "standard_normal": t.standard_normal}


def scenario_reward_scaling_env():
    return report(TransformedEnv(CountEnv(), RewardScaling(1.0, 2.0)), steps=3)


def scenario_reward_scaling_standard_normal():
    return report(TransformedEnv(CountEnv(), RewardScaling(1.0, 2.0, standard_normal=True)), steps=3)


def scenario_reward_scaling_out_key():
    return report(TransformedEnv(CountEnv(), RewardScaling(0.5, 3.0, in_keys=["reward"], out_keys=["scaled"])), steps=2)


def scenario_reward_scaling_call_and_rb():
    return {"call": RewardScaling(1.0, 2.0)(_td()), "rb": _rb(RewardScaling(1.0, 2.0))}


def scenario_reward_scaling_errors():
    return {"zero_scale": parity.attempt(lambda: RewardScaling(0.0, 0.0)(_td())),
            "tensor": parity.attempt(lambda: RewardScaling(torch.tensor([1.0]), torch.tensor([2.0]))(_td()))}


def scenario_reward_scaling_negative_scale():
    # deliberate: TorchRL silently replaces a negative scale with 1e-6
    return parity.attempt(lambda: RewardScaling(0.0, -1.0)(_td()))


# -- RewardClipping ----------------------------------------------------------------------------------------------------------
def scenario_reward_clipping_defaults():
    t = RewardClipping(-1.0, 1.0)
    return {**_keys(t), "clamp_min": t.clamp_min, "clamp_max": t.clamp_max}


def scenario_reward_clipping_env():
    return report(TransformedEnv(CountEnv(), RewardClipping(-1.0, 1.2)), steps=4)


def scenario_reward_clipping_one_sided():
    return {"min": report(TransformedEnv(CountEnv(), RewardClipping(clamp_min=1.3)), steps=3),
            "max": RewardClipping(clamp_max=1.0)(_td())}


def scenario_reward_clipping_call_and_rb():
    return {"call": RewardClipping(-1.0, 1.0)(_td()), "rb": _rb(RewardClipping(-1.0, 1.0))}


def scenario_reward_clipping_errors():
    return {"none": parity.attempt(lambda: RewardClipping()(_td()))}


def scenario_reward_clipping_inverted():
    # deliberate: TorchRL accepts clamp_min > clamp_max (every reward becomes clamp_max); ours raises ValueError
    return parity.attempt(lambda: RewardClipping(2.0, 1.0)(_td()))


# -- ClipTransform -----------------------------------------------------------------------------------------------------------
def scenario_clip_defaults():
    t = ClipTransform(in_keys=["observation"], low=0.0, high=1.0)
    return {**_keys(t), "low": t.low, "high": t.high}


def scenario_clip_env():
    return report(TransformedEnv(CountEnv(), ClipTransform(in_keys=["observation", "reward"], low=0.5, high=2.5)), steps=3)


def scenario_clip_one_sided_env():
    return {"low": report(TransformedEnv(CountEnv(), ClipTransform(in_keys=["observation"], low=1.5)), steps=2),
            "high": report(TransformedEnv(CountEnv(), ClipTransform(in_keys=["observation"], high=1.5)), steps=2)}


def scenario_clip_inverse_action():
    env = TransformedEnv(CountEnv(), ClipTransform(in_keys_inv=["action"], low=-0.2, high=0.3))
    out = specs(env)
    out["rollout"] = env.rollout(3, ramp_policy())
    return out


def scenario_clip_call_and_rb():
    return {"call": ClipTransform(in_keys=["observation", "reward"], low=0.0, high=3.0)(_td()),
            "rb": _rb(ClipTransform(in_keys=["reward"], low=0.0, high=3.0))}


def scenario_clip_errors():
    return {"inverted": parity.attempt(lambda: ClipTransform(in_keys=["observation"], low=2.0, high=1.0)),
            "none": parity.attempt(lambda: ClipTransform(in_keys=["observation"])(_td())),
            "tensor_bounds": parity.attempt(lambda: ClipTransform(in_keys=["observation"], low=torch.tensor(0.5), high=torch.tensor(1.5))(_td()))}


# -- VecNorm -----------------------------------------------------------------------------------------------------------------
def scenario_vecnorm_defaults():
    t = VecNorm()
    return {**_keys(t), "decay": parity.attempt(lambda: t.decay), "eps": parity.attempt(lambda: t.eps)}


def scenario_vecnorm_env():
    env = TransformedEnv(CountEnv(max_count=100), VecNorm(in_keys=["observation"]))
    return report(env, steps=4)


def scenario_vecnorm_env_reward_and_decay():
    env = TransformedEnv(CountEnv(max_count=100), VecNorm(in_keys=["observation", "reward"], decay=0.9))
    return report(env, steps=4)


def scenario_vecnorm_state_dict():
    env = TransformedEnv(CountEnv(max_count=100), VecNorm(in_keys=["observation"]))
    env.rollout(3, ramp_policy())
    return parity.structure(dict(env.transform.state_dict()))


def scenario_vecnorm_call():
    t = VecNorm(in_keys=["observation"])
    return parity.attempt(lambda: t(_td()))


def scenario_vecnorm_serial():
    env = TransformedEnv(SerialEnv(2, lambda: CountEnv(max_count=100)), VecNorm(in_keys=["observation"]))
    try:
        return report(env, steps=3)
    finally:
        env.close()


def scenario_vecnorm_gym_pendulum():
    env = TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"]))
    env.set_seed(0)
    data = env.rollout(5, lambda td: td.set("action", torch.tensor([0.3])))
    return {"structure": parity.structure(data), "specs": parity.structure(specs(env))}
