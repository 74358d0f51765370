"""Transforms that move, select, reshape or cast entries: RenameTransform, SelectTransform, ExcludeTransform,
CatTensors, UnsqueezeTransform/SqueezeTransform, DTypeCastTransform/DoubleToFloat, DeviceCastTransform,
TensorDictPrimer/gSDENoise, ActionMask (deterministic envs from ``../_transform_envs.py``)."""
import torch
from tensordict import TensorDict

import parity
from _transform_envs import CountEnv, MaskEnv, ramp_policy, report, specs
from torchrl.data import Bounded, Composite, LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement, Unbounded
from torchrl.envs import (
    ActionMask,
    CatTensors,
    Compose,
    DeviceCastTransform,
    DoubleToFloat,
    DTypeCastTransform,
    ExcludeTransform,
    RenameTransform,
    SelectTransform,
    SerialEnv,
    SqueezeTransform,
    TensorDictPrimer,
    TransformedEnv,
    UnsqueezeTransform,
    gSDENoise,
)


def _keys(t):
    return {"in_keys": t.in_keys, "out_keys": t.out_keys, "in_keys_inv": t.in_keys_inv, "out_keys_inv": t.out_keys_inv}


def _td():
    return TensorDict(observation=torch.arange(6.0).reshape(2, 3), count=torch.tensor([[1], [2]]),
                      reward=torch.ones(2, 1), done=torch.zeros(2, 1, dtype=torch.bool), batch_size=[2])


def _rb(transform):
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=2,
                      transform=transform)
    rb.extend(_td())
    return rb.sample()


# -- RenameTransform -------------------------------------------------------------------------------------------------
def scenario_rename_keys():
    return {"plain": _keys(RenameTransform(["observation"], ["obs"])),
            "inv": _keys(RenameTransform(["observation"], ["obs"], ["action"], ["act"])),
            "create_copy": RenameTransform(["a"], ["b"], create_copy=True).create_copy}


def scenario_rename_env():
    return report(TransformedEnv(CountEnv(), RenameTransform(["observation", "count"], ["obs", ("nested", "count")])), steps=3)


def scenario_rename_env_create_copy():
    return report(TransformedEnv(CountEnv(), RenameTransform(["observation"], ["obs"], create_copy=True)), steps=3)


def scenario_rename_reward_and_done():
    return parity.attempt(lambda: report(TransformedEnv(CountEnv(max_count=2), RenameTransform(["reward", "done"], ["r", "d"])), steps=3))


def scenario_rename_action_inverse():
    env = TransformedEnv(CountEnv(), RenameTransform([], [], ["action"], ["act"]))
    out = specs(env)
    out["rollout"] = parity.attempt(lambda: env.rollout(3, lambda td: td.set("act", torch.full((1,), 0.25))))
    return out


def scenario_rename_state_inverse():
    env = TransformedEnv(CountEnv(with_state=True), RenameTransform([], [], ["hidden"], ["h"]))
    return parity.attempt(lambda: specs(env))


def scenario_rename_call_and_inv():
    t = RenameTransform(["observation"], ["obs"], ["action"], ["act"])
    return {"call": t(_td()), "inv": t.inv(TensorDict(act=torch.ones(2), batch_size=[]))}


def scenario_rename_errors():
    return {
        "lengths": parity.attempt(lambda: RenameTransform(["a", "b"], ["c"])),
        "inv_lengths": parity.attempt(lambda: RenameTransform(["a"], ["b"], ["c"], [])),
        "missing_key_call": parity.attempt(lambda: RenameTransform(["nope"], ["x"])(_td())),
    }


def scenario_rename_missing_key_env():
    # deliberate: TorchRL silently skips an in_key the env does not produce; ours raises KeyError with the specs
    env = TransformedEnv(CountEnv(), RenameTransform(["nope"], ["x"]))
    return {"specs": parity.attempt(lambda: specs(env)), "reset": parity.attempt(lambda: env.reset())}


def scenario_rename_replay_buffer():
    return _rb(RenameTransform(["observation"], ["obs"]))


# -- SelectTransform / ExcludeTransform ----------------------------------------------------------------------------------
def scenario_select_env():
    return report(TransformedEnv(CountEnv(), SelectTransform("observation")), steps=3)


