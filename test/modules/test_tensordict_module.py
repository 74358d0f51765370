"""Tests of the safe TensorDict modules (``SafeModule``, ``SafeSequential``, probabilistic ones),
``VmapModule``, ``TanhModule`` and the world models. Their direct (fast) calls are checked against
tensordict's generic path in ``test/test_fast_calls.py``."""
from __future__ import annotations

import doctest
import importlib

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

import torchrl.modules
import torchrl.modules.tensordict_module as package
from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.modules.distributions import TanhNormal
from torchrl.modules.tensordict_module import (
    SafeModule,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
    TanhModule,
    VmapModule,
    WorldModel,
    WorldModelWrapper,
)


def _td(batch=(4,), features=3):
    return TensorDict(obs=torch.randn(*batch, features), batch_size=list(batch))


class TestSafeModule:
    def test_bare_spec_becomes_composite(self):
        spec = Bounded(-1.0, 1.0, (2,))
        module = SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"], spec=spec)
        assert isinstance(module.spec, Composite)
        assert module.spec["action"] == spec
        assert isinstance(module, TensorDictModule)

    def test_missing_out_keys_map_to_none(self):
        module = SafeModule(lambda x: (x, x), in_keys=["obs"], out_keys=["a", "b"], spec=Composite(a=Unbounded(3)))
        assert module.spec["b"] is None and module.spec["a"].shape == (3,)

    def test_safe_projects_outputs(self):
        module = SafeModule(lambda x: x * 10, in_keys=["obs"], out_keys=["action"], spec=Bounded(-1.0, 1.0, (3,)), safe=True)
        td = TensorDict(obs=torch.tensor([0.05, 1.0, -2.0]))
        assert module(td)["action"].tolist() == [0.5, 1.0, -1.0]

    def test_unsafe_keeps_outputs(self):
        module = SafeModule(lambda x: x * 10, in_keys=["obs"], out_keys=["action"], spec=Bounded(-1.0, 1.0, (3,)))
        assert module(TensorDict(obs=torch.ones(3)))["action"].tolist() == [10.0, 10.0, 10.0]

    def test_safe_without_spec_raises(self):
        with pytest.raises(RuntimeError, match=r"safe=True.*pass a spec"):
            SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"], safe=True)

    def test_bare_spec_with_several_outputs_raises(self):
        with pytest.raises(RuntimeError, match="Composite keyed by out_key"):
            SafeModule(lambda x: (x, x), in_keys=["obs"], out_keys=["a", "b"], spec=Unbounded(3))

    def test_non_spec_raises(self):
        with pytest.raises(TypeError, match="TensorSpec"):
            SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["a"], spec="bounded")

    def test_locked_env_spec_is_not_mutated(self):
        spec = Composite(action=Bounded(-1.0, 1.0, (2,)))
        spec.lock_()
        module = SafeModule(lambda x: (x, x), in_keys=["obs"], out_keys=["action", "other"], spec=spec)
        assert "other" not in spec.keys() and module.spec["other"] is None

    def test_random(self):
        module = SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"], spec=Bounded(5.0, 6.0, (2,)))
        out = module.random(_td())
        assert out["action"].shape == (4, 2) and bool(((out["action"] >= 5) & (out["action"] <= 6)).all())
        assert module.random_sample(_td())["action"].shape == (4, 2)

    def test_spec_setter_renormalises(self):
        module = SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
        module.spec = Bounded(-1.0, 1.0, (2,))
        assert isinstance(module.spec["action"], Bounded)

    def test_dispatch_with_tensors(self):
        net = nn.Linear(3, 2)
        module = SafeModule(net, in_keys=["obs"], out_keys=["action"])
        x = torch.randn(3)
        torch.testing.assert_close(module(obs=x), net(x))

    def test_select_out_keys_respected(self):
        module = SafeModule(lambda x: (x + 1, x + 2), in_keys=["obs"], out_keys=["a", "b"])
        module.select_out_keys("b")
        out = module(TensorDict(obs=torch.zeros(2)))
        assert "b" in out and "a" not in out

    def test_inplace_false_returns_new_td(self):
        module = SafeModule(lambda x: x + 1, in_keys=["obs"], out_keys=["a"], inplace=False)
        td = TensorDict(obs=torch.zeros(2))
        out = module(td)
        assert out is not td and "a" not in td and out["a"].tolist() == [1.0, 1.0]

    def test_wrong_batch_output_raises(self):
        module = SafeModule(lambda x: x[0], in_keys=["obs"], out_keys=["a"])
        with pytest.raises(RuntimeError, match="batch"):
            module(TensorDict(obs=torch.zeros(4, 2), batch_size=[4]))

    def test_missing_input_raises_keyerror(self):
        module = SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["a"])
        with pytest.raises(KeyError):
            module(TensorDict(other=torch.zeros(3)))


