"""``torchrl._fast.calls``: the one "plain module" rule, and its direct calls give exactly what the public
module call gives (or defer to it), with the fast paths on and off."""
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    set_skip_existing,
)
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

from torchrl._fast import set_fast_paths
from torchrl._fast.calls import (
    direct_module_call,
    hooked,
    plain,
    plain_network,
    plain_parts,
    plain_sampler,
    run_module,
)
from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.data.tensor_specs import Bounded
from torchrl.envs import PendulumEnv
from torchrl.modules import Actor
from torchrl.modules.distributions import TanhNormal
from torchrl.modules.tensordict_module import (
    SafeModule,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
)
from torchrl.objectives import DQNLoss
from torchrl.objectives.value import GAE


@pytest.fixture(autouse=True)
def _fast_on():
    """These tests check the fast lane itself: on by default, whatever TORCHRL_FAST_PATHS says."""
    with set_fast_paths(True):
        yield


class _Two(nn.Module):
    def forward(self, x, y):
        return x + y, x * y


def _td():
    return TensorDict({"x": torch.randn(4, 3), ("obs", "y"): torch.randn(4, 3)}, [4])


def _linear(**kwargs):
    return TensorDictModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["out"], **kwargs)


# ------------------------------------------------------------------------------------------------ the rule
def test_the_rule():
    assert plain(_linear()) and plain_parts(_linear()) is not None
    assert plain(SafeModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["a"]))  # forward marked _fast_forward
    assert plain(Actor(nn.Linear(3, 2), in_keys=["x"]))
    assert not plain(SafeSequential(SafeModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["a"])))
    assert not plain(_linear(inplace=False))
    assert not plain(TensorDictModule(nn.Linear(3, 2), in_keys={"x": "input"}, out_keys=["out"]))
    selected = TensorDictModule(_Two(), in_keys=["x", "x"], out_keys=["a", "b"])
    selected.select_out_keys("b")
    assert not plain(selected)
    assert not plain(TensorDictModule(_Two(), in_keys=["x", "x"], out_keys=["a", "_"]))
    nested = TensorDictModule(_linear(), in_keys=["x"], out_keys=["out"])  # a TensorDict module inside
    assert plain(nested) and plain_network(nested) is None  # direct calls do what its forward does; losses refuse
    assert not plain(lambda td: td) and not plain(TensorDictSequential(_linear()))
    # hooks: part of plain_parts (a call replacing module(td)), not of plain (replacing forward)
    safe = SafeModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["a"], spec=Bounded(-1.0, 1.0, (2,)), safe=True)
    assert plain(safe) and hooked(safe) and plain_parts(safe) is None and plain_network(safe) is None
    module = _linear()
    handle = nn.modules.module.register_module_forward_hook(lambda *args: None)
    try:
        assert hooked(module) and plain_parts(module) is None
    finally:
        handle.remove()
    assert not hooked(module)
    # plain_network: only nn.Module networks (the losses need their parameters)
    assert plain_network(TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])) is None
    assert isinstance(plain_network(module), nn.Linear)


def test_the_switch_turns_the_rule_off():
    module = _linear()
    with set_fast_paths(False):
        assert not plain(module) and plain_parts(module) is None and plain_network(module) is None
        assert direct_module_call(module) is None
        assert not plain_sampler(SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal))


# ------------------------------------------------------------------------------- direct_module_call
def test_single_output_same_as_public_call():
    torch.manual_seed(0)
    module = _linear()
    call = direct_module_call(module)
    assert call is not None
    td = _td()
    ref = module(td.clone())
    out = call(td)
    assert out is td
    torch.testing.assert_close(out["out"], ref["out"])


def test_tuple_outputs_and_nested_keys():
    module = TensorDictModule(_Two(), in_keys=["x", ("obs", "y")], out_keys=[("a", "sum"), "prod"])
    td = _td()
    ref = module(td.clone())
    out = direct_module_call(module)(td)
    torch.testing.assert_close(out["a", "sum"], ref["a", "sum"])
    torch.testing.assert_close(out["prod"], ref["prod"])