def scenario_select_no_rewards_dones():
    env = TransformedEnv(CountEnv(), SelectTransform("observation", keep_rewards=False, keep_dones=False))
    return parity.attempt(lambda: report(env, steps=3))


def scenario_select_keys_attrs():
    t = SelectTransform("observation", ("a", "b"))
    return {**_keys(t), "selected_keys": parity.attempt(lambda: t.selected_keys)}


def scenario_select_call():
    return {"plain": SelectTransform("observation")(_td()), "list": parity.attempt(lambda: SelectTransform(["observation", "count"])(_td()))}


def scenario_select_missing_key():
    return parity.attempt(lambda: report(TransformedEnv(CountEnv(), SelectTransform("nope")), steps=2))


def scenario_exclude_env():
    return report(TransformedEnv(CountEnv(), ExcludeTransform("count")), steps=3)


def scenario_exclude_list_and_call():
    return {"list": parity.attempt(lambda: ExcludeTransform(["count", "observation"])(_td())),
            "varargs": ExcludeTransform("count", "observation")(_td()),
            "excluded_keys": ExcludeTransform("count").excluded_keys}


def scenario_exclude_reward_done():
    return parity.attempt(lambda: report(TransformedEnv(CountEnv(), ExcludeTransform("reward", "done")), steps=2))


def scenario_exclude_inverse_specs():
    env = TransformedEnv(CountEnv(with_state=True), ExcludeTransform("hidden", inverse=True))
    return parity.attempt(lambda: specs(env))


def scenario_exclude_inverse_call():
    t = ExcludeTransform("extra", inverse=True)
    td = TensorDict(extra=torch.ones(1), a=torch.ones(1))
    return {"inv": t.inv(td.clone()), "forward": t(td.clone())}


def scenario_exclude_inverse_env():
    # an entry written by the policy that the env does not take (deliberate: TorchRL's reset raises AttributeError)
    env = TransformedEnv(CountEnv(), ExcludeTransform("extra", inverse=True))
    return parity.attempt(lambda: {"reset": env.reset(),
                                   "rollout": env.rollout(2, lambda td: td.set("action", torch.zeros(1)).set("extra", torch.ones(1)))})


def scenario_exclude_missing_key():
    return parity.attempt(lambda: report(TransformedEnv(CountEnv(), ExcludeTransform("nope")), steps=2))


def scenario_select_exclude_replay_buffer():
    return {"select": _rb(SelectTransform("observation")), "exclude": _rb(ExcludeTransform("count"))}


# -- CatTensors ----------------------------------------------------------------------------------------------------------
def scenario_cat_tensors_defaults():
    t = CatTensors(["observation", "count"])
    return {**_keys(t), "dim": t.dim}


def scenario_cat_tensors_env():
    env = TransformedEnv(CountEnv(obs64=False), CatTensors(["observation", "count"], out_key="vec"))
    return parity.attempt(lambda: report(env, steps=3))


def scenario_cat_tensors_float_only():
    env = TransformedEnv(CountEnv(), Compose(DTypeCastTransform(torch.int64, torch.float32, in_keys=["count"]),
                                             CatTensors(["observation", "count"], out_key="vec")))
    return report(env, steps=3)


def scenario_cat_tensors_keep_and_sort():
    env = TransformedEnv(CountEnv(), Compose(DTypeCastTransform(torch.int64, torch.float32, in_keys=["count"]),
                                             CatTensors(["observation", "count"], out_key="vec", del_keys=False, sort=False)))
    return report(env, steps=2)


def scenario_cat_tensors_default_in_keys():
    env = TransformedEnv(CountEnv(), Compose(DTypeCastTransform(torch.int64, torch.float32, in_keys=["count"]), CatTensors()))
    return parity.attempt(lambda: report(env, steps=2))


def scenario_cat_tensors_call():
    t = CatTensors(["observation", "reward"], out_key="v")
    return {"call": t(_td()), "keep": CatTensors(["observation", "reward"], out_key="v", del_keys=False)(_td())}


def scenario_cat_tensors_errors():
    return {
        "missing": parity.attempt(lambda: CatTensors(["observation", "nope"], out_key="v")(_td())),
        "missing_env": parity.attempt(lambda: specs(TransformedEnv(CountEnv(), CatTensors(["observation", "nope"])))),
        "shape_mismatch": parity.attempt(lambda: CatTensors(["observation", "x"], out_key="v")(
            TensorDict(observation=torch.zeros(3), x=torch.zeros(2, 2)))),
        "dim_positive": parity.attempt(lambda: CatTensors(["observation"], dim=0).dim),
    }


