import doctest
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms._cat_tensors import CatTensors
from torchrl.envs.transforms import _cat_tensors as cat_tensors_module

from test.envs.transforms._envs_batch_a import PosVelEnv
from test.envs.transforms.contract import TransformContract


class TestCatTensors(TransformContract):
    def make_env(self, batch_size=()):
        return PosVelEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return CatTensors(in_keys=["velocity", "position", ("agent", "speed")], out_key="vec")

    def test_concatenates_sorted_and_deletes(self):
        t = self.make_transform()
        env = TransformedEnv(self.make_env((2,)), t)
        assert t.in_keys == [("agent", "speed"), "position", "velocity"]
        assert t.keys_to_exclude == t.in_keys
        spec = env.observation_spec
        assert isinstance(spec["vec"], Unbounded) and spec["vec"].shape == (2, 4)
        assert "position" not in spec and ("agent", "speed") not in spec
        td = env.reset()
        raw = env.base_env._td()
        expected = torch.cat([raw["agent", "speed"], raw["position"], raw["velocity"]], -1)
        torch.testing.assert_close(td["vec"], expected)
        assert "position" not in td.keys() and "speed" not in td["agent"].keys()

    def test_unsorted_order_and_keep_keys(self):
        t = CatTensors(in_keys=["b", "a"], out_key="ab", sort=False, del_keys=False)
        td = t(TensorDict(a=torch.zeros(2, 1), b=torch.ones(2, 2), batch_size=[2]))
        assert td["ab"][0].tolist() == [1.0, 1.0, 0.0]
        assert {"a", "b", "ab"} == set(td.keys())
        assert t.keys_to_exclude == []

    def test_other_dim(self):
        t = CatTensors(in_keys=["a", "b"], out_key="ab", dim=-2)
        td = t(TensorDict(a=torch.zeros(3, 1, 2), b=torch.ones(3, 2, 2), batch_size=[3]))
        assert td["ab"].shape == (3, 3, 2)

    def test_keys_from_parent_env(self):
        t = CatTensors(out_key="vec")
        env = TransformedEnv(PosVelEnv(), t)
        assert t.in_keys == [("agent", "speed"), "position", "velocity"]
        assert env.rollout(3)["next", "vec"].shape == (3, 4)

    def test_errors(self):
        with pytest.raises(ValueError, match="dim must be an int"):
            CatTensors(in_keys=["a"], dim=None)
        with pytest.raises(RuntimeError, match="no in_keys"):
            CatTensors()(TensorDict(a=torch.zeros(1)))
        with pytest.raises(KeyError, match=r"\['b'\] are missing"):
            CatTensors(in_keys=["a", "b"])(TensorDict(a=torch.zeros(1)))
        with pytest.raises(RuntimeError, match="unsqueeze_if_oor"):
            CatTensors(in_keys=["a", "b"])(TensorDict(a=torch.zeros(2), b=torch.zeros(2, 1), batch_size=[2]))
        with pytest.raises(RuntimeError, match="cannot concatenate"):
            CatTensors(in_keys=["a", "b"])(TensorDict(a=torch.zeros(2, 2), b=torch.zeros(3, 1)))
        with pytest.raises(ValueError, match="height"):  # as TorchRL (also a KeyError)
            TransformedEnv(PosVelEnv(), CatTensors(in_keys=["position", "height"]))

    def test_missing_tolerance(self):
        t = CatTensors(in_keys=["a", "b"], out_key="ab")
        t.set_missing_tolerance(True)
        td = t(TensorDict(a=torch.zeros(1)))
        assert set(td.keys()) == {"a"}


class TestCatTensorsPendulum(TransformContract):
    """Scalars (``th``, ``thdot``) get a feature dim; inputs kept (Pendulum reads them back as state)."""

    def make_transform(self):
        return CatTensors(in_keys=["observation", "th", "thdot"], out_key="vec", del_keys=False, unsqueeze_if_oor=True)

    def test_values(self):
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=[2]), self.make_transform())
        assert env.observation_spec["vec"].shape == (2, 5)
        td = env.rollout(2)
        expected = torch.cat([td["observation"], td["th"].unsqueeze(-1), td["thdot"].unsqueeze(-1)], -1)
        torch.testing.assert_close(td["vec"], expected)


def test_doctests():
    result = doctest.testmod(cat_tensors_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_non_negative_dim_counts_from_the_first_dim():
    # as TorchRL: dim=0 is accepted (on unbatched data it is the feature dim)
    t = CatTensors(in_keys=["a", "b"], out_key="ab", dim=0)
    assert t.dim == 0
    assert t(TensorDict(a=torch.zeros(2), b=torch.ones(1)))["ab"].tolist() == [0.0, 0.0, 1.0]
    env = TransformedEnv(PendulumEnv(), CatTensors(in_keys=["observation"], out_key="v", dim=0, del_keys=False))
    assert env.observation_spec["v"].shape == (3,)