def test_dict_outputs_as_tensordict_module():
    module = TensorDictModule(lambda x: {"b": x * 2, "a": x + 1}, in_keys=["x"], out_keys=["a", "b"])
    td = _td()
    ref = module(td.clone())
    out = direct_module_call(module)(td)
    torch.testing.assert_close(out["a"], ref["a"])
    torch.testing.assert_close(out["b"], ref["b"])


def test_output_count_mismatch_is_an_error_naming_the_keys():
    module = TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=["a", "b"])
    with pytest.raises(RuntimeError, match=r"1 output\(s\) for the 2 out_keys"):
        direct_module_call(module)(_td())
    with pytest.raises(RuntimeError, match=r"1 output\(s\) for the 2 out_keys"):
        run_module(module, _td())


def test_not_applicable_modules_get_none():
    hooked_module = TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=["y"])
    hooked_module.register_forward_hook(lambda *args: None)
    assert direct_module_call(hooked_module) is None
    assert direct_module_call(TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=["y"], inplace=False)) is None
    assert direct_module_call(lambda td: td) is None


def test_defers_to_public_call():
    calls = []
    module = TensorDictModule(nn.Linear(3, 3), in_keys=["x"], out_keys=["x_out"])
    call = direct_module_call(module)
    # a hook registered after the call was built is honoured
    handle = module.register_forward_hook(lambda *args: calls.append(1))
    call(_td())
    assert calls == [1]
    handle.remove()
    # missing input: the public call's KeyError
    with pytest.raises(KeyError):
        call(TensorDict({}, [4]))
    # lazy stacks go through the public call
    lazy = LazyStackedTensorDict.lazy_stack([_td()[0], _td()[1]], 0)
    assert "x_out" in call(lazy).keys()
    # skip-existing mode keeps an existing output
    td = _td()
    td["x_out"] = torch.zeros(4, 3)
    with set_skip_existing(True):
        call(td)
    assert (td["x_out"] == 0).all()


def test_switch_turned_off_after_the_call_was_built():
    module = TensorDictModule(nn.Linear(3, 3), in_keys=["x"], out_keys=["x_out"])
    call = direct_module_call(module)
    seen = []
    module.forward = lambda td, **kw: seen.append(1) or TensorDictModule.forward(module, td, **kw)
    td = _td()
    with set_fast_paths(False):
        out = call(td)
    assert seen == [1]  # the public call ran
    torch.testing.assert_close(out["x_out"], module.module(td["x"]))


def test_rollout_with_plain_module_matches_manual_loop():
    torch.manual_seed(0)
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    env = PendulumEnv(seed=3)
    traj = env.rollout(5, policy)
    env2 = PendulumEnv(seed=3)
    td = env2.reset()
    for t in range(5):
        td = env2.step(policy(td))
        torch.testing.assert_close(traj[t]["action"], td["action"])
        torch.testing.assert_close(traj[t]["next", "observation"], td["next", "observation"])
        td = env2.step_mdp(td)


# ------------------------------------------------------ SafeModule / SafeSequential / probabilistic forwards
@pytest.mark.parametrize("fast", [True, False])
def test_safe_module_matches_tensordict(fast):
    torch.manual_seed(0)
    net = nn.Linear(3, 2)
    ours = SafeModule(net, in_keys=["obs"], out_keys=["action"])
    ref = TensorDictModule(net, in_keys=["obs"], out_keys=["action"])
    td = TensorDict(obs=torch.randn(4, 3), batch_size=[4])
    with set_fast_paths(fast):
        torch.testing.assert_close(ours(td.clone())["action"], ref(td.clone())["action"])


