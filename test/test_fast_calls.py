"""``torchrl._fast``: the direct policy call gives exactly what ``policy(td)`` gives, or defers to it."""
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictModule, set_skip_existing
from torch import nn

from torchrl._fast import direct_module_call
from torchrl.envs import PendulumEnv


class _Two(nn.Module):
    def forward(self, x, y):
        return x + y, x * y


def _td():
    return TensorDict({"x": torch.randn(4, 3), ("obs", "y"): torch.randn(4, 3)}, [4])


def test_single_output_same_as_public_call():
    torch.manual_seed(0)
    module = TensorDictModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["out"])
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


def test_output_count_mismatch_is_an_error_naming_the_keys():
    module = TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=["a", "b"])
    with pytest.raises(RuntimeError, match=r"1 output\(s\) for the 2 out_keys"):
        direct_module_call(module)(_td())


def test_not_applicable_modules_get_none():
    hooked = TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=["y"])
    hooked.register_forward_hook(lambda *args: None)
    assert direct_module_call(hooked) is None
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