class TestSafeSequential:
    def _modules(self):
        first = SafeModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], spec=Unbounded(2))
        second = SafeModule(lambda y: y * 2, in_keys=["y"], out_keys=["z"], spec=Bounded(0.0, 3.0, (2,)))
        return first, second

    def test_merged_spec_and_isinstance(self):
        seq = SafeSequential(*self._modules())
        assert isinstance(seq, TensorDictSequential) and isinstance(seq, SafeModule)
        assert set(seq.spec.keys()) == {"y", "z"}
        assert isinstance(seq.spec["z"], Bounded)

    def test_forward_matches_tensordict_sequential(self):
        seq = SafeSequential(*self._modules())
        ref = TensorDictSequential(*self._modules())
        td = TensorDict(x=torch.tensor([0.0, 1.0]))
        assert seq(td.clone())["z"].tolist() == ref(td.clone())["z"].tolist() == [2.0, 4.0]

    def test_hooks_on_submodules_run(self):
        first, second = self._modules()
        calls = []
        first.register_forward_hook(lambda m, a, out: calls.append("hook"))
        SafeSequential(first, second)(TensorDict(x=torch.zeros(2)))
        assert calls == ["hook"]

    def test_safe_submodule_projects(self):
        net = SafeModule(lambda x: x * 100, in_keys=["x"], out_keys=["y"], spec=Bounded(-1.0, 1.0, (2,)), safe=True)
        seq = SafeSequential(net, SafeModule(lambda y: y + 1, in_keys=["y"], out_keys=["z"]))
        assert seq(TensorDict(x=torch.tensor([1.0, -1.0])))["z"].tolist() == [2.0, 0.0]

    def test_selected_out_keys(self):
        seq = SafeSequential(*self._modules(), selected_out_keys=["z"])
        out = seq(TensorDict(x=torch.zeros(2)))
        assert "z" in out and "y" not in out

    def test_nested_keys(self):
        first = SafeModule(lambda x: x + 1, in_keys=[("a", "x")], out_keys=[("b", "y")])
        out = SafeSequential(first)(TensorDict(a=TensorDict(x=torch.zeros(3, 2), batch_size=[3]), batch_size=[3]))
        assert out["b", "y"].shape == (3, 2)


def _params_module(seed=0):
    torch.manual_seed(seed)
    return TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), in_keys=["obs"], out_keys=["loc", "scale"]
    )


class TestSafeProbabilistic:
    def test_module_spec_and_log_prob(self):
        module = SafeProbabilisticModule(
            ["loc", "scale"], ["action"], spec=Bounded(-1.0, 1.0, (2,)), distribution_class=TanhNormal,
            return_log_prob=True,
        )
        assert isinstance(module, ProbabilisticTensorDictModule)
        assert isinstance(module.spec["action"], Bounded)
        td = TensorDict(loc=torch.zeros(5, 2), scale=torch.ones(5, 2), batch_size=[5])
        with set_exploration_type(ExplorationType.RANDOM):
            module(td)
        dist = TanhNormal(td["loc"], td["scale"])
        torch.testing.assert_close(td["action_log_prob"], dist.log_prob(td["action"]), rtol=1e-4, atol=1e-4)

    def test_safe_projects_samples(self):
        module = SafeProbabilisticModule(
            ["loc", "scale"], ["action"], spec=Bounded(-1.0, 1.0, (2,)), safe=True,
            distribution_class=torch.distributions.Normal,
        )
        td = TensorDict(loc=torch.full((2,), 10.0), scale=torch.ones(2) * 1e-3)
        with set_exploration_type(ExplorationType.RANDOM):
            assert module(td)["action"].tolist() == [1.0, 1.0]

    def test_deterministic_default(self):
        module = SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal)
        td = TensorDict(loc=torch.tensor([0.5, -0.5]), scale=torch.ones(2))
        torch.testing.assert_close(module(td)["action"], torch.tanh(torch.tensor([0.5, -0.5])))

    def test_sequential_isinstance(self):
        seq = SafeProbabilisticTensorDictSequential(
            _params_module(), SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal)
        )
        assert isinstance(seq, ProbabilisticTensorDictSequential) and isinstance(seq, SafeSequential)

    def test_tensordict_out(self):
        seq = SafeProbabilisticTensorDictSequential(
            _params_module(), SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal)
        )
        td = TensorDict(obs=torch.randn(3))
        out = seq(td, tensordict_out=TensorDict())
        assert "action" in out and "action" not in td