def _params_module(seed=0):
    torch.manual_seed(seed)
    return TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), in_keys=["obs"], out_keys=["loc", "scale"]
    )


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("exploration", [ExplorationType.RANDOM, ExplorationType.DETERMINISTIC, None])
@pytest.mark.parametrize("batch", [(), (6,)])
def test_probabilistic_sequence_matches_tensordict(fast, exploration, batch):
    def build(cls_seq, cls_prob):
        return cls_seq(
            _params_module(),
            cls_prob(
                in_keys=["loc", "scale"], out_keys=["action"], distribution_class=TanhNormal,
                distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True,
                default_interaction_type=InteractionType.RANDOM,
            ),
        )

    ours = build(SafeProbabilisticTensorDictSequential, SafeProbabilisticModule)
    ref = build(ProbabilisticTensorDictSequential, ProbabilisticTensorDictModule)
    assert plain_sampler(ours.module[-1])
    td = TensorDict(obs=torch.randn(*batch, 3), batch_size=list(batch))
    with set_fast_paths(fast), set_exploration_type(exploration):
        torch.manual_seed(1)
        a = ours(td.clone())
        torch.manual_seed(1)
        b = ref(td.clone())
    assert set(a.keys()) == set(b.keys())
    for key in ("loc", "scale", "action", "action_log_prob"):
        torch.testing.assert_close(a[key], b[key])


def test_probabilistic_sequence_follows_return_log_prob_changes():
    seq = SafeProbabilisticTensorDictSequential(
        _params_module(), SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal)
    )
    assert "action_log_prob" not in seq(TensorDict(obs=torch.randn(3)))
    seq.module[-1].return_log_prob = True
    with set_exploration_type(ExplorationType.RANDOM):
        assert "action_log_prob" in seq(TensorDict(obs=torch.randn(3)))


def test_probabilistic_sequence_get_dist_and_kwargs():
    seq = SafeProbabilisticTensorDictSequential(
        _params_module(), SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal)
    )
    dist = seq.get_dist(TensorDict(obs=torch.randn(3)))
    assert isinstance(dist, TanhNormal)
    loc, scale, action = seq(obs=torch.zeros(3))  # dispatch returns every out_key
    torch.testing.assert_close(action, torch.tanh(loc))


def test_safe_sequential_on_and_off_agree():
    torch.manual_seed(0)
    seq = SafeSequential(
        SafeModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["h"]),
        SafeModule(nn.Linear(4, 2), in_keys=["h"], out_keys=["action"], spec=Bounded(-0.1, 0.1, (2,)), safe=True),
    )
    td = TensorDict(obs=torch.randn(5, 3), batch_size=[5])
    fast = seq(td.clone())
    with set_fast_paths(False):
        slow = seq(td.clone())
    assert set(fast.keys()) == set(slow.keys())
    for key in ("h", "action"):
        torch.testing.assert_close(fast[key], slow[key])
    assert fast["action"].abs().max() <= 0.1


# --------------------------------------------------------------------- losses and value estimators
def test_loss_and_estimator_on_and_off_agree():
    torch.manual_seed(0)
    qnet = TensorDictModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action_value"])
    loss = DQNLoss(qnet, action_space="one-hot")
    value = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["state_value"])
    gae = GAE(gamma=0.9, lmbda=0.9, value_network=value)
    td = TensorDict(
        {
            "observation": torch.randn(2, 5, 3),
            "action": nn.functional.one_hot(torch.randint(2, (2, 5)), 2),
            "next": {
                "observation": torch.randn(2, 5, 3),
                "reward": torch.randn(2, 5, 1),
                "done": torch.zeros(2, 5, 1, dtype=torch.bool),
                "terminated": torch.zeros(2, 5, 1, dtype=torch.bool),
            },
        },
        [2, 5],
    )
    fast_loss, fast_adv = loss(td.clone())["loss"], gae(td.clone())["advantage"]
    with set_fast_paths(False):
        slow_loss, slow_adv = loss(td.clone())["loss"], gae(td.clone())["advantage"]
    torch.testing.assert_close(fast_loss, slow_loss)
    torch.testing.assert_close(fast_adv, slow_adv)
