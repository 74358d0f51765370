import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.tensor_specs import (
    Bounded,
    Composite,
    MultiCategorical,
    MultiOneHot,
    Unbounded,
)
from torchrl.envs import EnvBase, PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import ActionDiscretizer as ExportedActionDiscretizer
from torchrl.envs.transforms import _action_discretizer as ad_module
from torchrl.envs.transforms._action_discretizer import ActionDiscretizer

S = ActionDiscretizer.SamplingStrategy


class TwoDimEnv(EnvBase):
    """Action in [-1, 1] x [0, 10] (float32); the observation is the last action the env received."""

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(observation=Unbounded(shape=(*shape, 2)), shape=shape)
        self.action_spec = Bounded(
            low=torch.tensor([-1.0, 0.0]).expand(*shape, 2), high=torch.tensor([1.0, 10.0]).expand(*shape, 2),
            shape=(*shape, 2),
        )
        self.reward_spec = Unbounded(shape=(*shape, 1))

    def _reset(self, tensordict, **kwargs):
        return TensorDict(observation=torch.zeros((*self.batch_size, 2)), batch_size=self.batch_size)

    def _step(self, tensordict):
        action = tensordict["action"]
        if action.dtype != torch.float32 or action.shape[-1] != 2:
            raise ValueError(f"TwoDimEnv: expected a float action of last dim 2, got {action.dtype} {tuple(action.shape)}")
        return TensorDict(
            observation=action.clone(), reward=action.sum(-1, keepdim=True),
            done=torch.zeros((*self.batch_size, 1), dtype=torch.bool), batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


class _BufferContract(TransformContract):
    def test_contract_replay_buffer(self):
        # As TorchRL, the intervals come from an env's bounded action spec: a fresh instance cannot map stored
        # discrete actions (TorchRL fails too, on the missing parent); one whose intervals are known (a clone
        # taken from an env) maps them to continuous actions when the buffer is extended.
        env = TransformedEnv(self.make_env(), self.make_transform())
        t = env.transform
        continuous = [t.action_key] if t.action_key != t.out_action_key else []
        discrete = env.rollout(self.steps, break_when_any_done=False).exclude("next", *continuous)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(discrete.numel()), batch_size=3)
        rb.append_transform(self.make_transform())
        with pytest.raises(RuntimeError, match="intervals are not known yet; append the transform to an env"):
            rb.extend(discrete.reshape(-1))
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(discrete.numel()), batch_size=3)
        rb.append_transform(env.transform.clone())
        rb.extend(discrete.reshape(-1))
        sample = rb.sample()
        spec = env.base_env.action_spec
        assert sample.batch_size == (3,) and sample["action"].dtype == spec.dtype
        assert bool(((sample["action"] >= spec.low) & (sample["action"] <= spec.high)).all())


