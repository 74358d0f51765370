"""The transform library of issue 20: time, trajectory, reward, action, state and statistics transforms on
deterministic envs and data (``../_transform_envs.py``)."""
import torch
from tensordict import TensorDict

import parity
from _transform_envs import CountEnv, ramp_policy, report, specs
from torchrl.data import LazyTensorStorage, ReplayBuffer, SliceSampler
from torchrl.envs import Compose, PendulumEnv, StepCounter, TransformedEnv
from torchrl.envs.transforms import (
    ActionDiscretizer,
    BinarizeReward,
    CatFrames,
    EndOfLifeTransform,
    Hash,
    LineariseRewards,
    MultiStepTransform,
    NextStateReconstructor,
    RandomCropTensorDict,
    Reward2GoTransform,
    SignTransform,
    TargetReturn,
    TerminateTransform,
    TimeMaxPool,
    VecNormV2,
)


def _trajectories():
    """Two trajectories (lengths 4 and 3) of observations 1..4 and 11..13, rewards 1..7, flat."""
    obs = torch.tensor([1.0, 2.0, 3.0, 4.0, 11.0, 12.0, 13.0]).unsqueeze(-1)
    done = torch.tensor([False, False, False, True, False, False, True]).unsqueeze(-1)
    return TensorDict(
        {"observation": obs, "reward": torch.arange(1.0, 8.0).unsqueeze(-1),
         ("next", "observation"): obs + 1, ("next", "reward"): torch.arange(1.0, 8.0).unsqueeze(-1),
         ("next", "done"): done, ("next", "terminated"): done, ("next", "truncated"): torch.zeros_like(done)},
        batch_size=[7],
    )


# -- time -----------------------------------------------------------------------------------------------------------
def scenario_cat_frames_env_same_padding():
    return report(TransformedEnv(CountEnv(max_count=3), CatFrames(N=3, dim=-1, in_keys=["observation"])), steps=6)


def scenario_cat_frames_env_constant_padding_batched():
    t = CatFrames(N=2, dim=-1, in_keys=["observation"], out_keys=["stack"], padding="constant", padding_value=-1.0)
    return report(TransformedEnv(CountEnv(max_count=2, batch_size=[2]), t), steps=5)


def scenario_cat_frames_unfold_offline():
    t = CatFrames(N=3, dim=-1, in_keys=["observation", ("next", "observation")])
    return t(_trajectories().unsqueeze(0))


def scenario_cat_frames_replay_buffer_slices():
    rb = ReplayBuffer(
        storage=LazyTensorStorage(10), sampler=SliceSampler(slice_len=3, end_key=("next", "done")), batch_size=6,
        transform=CatFrames(N=2, dim=-1, in_keys=["observation"], out_keys=["stack"]),
    )
    rb.extend(_trajectories())
    return parity.structure(rb.sample())


def scenario_time_max_pool_env():
    return report(TransformedEnv(CountEnv(max_count=3), TimeMaxPool(in_keys=["observation"], T=2)), steps=5)


# -- trajectory -----------------------------------------------------------------------------------------------------
def scenario_multi_step_in_buffer():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=MultiStepTransform(n_steps=2, gamma=0.5))
    rb.extend(_trajectories().unsqueeze(0).reshape(-1)[:7])
    return rb[:]


def scenario_reward2go_on_extend():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=Reward2GoTransform(gamma=0.5, out_keys=["reward_to_go"]))
    rb.extend(_trajectories())
    return rb[:]["reward_to_go"]


def scenario_random_crop_shapes():
    torch.manual_seed(0)
    out = RandomCropTensorDict(sub_seq_len=2)(_trajectories().unsqueeze(0))
    return parity.structure(out)


def scenario_next_state_reconstructor():
    data = _trajectories()
    return NextStateReconstructor(keys=["observation"])(data.exclude(("next", "observation")).unsqueeze(0))


# -- rewards and actions ------------------------------------------------------------------------------------------
def scenario_sign_reward():
    return report(TransformedEnv(CountEnv(max_count=4), SignTransform(in_keys=["reward"], out_keys=["sign"])), steps=4)


def scenario_binarize_reward():
    return report(TransformedEnv(CountEnv(max_count=4), BinarizeReward(in_keys=["reward"], out_keys=["binary"])), steps=4)


def scenario_linearise_rewards():
    t = LineariseRewards(in_keys=["reward"], out_keys=["linear"], weights=[3.0])
    return report(TransformedEnv(CountEnv(max_count=4), t), steps=4)


def scenario_target_return():
    return report(TransformedEnv(CountEnv(max_count=4), TargetReturn(10.0, out_keys=["target"])), steps=4)


def scenario_action_discretizer_pendulum():
    env = TransformedEnv(PendulumEnv(), ActionDiscretizer(num_intervals=5))
    td = env.reset()
    outs = []
    for a in range(5):
        td["action"] = torch.tensor([a])
        outs.append(env.transform.inv(td.clone())["action"])
    return {"spec": env.full_action_spec, "actions": torch.stack(outs)}


def scenario_hash_values():
    return Hash(in_keys=["observation"], out_keys=["hash"])(TensorDict(observation=torch.arange(6.0).reshape(2, 3), batch_size=[2]))["hash"].shape


# -- state ------------------------------------------------------------------------------------------------------------
def scenario_terminate_transform():
    env = TransformedEnv(CountEnv(max_count=10), TerminateTransform(lambda td: td["next", "count"] >= 2))
    return report(env, steps=4)


def scenario_end_of_life_specs():
    t = EndOfLifeTransform(eol_key="end-of-life", lives_key="lives")
    return {"in_keys": t.in_keys, "out_keys": t.out_keys, "eol_key": t.eol_key}


# -- statistics -------------------------------------------------------------------------------------------------------
def scenario_vecnorm_v2_decay_one():
    env = TransformedEnv(CountEnv(max_count=20), VecNormV2(in_keys=["observation"], decay=1.0, eps=1e-4))
    data = env.rollout(5, ramp_policy(), break_when_any_done=False)
    return {"obs": data["next", "observation"], "specs": specs(env)}


def scenario_step_counter_with_cat_frames():
    return report(TransformedEnv(CountEnv(max_count=2), Compose(StepCounter(3), CatFrames(N=2, dim=-1, in_keys=["observation"]))), steps=5)
