"""Transforms, the machinery: Transform defaults, Compose as a list, TransformedEnv's API, batched envs, buffers.

Batched envs and replay buffers are in ``transforms_batched.py``, the transforms one by one in the other
``transforms_*.py`` files; the deterministic envs are in ``../_transform_envs.py``.
"""
import torch
from tensordict import TensorDict

import parity
from _transform_envs import CountEnv, const_policy, ramp_policy, report, specs
from torchrl.envs import (
    Compose,
    DoubleToFloat,
    InitTracker,
    ObservationNorm,
    ObservationTransform,
    RenameTransform,
    RewardScaling,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
    UnsqueezeTransform,
)


def _keys(t):
    return {"in_keys": t.in_keys, "out_keys": t.out_keys, "in_keys_inv": t.in_keys_inv, "out_keys_inv": t.out_keys_inv}


def _names(transform):
    return [type(t).__name__ for t in transform]


# -- Transform base ---------------------------------------------------------------------------------------------
def scenario_transform_default_keys():
    return {
        "plain": _keys(Transform()),
        "in_only": _keys(Transform(in_keys=["a", ("b", "c")])),
        "in_out": _keys(Transform(in_keys=["a"], out_keys=["b"])),
        "inv": _keys(Transform(in_keys_inv=["action"], out_keys_inv=["act"])),
        "inv_only": _keys(Transform(in_keys_inv=["action"])),
        "string": parity.attempt(lambda: _keys(Transform(in_keys="a", out_keys="b"))),
        "observation": _keys(ObservationTransform()),
    }


def scenario_transform_standalone_attributes():
    t = StepCounter()
    return {"parent": t.parent, "container": t.container, "missing_tolerance": t.missing_tolerance}


class _Double(Transform):
    def _apply_transform(self, x):
        return x * 2

    def _inv_apply_transform(self, x):
        return x / 2

    def transform_observation_spec(self, observation_spec):
        return observation_spec


def scenario_transform_subclass_call_and_inv():
    t = _Double(in_keys=["observation"], out_keys=["obs2"], in_keys_inv=["action"], out_keys_inv=["action_outer"])
    td = TensorDict(observation=torch.arange(3.0), action_outer=torch.tensor([4.0]))
    called = t(td.clone())
    inv = t.inv(td.clone())
    return {"call": called, "inv": inv, "input_untouched_by_inv": td}


def scenario_transform_subclass_in_env():
    env = TransformedEnv(CountEnv(), _Double(in_keys=["observation"], out_keys=["obs2"]))
    return {"reset": env.reset(), "rollout": env.rollout(3, ramp_policy()),
            "obs_keys": sorted(env.observation_spec.keys())}


def scenario_transform_subclass_default_reset():
    # a subclass that keeps Transform's own _reset: TorchRL leaves reset outputs untransformed (deliberate)
    env = TransformedEnv(CountEnv(), _Double(in_keys=["observation"], out_keys=["observation"]))
    return {"reset": env.reset(), "rollout": env.rollout(3, ramp_policy())}


class _DoubleWithReset(_Double):
    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)


def scenario_transform_subclass_reset_override():
    env = TransformedEnv(CountEnv(), _DoubleWithReset(in_keys=["observation"], out_keys=["observation"]))
    return {"reset": env.reset(), "rollout": env.rollout(3, ramp_policy())}


def scenario_transform_subclass_inverse_in_env():
    env = TransformedEnv(CountEnv(), _Double(in_keys_inv=["action"], out_keys_inv=["action"]))
    return env.rollout(3, const_policy(0.5))


def scenario_transform_missing_key_call():
    t = _Double(in_keys=["nope"])
    out = {"strict": parity.attempt(lambda: t(TensorDict(observation=torch.zeros(2))))}
    t.set_missing_tolerance(True)
    out["tolerant"] = parity.attempt(lambda: t(TensorDict(observation=torch.zeros(2))))
    return out