def scenario_cat_tensors_oor_without_unsqueeze():
    td = TensorDict(a=torch.zeros(2, 3), b=torch.ones(2), batch_size=[2])
    return parity.attempt(lambda: CatTensors(["a", "b"], out_key="v")(td.clone()))


def scenario_cat_tensors_unsqueeze_if_oor_unbatched():
    td = TensorDict(a=torch.zeros(3), b=torch.ones(()))
    return parity.attempt(lambda: CatTensors(["a", "b"], out_key="v", unsqueeze_if_oor=True)(td.clone()))


def scenario_cat_tensors_unsqueeze_if_oor_batched():
    # deliberate: TorchRL counts batch dims, so a per-row scalar of a batch is not unsqueezed and cat fails
    td = TensorDict(a=torch.zeros(2, 3), b=torch.ones(2), batch_size=[2])
    return parity.attempt(lambda: CatTensors(["a", "b"], out_key="v", unsqueeze_if_oor=True)(td.clone()))


# -- Unsqueeze / Squeeze -------------------------------------------------------------------------------------------------
def scenario_unsqueeze_env():
    return report(TransformedEnv(CountEnv(), UnsqueezeTransform(-1, in_keys=["observation"])), steps=3)


def scenario_unsqueeze_reward_new_key():
    return report(TransformedEnv(CountEnv(), UnsqueezeTransform(-1, in_keys=["reward"], out_keys=["r2"])), steps=2)


def scenario_unsqueeze_inverse_action():
    env = TransformedEnv(CountEnv(), UnsqueezeTransform(-1, in_keys_inv=["action"], out_keys_inv=["action"]))
    out = specs(env)
    out["rollout"] = parity.attempt(lambda: env.rollout(2, lambda td: td.set("action", torch.full((1, 1), 0.5))))
    return out


def scenario_squeeze_env():
    return report(TransformedEnv(CountEnv(), SqueezeTransform(-1, in_keys=["count", "reward"])), steps=3)


def scenario_squeeze_keys_and_dims():
    return {"unsqueeze": {**_keys(UnsqueezeTransform(-1, in_keys=["a"])), "dim": UnsqueezeTransform(-1, in_keys=["a"]).dim},
            "squeeze": {**_keys(SqueezeTransform(-1, in_keys=["a"])), "dim": SqueezeTransform(-1, in_keys=["a"]).dim},
            "positive": parity.attempt(lambda: UnsqueezeTransform(1, in_keys=["a"]).dim),
            "positive_allowed": parity.attempt(lambda: UnsqueezeTransform(1, in_keys=["a"], allow_positive_dim=True).dim),
            "no_dim": parity.attempt(lambda: UnsqueezeTransform(in_keys=["a"]).dim)}


def scenario_squeeze_call():
    td = _td()
    return {"unsqueeze": UnsqueezeTransform(-1, in_keys=["observation"])(td.clone()),
            "squeeze": SqueezeTransform(-1, in_keys=["reward"])(td.clone()),
            "squeeze_non_singleton": parity.attempt(lambda: SqueezeTransform(-1, in_keys=["observation"])(td.clone()))}


def scenario_unsqueeze_batched_env():
    env = TransformedEnv(CountEnv(batch_size=[2]), UnsqueezeTransform(-2, in_keys=["observation"]))
    return report(env, steps=2)


# -- DTypeCastTransform / DoubleToFloat ---------------------------------------------------------------------------------------
def scenario_double_to_float_env():
    return report(TransformedEnv(CountEnv(obs64=True), DoubleToFloat()), steps=3)


def scenario_double_to_float_keys():
    return {"default": _keys(DoubleToFloat()), "given": _keys(DoubleToFloat(in_keys=["obs64"])),
            "dtypes": [DoubleToFloat().dtype_in, DoubleToFloat().dtype_out]}


def scenario_double_to_float_given_keys():
    return report(TransformedEnv(CountEnv(obs64=True), DoubleToFloat(in_keys=["obs64"], out_keys=["obs32"])), steps=2)