class TestVmapModule:
    def test_known_answer(self):
        first = TensorDictModule(lambda x: x[0], in_keys=["x"], out_keys=["y"])
        td = TensorDict(x=torch.arange(6.0).reshape(3, 2), batch_size=[3])
        assert VmapModule(first, 0)(td)["y"].tolist() == [0.0, 2.0, 4.0]

    def test_default_dim_is_last_and_mock_agrees(self):
        first = TensorDictModule(lambda x: x.sum(-1), in_keys=["x"], out_keys=["y"])
        td = TensorDict(x=torch.randn(2, 3, 4), batch_size=[2, 3])
        vm = VmapModule(first)
        out = vm(td.clone())["y"]
        mocked = vm.mock_()(td.clone())["y"]
        assert out.shape == (2, 3)
        torch.testing.assert_close(out, mocked)

    def test_requires_batch_dim(self):
        vm = VmapModule(TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"]))
        with pytest.raises(RuntimeError, match="batch dimension"):
            vm(TensorDict(x=torch.zeros(2)))


class TestTanhModule:
    def test_bounds_from_spec(self):
        mod = TanhModule("x", "y", spec=Bounded(torch.tensor([0.0, -3.0]), torch.tensor([2.0, 3.0]), (2,)))
        out = mod(TensorDict(x=torch.tensor([0.0, 0.0])))["y"]
        assert out.tolist() == [1.0, 0.0]
        out = mod(TensorDict(x=torch.tensor([100.0, -100.0])))["y"]
        assert out.tolist() == [2.0, -3.0]

    def test_default_is_plain_tanh_in_place(self):
        mod = TanhModule(["x"])
        x = torch.randn(5)
        torch.testing.assert_close(mod(TensorDict(x=x.clone()))["x"], torch.tanh(x))

    def test_several_keys_with_dict_bounds(self):
        mod = TanhModule(["a", "b"], ["c", "d"], low={"c": 0.0, "d": -10.0}, high={"c": 1.0, "d": 10.0})
        out = mod(TensorDict(a=torch.zeros(1), b=torch.full((1,), 50.0)))
        assert out["c"].item() == 0.5 and out["d"].item() == 10.0

    def test_clamp_keeps_strictly_inside(self):
        mod = TanhModule(["x"], low=-1.0, high=1.0, clamp=True)
        out = mod(TensorDict(x=torch.tensor([1e3, -1e3])))["x"]
        assert bool((out.abs() < 1).all())

    def test_bad_bounds(self):
        with pytest.raises(ValueError, match="low must be < high"):
            TanhModule(["x"], low=1.0, high=0.0)
        with pytest.raises(ValueError, match="out_keys"):
            TanhModule(["x", "y"], ["z"])


class TestWorldModels:
    def test_wrapper(self):
        transition = TensorDictModule(nn.Linear(4, 3), in_keys=["obs"], out_keys=["state"])
        reward = TensorDictModule(nn.Linear(3, 1), in_keys=["state"], out_keys=["reward"])
        model = WorldModelWrapper(transition, reward)
        assert model(TensorDict(obs=torch.randn(2, 4), batch_size=[2]))["reward"].shape == (2, 1)
        assert model.get_transition_model_operator() is transition and model.get_reward_operator() is reward

    def test_world_model_parts(self):
        encoder = TensorDictModule(nn.Linear(3, 4), in_keys=["observation"], out_keys=["latent"])
        dynamics = TensorDictModule(nn.Linear(4, 4), in_keys=["latent"], out_keys=[("next", "latent")])
        reward = TensorDictModule(nn.Linear(4, 1), in_keys=[("next", "latent")], out_keys=[("next", "reward")])
        done = TensorDictModule(lambda z: z.sum(-1, keepdim=True) > 0, in_keys=[("next", "latent")], out_keys=[("next", "done")])
        decoder = TensorDictModule(nn.Linear(4, 3), in_keys=["latent"], out_keys=["reconstruction"])
        model = WorldModel(encoder, dynamics, reward, done_head=done, decoder=decoder)
        td = model(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
        assert {("next", "reward"), ("next", "done"), "reconstruction"} <= set(td.keys(True, True))
        latent = model.encode(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
        stepped = model.step(latent)
        assert stepped["next", "reward"].shape == (5, 1)
        assert model.decode(latent)["reconstruction"].shape == (5, 3)
        keys = list(model.state_dict())
        assert len(keys) == len(set(keys)) == 8  # 4 linears x (weight, bias), no duplicates

    def test_decode_without_decoder(self):
        model = WorldModel(
            TensorDictModule(nn.Identity(), in_keys=["o"], out_keys=["z"]),
            TensorDictModule(nn.Identity(), in_keys=["z"], out_keys=[("next", "z")]),
            TensorDictModule(nn.Identity(), in_keys=[("next", "z")], out_keys=[("next", "reward")]),
        )
        with pytest.raises(RuntimeError, match="no decoder"):
            model.decode(TensorDict(z=torch.zeros(1)))


DOCTEST_MODULES = [
    "actors", "common", "exploration", "_policy_env", "probabilistic", "_python_rnn", "_q_value", "_recurrent_mode",
    "rnn", "sequence", "_tanh", "world_models",
]


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_docstring_examples(name, monkeypatch):
    for public in package.__all__:  # the examples import from torchrl.modules (re-exported by its __init__)
        if not hasattr(torchrl.modules, public):
            monkeypatch.setattr(torchrl.modules, public, getattr(package, public), raising=False)
    module = importlib.import_module(f"torchrl.modules.tensordict_module.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