class TestActionDiscretizer(_BufferContract):
    def make_transform(self):
        return ActionDiscretizer(5)

    def test_exported(self):
        assert ExportedActionDiscretizer is ActionDiscretizer

    @pytest.mark.parametrize("categorical", [True, False])
    def test_pendulum_reference_values(self, categorical):
        # TorchRL 0.14.1 on PendulumEnv (action in [-2, 2]), num_intervals=5, actions 0..4 (RANDOM: manual_seed(0))
        expected = {
            S.MEDIAN: [-1.600000023841858, -0.8000000715255737, 0.0, 0.8000001907348633, 1.5999999046325684],
            S.LOW: [-2.0, -1.2000000476837158, -0.3999999761581421, 0.40000009536743164, 1.2000000476837158],
            S.HIGH: [-1.2000000476837158, -0.40000009536743164, 0.40000009536743164, 1.2000000476837158, 2.0],
            S.RANDOM: [-1.602994680404663, -0.8029947280883789, -0.0029946863651275635, 0.7970054149627686,
                       1.5970053672790527],
        }
        for sampling, values in expected.items():
            t = ActionDiscretizer(5, sampling=sampling, categorical=categorical)
            env = TransformedEnv(PendulumEnv(seed=0), t)
            index = torch.arange(5)
            action = index.unsqueeze(-1) if categorical else torch.nn.functional.one_hot(index, 5).bool()
            torch.manual_seed(0)
            out = env.transform.inv(TensorDict(action=action, batch_size=[5]))["action"]
            assert out.dtype == torch.float32 and out.shape == (5, 1)
            assert out.squeeze(-1).tolist() == values, sampling

    def test_custom_arange_reference_values(self):
        # TorchRL 0.14.1: ActionDiscretizer(3, sampling=...).custom_arange(3, "cpu")
        assert ActionDiscretizer(3).custom_arange(3, "cpu").tolist() == [0.1666666567325592, 0.5, 0.8333333730697632]
        assert ActionDiscretizer(3, sampling=S.LOW).custom_arange(3, "cpu").tolist() == [
            0.0, 0.3333333432674408, 0.6666666865348816]
        assert ActionDiscretizer(3, sampling=S.HIGH).custom_arange(3, "cpu").tolist() == [
            0.3333333134651184, 0.6666666269302368, 1.0]
        assert ActionDiscretizer(3, sampling=S.RANDOM).custom_arange(3, "cpu").tolist() == [
            0.0, 0.3333333432674408, 0.6666666865348816]

    def test_specs_pendulum(self):
        env = TransformedEnv(PendulumEnv(seed=0), ActionDiscretizer(5))
        spec = env.action_spec
        assert isinstance(spec, MultiCategorical) and spec.shape == (1,) and spec.dtype == torch.int64
        assert spec.nvec.tolist() == [5] and env.rand_action()["action"].shape == (1,)
        env = TransformedEnv(PendulumEnv(seed=0), ActionDiscretizer(5, categorical=False))
        spec = env.action_spec
        assert isinstance(spec, MultiOneHot) and spec.shape == (5,) and spec.dtype == torch.bool
        data = env.rollout(4)
        assert data["action"].shape == (4, 5) and bool((data["action"].sum(-1) == 1).all())

    def test_per_dimension_intervals(self):
        # TorchRL 0.14.1: intervals [2, 4] on [-1, 1] x [0, 10]: [1, 3] -> [0.5, 8.75]; one-hot (0, 3) -> [-0.5, 8.75]
        env = TransformedEnv(TwoDimEnv(), ActionDiscretizer(torch.tensor([2, 4])))
        spec = env.action_spec
        assert isinstance(spec, MultiCategorical) and spec.nvec.tolist() == [2, 4]
        check_env_specs(env)
        assert env.transform.inv(TensorDict(action=torch.tensor([1, 3])))["action"].tolist() == [0.5, 8.75]
        td = env.reset().set("action", torch.tensor([0, 1]))
        assert env.step(td)["next", "observation"].tolist() == [-0.5, 3.75]
        env = TransformedEnv(TwoDimEnv(), ActionDiscretizer(torch.tensor([2, 4]), categorical=False))
        assert isinstance(env.action_spec, MultiOneHot) and env.action_spec.shape == (6,)
        check_env_specs(env)
        one_hot = torch.tensor([1, 0, 0, 0, 0, 1]).bool()
        assert env.transform.inv(TensorDict(action=one_hot))["action"].tolist() == [-0.5, 8.75]

    def test_batched_env_and_random(self):
        env = TransformedEnv(TwoDimEnv(batch_size=(4,)), ActionDiscretizer(3, sampling="random"))
        assert env.action_spec.shape == (4, 2)
        check_env_specs(env)
        torch.manual_seed(0)
        out = env.transform.inv(TensorDict(action=torch.ones(4, 2, dtype=torch.long), batch_size=[4]))["action"]
        # TorchRL 0.14.1: one uniform draw per action dim, shared by the batch
        torch.testing.assert_close(out, torch.tensor([[-2.4956e-03, 5.8941]]).expand(4, 2), rtol=0, atol=1e-4)
        lows = torch.tensor([[-1.0, 0.0]])
        widths = torch.tensor([[2.0, 10.0]]) / 3
        for _ in range(20):
            index = torch.randint(3, (4, 2))
            value = env.transform.inv(TensorDict(action=index, batch_size=[4]))["action"]
            start = lows + index * widths
            assert bool(((value >= start) & (value < start + widths + 1e-6)).all())

    def test_out_action_key(self):
        t = ActionDiscretizer(3, out_action_key="action_disc")
        env = TransformedEnv(TwoDimEnv(), t)
        assert list(env.full_action_spec.keys()) == ["action_disc"]
        assert isinstance(env.full_state_spec["action"], Bounded)
        check_env_specs(env)
        td = env.reset().set("action_disc", torch.tensor([2, 0]))
        out = env.step(td)
        # TorchRL 0.14.1: [0.6667, 1.6667]; the continuous action is recorded next to the discrete one
        torch.testing.assert_close(out["next", "observation"], torch.tensor([2 / 3, 5 / 3]))
        torch.testing.assert_close(out["action"], torch.tensor([2 / 3, 5 / 3]))
        data = env.rollout(3)
        assert data["action"].dtype == torch.float32 and data["action_disc"].dtype == torch.int64
        torch.testing.assert_close(data["action"], data["next", "observation"])

    def test_forward_is_identity(self):
        t = ActionDiscretizer(3)
        td = TensorDict(action=torch.tensor([0.3, 7.0]))
        assert t(td)["action"].tolist() == pytest.approx([0.3, 7.0])

    def test_custom_arange_subclass(self):
        calls = []

        class Ends(ActionDiscretizer):
            def custom_arange(self, nint, device):
                calls.append(nint)
                return torch.linspace(0, 1, nint, device=device)

        env = TransformedEnv(TwoDimEnv(), Ends(torch.tensor([2, 4])))
        assert env.action_spec.nvec.tolist() == [2, 4]
        assert sorted(calls) == [2, 4]
        assert env.transform.inv(TensorDict(action=torch.tensor([1, 3])))["action"].tolist() == [1.0, 10.0]
        assert env.transform.inv(TensorDict(action=torch.tensor([0, 1])))["action"].tolist() == pytest.approx(
            [-1.0, 10 / 3])

    def test_state_dict(self):
        env = TransformedEnv(TwoDimEnv(), ActionDiscretizer(3))
        assert env.action_spec.shape == (2,)
        state = env.transform.state_dict()
        torch.testing.assert_close(state["intervals"], torch.tensor([[-2 / 3, 0.0, 2 / 3], [5 / 3, 5.0, 25 / 3]]))
        assert state["nvec"].tolist() == [3, 3]
        fresh = ActionDiscretizer(3)  # no env: the intervals come from the state dict
        fresh.load_state_dict(state)
        assert fresh.inv(TensorDict(action=torch.tensor([2, 2])))["action"].tolist() == pytest.approx([2 / 3, 25 / 3])

    def test_errors(self):
        class UnboundedEnv(TwoDimEnv):
            def __init__(self):
                super().__init__()
                self.action_spec = Unbounded(shape=(2,))

        with pytest.raises(TypeError, match="'action' has spec UnboundedContinuous.*must be Bounded"):
            _ = TransformedEnv(UnboundedEnv(), ActionDiscretizer(3)).action_spec
        with pytest.raises(ValueError, match="num_intervals has 3 elements but the action 'action' has 2"):
            _ = TransformedEnv(TwoDimEnv(), ActionDiscretizer(torch.tensor([2, 3, 4]))).action_spec
        with pytest.raises(KeyError, match="action key 'foo' not in the env's action spec"):
            _ = TransformedEnv(TwoDimEnv(), ActionDiscretizer(3, action_key="foo")).action_spec
        with pytest.raises(ValueError, match="unknown sampling 7"):
            ActionDiscretizer(3, sampling=7)
        with pytest.raises(ValueError, match="positive integers"):
            ActionDiscretizer(0)
        with pytest.raises(RuntimeError, match="intervals are not known yet"):
            ActionDiscretizer(3).inv(TensorDict(action=torch.tensor([0, 1])))
        env = TransformedEnv(TwoDimEnv(), ActionDiscretizer(3))
        with pytest.raises(RuntimeError, match="'action' holds an index outside"):
            env.transform.inv(TensorDict(action=torch.tensor([3, 0])))
        with pytest.raises(ValueError, match="expected a last dim of 2"):
            env.transform.inv(TensorDict(action=torch.tensor([0, 1, 2])))

    def test_repr(self):
        assert repr(ActionDiscretizer(3)) == (
            "ActionDiscretizer(num_intervals=3, action_key=action, out_action_key=action, sampling=MEDIAN, "
            "categorical=True)"
        )

    def test_doctest(self):
        assert doctest.testmod(ad_module, raise_on_error=True).attempted > 0


class TestActionDiscretizerOneHotKey(_BufferContract):
    """The contract with one-hot actions written under a separate key."""

    def make_env(self, batch_size=()):
        return TwoDimEnv(batch_size=batch_size)

    def make_transform(self):
        return ActionDiscretizer(torch.tensor([3, 4]), out_action_key="action_disc", categorical=False)