def scenario_dtype_cast_env():
    env = TransformedEnv(CountEnv(), DTypeCastTransform(torch.int64, torch.float64, in_keys=["count"]))
    return report(env, steps=3)


def scenario_dtype_cast_all_matching():
    env = TransformedEnv(CountEnv(obs64=True), DTypeCastTransform(torch.float32, torch.float64))
    return parity.attempt(lambda: report(env, steps=2))


def scenario_dtype_cast_action_inverse():
    env = TransformedEnv(CountEnv(), DTypeCastTransform(torch.float32, torch.float64, in_keys_inv=["action"]))
    out = specs(env)
    out["rollout"] = parity.attempt(lambda: env.rollout(2, lambda td: td.set("action", torch.full((1,), 0.5, dtype=torch.float64))))
    return out


def scenario_double_to_float_inverse_state():
    env = TransformedEnv(CountEnv(with_state=True), DoubleToFloat(in_keys_inv=["hidden"]))
    return parity.attempt(lambda: specs(env))


def scenario_dtype_cast_call():
    td = TensorDict(a=torch.arange(3), b=torch.ones(2, dtype=torch.float64))
    return {"int_to_float": DTypeCastTransform(torch.int64, torch.float32, in_keys=["a"])(td.clone()),
            "double": DoubleToFloat(in_keys=["b"])(td.clone()),
            "no_keys": parity.attempt(lambda: DoubleToFloat()(td.clone())),
            "inv": DoubleToFloat(in_keys_inv=["c"]).inv(TensorDict(c=torch.ones(2))),
            "wrong_dtype": parity.attempt(lambda: DoubleToFloat(in_keys=["a"])(td.clone()))}


def scenario_dtype_cast_replay_buffer():
    return _rb(DTypeCastTransform(torch.int64, torch.float32, in_keys=["count"]))


# -- DeviceCastTransform ------------------------------------------------------------------------------------------------------
def scenario_device_cast_cpu_env():
    env = TransformedEnv(CountEnv(), DeviceCastTransform("cpu"))
    out = report(env, steps=2)
    out["device"] = env.device
    return out


def scenario_device_cast_keys():
    t = DeviceCastTransform("cpu", "cpu")
    return {**_keys(t), "device": t.device, "orig_device": parity.attempt(lambda: t.orig_device)}


def scenario_device_cast_call():
    return {"all": DeviceCastTransform("cpu")(_td()), "some": DeviceCastTransform("cpu", in_keys=["observation"])(_td())}


# -- TensorDictPrimer / gSDENoise ---------------------------------------------------------------------------------------------
def scenario_primer_default_zeros():
    env = TransformedEnv(CountEnv(), TensorDictPrimer(mem=Unbounded((4,))))
    return report(env, steps=3)


def scenario_primer_default_value():
    env = TransformedEnv(CountEnv(), TensorDictPrimer(mem=Unbounded((2,)), default_value=3.0))
    return report(env, steps=2)


def scenario_primer_composite():
    env = TransformedEnv(CountEnv(), TensorDictPrimer(Composite(a=Unbounded((2,)), b=Bounded(0, 1, (1,)))))
    return report(env, steps=2)


def scenario_primer_random():
    env = TransformedEnv(CountEnv(), TensorDictPrimer(mem=Bounded(-1.0, 1.0, (3,)), random=True))
    td = env.reset()
    return {"structure": parity.structure(td), "in_bounds": bool(td["mem"].abs().le(1).all()), "specs": specs(env)}


def scenario_primer_random_and_default():
    return parity.attempt(lambda: TensorDictPrimer(mem=Unbounded((2,)), random=True, default_value=1.0))


def scenario_primer_default_value_dict():
    env = TransformedEnv(CountEnv(), TensorDictPrimer(a=Unbounded((2,)), b=Unbounded((1,)), default_value={"a": 1.0, "b": 2.0}))
    return parity.attempt(lambda: env.reset())


def scenario_primer_batched_env():
    env = TransformedEnv(CountEnv(batch_size=[3]), TensorDictPrimer(mem=Unbounded((2,))))
    return report(env, steps=2)


def scenario_primer_expand_specs():
    env = TransformedEnv(CountEnv(batch_size=[3]), TensorDictPrimer(mem=Unbounded((3, 2)), expand_specs=False))
    return parity.attempt(lambda: report(env, steps=2))