def scenario_transform_mismatched_keys():
    return [parity.attempt(lambda: _Double(in_keys=["a", "b"], out_keys=["c"])(TensorDict(a=torch.ones(1), b=torch.ones(1))))]


def scenario_transform_clone():
    t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"])
    env = TransformedEnv(CountEnv(), t)
    c = t.clone()
    return {"type": type(c).__name__, "keys": _keys(c), "parent": c.parent, "loc": c.loc, "scale": c.scale,
            "original_parent_type": type(t.parent).__name__}


# -- Compose --------------------------------------------------------------------------------------------------
def scenario_compose_list_behaviour():
    c = Compose(StepCounter(), RewardSum(), InitTracker())
    out = {"len": len(c), "first": type(c[0]).__name__, "last": type(c[-1]).__name__, "iter": _names(c)}
    rev = c[::-1]
    out["reversed_type"] = type(rev).__name__
    out["reversed"] = _names(rev)
    out["slice"] = _names(c[1:])
    out["slice_type"] = type(c[1:]).__name__
    out["list_index"] = parity.attempt(lambda: _names(c[[0, 2]]))
    c.append(DoubleToFloat())
    c.insert(0, RenameTransform(["observation"], ["obs"]))
    c.insert(-1, UnsqueezeTransform(-1, in_keys=["x"]))
    out["after_edits"] = _names(c)
    out["keys"] = _keys(c)
    out["index_error"] = parity.attempt(lambda: c[10])
    out["insert_out_of_range"] = parity.attempt(lambda: c.insert(20, StepCounter()))
    return out


def scenario_compose_empty_and_list_argument():
    return {"empty": len(Compose()), "empty_keys": _keys(Compose()),
            "list": parity.attempt(lambda: len(Compose([StepCounter(), RewardSum()])))}


def scenario_compose_clone():
    c = Compose(StepCounter(5), RewardScaling(1.0, 2.0))
    env = TransformedEnv(CountEnv(), c)
    cl = c.clone()
    return {"names": _names(cl), "type": type(cl).__name__, "parent": cl.parent, "child_parent": cl[0].parent,
            "max_steps": cl[0].max_steps, "scale": cl[1].scale, "env_still_has": len(env.transform)}


def scenario_compose_nested_in_env():
    inner = Compose(StepCounter(3), RewardSum())
    env = TransformedEnv(CountEnv(max_count=10), Compose(inner, RewardScaling(0.0, 10.0)))
    out = report(env, steps=5)
    out["parent_of_inner_first"] = type(inner[0].parent).__name__
    out["parent_of_scaling"] = _names(env.transform[1].parent.transform)
    out["inner_parent_transforms"] = _names(inner[1].parent.transform)
    return out


def scenario_compose_nested_first():
    env = TransformedEnv(CountEnv(max_count=10), Compose(Compose(RewardScaling(0.0, 2.0), RewardSum()), StepCounter(3)))
    return report(env, steps=5)


def scenario_compose_nested_last():
    env = TransformedEnv(CountEnv(max_count=10), Compose(RewardScaling(0.0, 2.0), Compose(StepCounter(3), RewardSum())))
    out = report(env, steps=5)
    out["inner_parent"] = _names(env.transform[1][0].parent.transform)
    return out


def scenario_compose_call_outside_env():
    c = Compose(RenameTransform(["a"], ["b"]), RewardScaling(1.0, 3.0, in_keys=["b"]))
    td = TensorDict(a=torch.tensor([1.0, 2.0]))
    return c(td)


def scenario_compose_inv_order():
    c = Compose(_Double(in_keys_inv=["action"], out_keys_inv=["a1"]), _Double(in_keys_inv=["a1"], out_keys_inv=["a2"]))
    return c.inv(TensorDict(a2=torch.tensor([8.0])))


def scenario_compose_transform_in_two_containers():
    t = StepCounter()
    Compose(t)
    return {"second_compose": parity.attempt(lambda: len(Compose(t))),
            "env": parity.attempt(lambda: type(TransformedEnv(CountEnv(), t)).__name__)}


