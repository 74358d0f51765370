import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import FiniteTensorDictCheck
from torchrl.envs.transforms import _finite_tensordict_check as module

from test.envs.transforms.contract import TransformContract


class TestFiniteTensorDictCheck(TransformContract):
    def make_transform(self):
        return FiniteTensorDictCheck()

    def test_signature_defaults(self):
        t = FiniteTensorDictCheck()
        assert t.in_keys == [] and t.out_keys == []  # as TorchRL

    def test_finite_data_passes_unchanged(self):
        td = TensorDict(a=torch.tensor([1.0, -2.0]), i=torch.tensor([3]), b=torch.tensor([True]))
        out = FiniteTensorDictCheck()(td)
        assert out is td and out["a"].tolist() == [1.0, -2.0]

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
    def test_non_finite_raises(self, bad):
        td = TensorDict(a=torch.ones(2), nested=TensorDict(x=torch.tensor([0.0, bad, bad])))
        with pytest.raises(ValueError, match=r"Encountered a non-finite tensor: entry \('nested', 'x'\) holds 2"):
            FiniteTensorDictCheck()(td)

    def test_env_with_nan_observation_raises(self):
        env = TransformedEnv(PendulumEnv(seed=0), FiniteTensorDictCheck())
        check_env_specs(env, seed=0)
        td = env.reset()
        td["action"] = torch.tensor([float("nan")])
        with pytest.raises(ValueError, match="non-finite"):
            env.step(td)


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
