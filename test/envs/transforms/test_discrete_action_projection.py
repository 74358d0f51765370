import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Composite, OneHot, Unbounded
from torchrl.envs import EnvBase, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _discrete_action_projection as dap_module
from torchrl.envs.transforms._discrete_action_projection import DiscreteActionProjection

from test.envs.transforms.contract import TransformContract


class OneHotEnv(EnvBase):
    """Observation = the last action's index (float, (1,)); a one-hot action over 3; raises on a wrong width."""

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(observation=Unbounded(shape=(*shape, 1)), shape=shape)
        self.action_spec = OneHot(3, shape=(*shape, 3))
        self.reward_spec = Unbounded(shape=(*shape, 1))

    def _reset(self, tensordict, **kwargs):
        return TensorDict(observation=torch.zeros((*self.batch_size, 1)), batch_size=self.batch_size)

    def _step(self, tensordict):
        action = tensordict["action"]
        if action.shape[-1] != 3 or not bool((action.sum(-1) == 1).all()):
            raise ValueError(f"OneHotEnv: expected a one-hot action of size 3, got shape {tuple(action.shape)}")
        obs = action.float().argmax(-1, keepdim=True).float()
        return TensorDict(
            observation=obs, reward=obs.clone(), done=torch.zeros((*self.batch_size, 1), dtype=torch.bool),
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


class TestDiscreteActionProjection(TransformContract):
    def make_env(self, batch_size=()):
        return OneHotEnv(batch_size=batch_size)

    def make_transform(self):
        return DiscreteActionProjection(3, 5)

    def test_inverse_known_answer(self):
        t = DiscreteActionProjection(3, 5)
        td = TensorDict(action=torch.nn.functional.one_hot(torch.tensor([0, 2, 1]), 5), batch_size=[3])
        out = t.inv(td)
        assert out["action"].tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
        assert td["action"].shape == (3, 5)  # inv works on a copy

    def test_out_of_range_is_random_valid(self):
        t = DiscreteActionProjection(3, 5)
        torch.manual_seed(0)
        action = torch.nn.functional.one_hot(torch.full((200,), 4), 5).bool()
        out = t.inv(TensorDict(action=action, batch_size=[200]))["action"]
        assert out.dtype == torch.bool and out.shape == (200, 3)
        assert bool((out.sum(-1) == 1).all())
        assert set(out.float().argmax(-1).tolist()) == {0, 1, 2}

    def test_reference_values(self):
        # TorchRL 0.14.1 gives [[1,0,0],[0,0,1],[0,0,1],[1,0,0]] under torch.manual_seed(0)
        t = DiscreteActionProjection(3, 5)
        td = TensorDict(action=torch.nn.functional.one_hot(torch.tensor([0, 2, 4, 3]), 5), batch_size=[4])
        torch.manual_seed(0)
        assert t.inv(td)["action"].tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 1], [1, 0, 0]]

    def test_forward_pads(self):
        t = DiscreteActionProjection(3, 5)
        out = t(TensorDict(action=torch.tensor([[0, 1, 0]]), batch_size=[1]))
        assert out["action"].tolist() == [[0, 1, 0, 0, 0]]
        t = DiscreteActionProjection(3, 5, include_forward=False)
        assert t(TensorDict(action=torch.tensor([0, 1, 0])))["action"].tolist() == [0, 1, 0]

    def test_env_spec_and_rollout(self):
        env = TransformedEnv(OneHotEnv(batch_size=(2,)), DiscreteActionProjection(3, 5))
        spec = env.action_spec
        assert isinstance(spec, OneHot) and spec.shape == (2, 5) and spec.dtype == torch.bool
        check_env_specs(env)
        data = env.rollout(20)
        assert data["action"].shape == (2, 20, 5)
        assert bool((data["next", "observation"] < 3).all())
        a = torch.nn.functional.one_hot(torch.tensor([1, 2]), 5).bool()
        out = env.step(env.reset().set("action", a))
        assert out["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0]

    def test_custom_key(self):
        t = DiscreteActionProjection(2, 4, action_key=("agent", "act"))
        td = TensorDict({("agent", "act"): torch.tensor([0, 1, 0, 0])})
        assert t.inv(td)["agent", "act"].tolist() == [0, 1]
        spec = Composite(full_action_spec=Composite(agent=Composite(act=OneHot(2))))
        assert t.transform_input_spec(spec)["full_action_spec", "agent", "act"].shape == (4,)

    def test_errors(self):
        with pytest.raises(RuntimeError, match="greater or equal"):
            DiscreteActionProjection(5, 3)
        t = DiscreteActionProjection(3, 5)
        with pytest.raises(ValueError, match="at most max_actions=5"):
            t.inv(TensorDict(action=torch.tensor([0, 1, 0, 0, 0, 0])))
        # env-sized actions (stored data) pass through the inverse unchanged
        assert t.inv(TensorDict(action=torch.tensor([0, 1, 0])))["action"].tolist() == [0, 1, 0]
        with pytest.raises(KeyError, match="not in the env's action spec"):
            t.transform_input_spec(Composite(full_action_spec=Composite(other=OneHot(3))))

    def test_repr(self):
        assert repr(DiscreteActionProjection(3, 5)) == (
            "DiscreteActionProjection(num_actions_effective=3, max_actions=5, in_keys_inv=['action'])"
        )

    def test_doctest(self):
        assert doctest.testmod(dap_module, raise_on_error=True).attempted > 0