def scenario_primer_keys():
    t = TensorDictPrimer(mem=Unbounded((4,)))
    return {**_keys(t), "primers": t.primers, "random": t.random, "default_value": parity.attempt(lambda: t.default_value)}


def scenario_primer_partial_reset():
    env = TransformedEnv(CountEnv(batch_size=[2], max_count=10), TensorDictPrimer(mem=Unbounded((1,)), default_value=0.0))
    td = env.reset()
    td["mem"] = torch.tensor([[5.0], [6.0]])
    td["_reset"] = torch.tensor([[True], [False]])
    return env.reset(td)


def scenario_primer_serial_env():
    env = TransformedEnv(SerialEnv(2, CountEnv), TensorDictPrimer(mem=Unbounded((2,)), expand_specs=True))
    return {"reset": env.reset(), "rollout": env.rollout(2, ramp_policy()), "state_spec": parity.structure(env.state_spec)}


def scenario_primer_batched_env_expand():
    env = TransformedEnv(CountEnv(batch_size=[3]), TensorDictPrimer(mem=Unbounded((2,)), expand_specs=True))
    return report(env, steps=2)


def scenario_primer_call_unbatched():
    t3 = TensorDictPrimer(mem=Unbounded((3,)), default_value=1.5)
    return t3(TensorDict(a=torch.zeros(2)))


def scenario_primer_call_batched():
    # deliberate: TorchRL reads the spec as including the batch dims (and raises when it does not lead with them)
    t = TensorDictPrimer(mem=Unbounded((2,)), default_value=1.5)
    t3 = TensorDictPrimer(mem=Unbounded((3,)), default_value=1.5)
    return {"matching": parity.attempt(lambda: t(_td())), "mismatch": parity.attempt(lambda: t3(_td()))}


def scenario_gsde_noise():
    env = TransformedEnv(CountEnv(), gSDENoise(state_dim=3, action_dim=1))
    return report(env, steps=2)


def scenario_gsde_noise_shape():
    env = TransformedEnv(CountEnv(), gSDENoise(shape=(2, 5)))
    return parity.attempt(lambda: {"reset": env.reset(), "spec": env.observation_spec})


# -- ActionMask -------------------------------------------------------------------------------------------------------------
def scenario_action_mask_defaults():
    return _keys(ActionMask())


def scenario_action_mask_categorical():
    env = TransformedEnv(MaskEnv(), ActionMask())
    out = specs(env)
    out["reset"] = env.reset()
    out["action_spec_mask"] = parity.attempt(lambda: env.action_spec.mask)
    out["rand_actions"] = [int(env.rand_action(env.reset())["action"]) for _ in range(5)]
    return out


def scenario_action_mask_rollout_is_valid():
    env = TransformedEnv(MaskEnv(n=5), ActionMask())
    data = env.rollout(4)
    ok = [bool(m[a]) for m, a in zip(data["action_mask"], data["action"])]
    return {"valid": ok, "structure": parity.structure(data)}


def scenario_action_mask_one_hot():
    env = TransformedEnv(MaskEnv(one_hot=True), ActionMask())
    data = env.rollout(4)
    ok = [bool(m[a.argmax()]) for m, a in zip(data["action_mask"], data["action"])]
    return {"valid": ok, "structure": parity.structure(data), "spec": env.action_spec}


def scenario_action_mask_errors():
    return {"continuous": parity.attempt(lambda: TransformedEnv(CountEnv(), ActionMask()).reset()),
            "call": parity.attempt(lambda: ActionMask()(TensorDict(action=torch.tensor(1), action_mask=torch.ones(3, dtype=torch.bool)))),
            "bad_key": parity.attempt(lambda: ActionMask(action_key=["a"]))}


def scenario_cat_tensors_mixed_float_dtypes():
    # float32 and float64 entries concatenate (type promotion) into float64 data
    t = CatTensors(["a", "b"], out_key="v", del_keys=False)
    spec = t.transform_observation_spec(Composite(a=Bounded(-5, 5, (2,)), b=Unbounded((1,), dtype=torch.float64)))
    data = t(TensorDict(a=torch.zeros(2), b=torch.zeros(1, dtype=torch.float64)))
    return [spec["v"], data["v"].dtype]