# -- TransformedEnv API ---------------------------------------------------------------------------------------------
def scenario_transformed_env_no_transform():
    env = TransformedEnv(CountEnv())
    return {"transform": type(env.transform).__name__, "len": len(env.transform), **report(env, steps=3)}


def scenario_transformed_env_single_transform_attribute():
    env = TransformedEnv(CountEnv(), StepCounter())
    return {"transform": type(env.transform).__name__, "base": type(env.base_env).__name__,
            "parent": type(env.transform.parent).__name__, "parent_base": type(env.transform.parent.base_env).__name__,
            "container": type(env.transform.container).__name__}


def scenario_transformed_env_append_insert():
    env = TransformedEnv(CountEnv(), StepCounter())
    ret = env.append_transform(RewardSum())
    out = {"append_returns": type(ret).__name__, "same": ret is env, "after_append": _names(env.transform),
           "transform_type": type(env.transform).__name__}
    ret = env.insert_transform(0, InitTracker())
    out["insert_returns"] = type(ret).__name__
    out["after_insert"] = _names(env.transform)
    out["insert_bad_index"] = parity.attempt(lambda: env.insert_transform(10, RewardSum()))
    out["insert_not_transform"] = parity.attempt(lambda: env.insert_transform(0, 3))
    out["rollout"] = env.rollout(3, ramp_policy())
    out["specs"] = specs(env)
    return out


def scenario_transformed_env_append_callable():
    env = TransformedEnv(CountEnv())
    env.append_transform(lambda td: td.set("extra", td["observation"].sum(-1, keepdim=True)))
    data = parity.attempt(lambda: env.rollout(2, ramp_policy()))
    return {"reset": env.reset(), "next": data["next"]} if isinstance(data, TensorDict) else data


def scenario_envbase_append_transform():
    env = CountEnv().append_transform(StepCounter(2))
    return {"type": type(env).__name__, "transform": type(env.transform).__name__, "rollout": env.rollout(3, ramp_policy())}


def scenario_transformed_env_nested_unwrap():
    inner = TransformedEnv(CountEnv(), StepCounter(3))
    outer = TransformedEnv(inner, RewardSum())
    out = {"base": type(outer.base_env).__name__, "transform": type(outer.transform).__name__,
           "names": _names(outer.transform) if isinstance(outer.transform, Compose) else None,
           "inner_still": type(inner.transform).__name__}
    out.update(report(outer, steps=4))
    return out


def scenario_transformed_env_nested_no_unwrap():
    inner = TransformedEnv(CountEnv(), StepCounter(3))
    outer = TransformedEnv(inner, RewardSum(), auto_unwrap=False)
    return {"base": type(outer.base_env).__name__, "transform": type(outer.transform).__name__,
            "rollout": outer.rollout(4, ramp_policy())}


def scenario_transformed_env_set_transform():
    env = TransformedEnv(CountEnv(), StepCounter())
    env.transform = Compose(RewardSum())
    return {"names": _names(env.transform), "obs": sorted(env.observation_spec.keys()),
            "rollout": env.rollout(2, ramp_policy())}


def scenario_transformed_env_attribute_fallthrough():
    env = TransformedEnv(CountEnv(max_count=7), StepCounter())
    return {"max_count": env.max_count, "missing": parity.attempt(lambda: env.not_an_attribute)}


def scenario_transformed_env_reset_with_td():
    env = TransformedEnv(CountEnv(with_state=True), Compose(StepCounter(), RewardSum()))
    td = env.reset()
    out = {"reset": td, "rand_step": parity.structure(env.rand_step(td.clone()))}
    out["fake"] = parity.structure(env.fake_tensordict())
    return out


def scenario_transformed_env_state_spec():
    env = TransformedEnv(CountEnv(with_state=True), StepCounter())
    return report(env, steps=3)
