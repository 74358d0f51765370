"""Tests of actors and critics: ``Actor``, ``ProbabilisticActor``, ``ValueOperator``, the Q-value modules and
actors (every action space, masks, distributional), and the actor-critic operators."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    CompositeDistribution,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.nn.distributions import NormalParamExtractor
from torch import distributions as d, nn

from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.data.tensor_specs import Binary, Bounded, Categorical, MultiOneHot, OneHot, Unbounded
from torchrl.envs import PendulumEnv
from torchrl.modules.distributions import Delta, TanhNormal
from torchrl.modules.models import MLP
from torchrl.modules.tensordict_module import (
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    DistributionalQValueActor,
    DistributionalQValueHook,
    DistributionalQValueModule,
    ProbabilisticActor,
    QValueActor,
    QValueHook,
    QValueModule,
    SafeModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
    ValueOperator,
)
from torchrl.testing.mocking_classes import DiscreteActionVecMockEnv


class TestActor:
    def test_defaults_and_spec(self):
        spec = Bounded(-1.0, 1.0, (2,))
        actor = Actor(nn.Linear(3, 2), spec=spec)
        assert actor.in_keys == ["observation"] and actor.out_keys == ["action"]
        assert isinstance(actor, SafeModule) and actor.spec["action"] == spec

    def test_bare_spec_describes_first_output(self):
        actor = Actor(lambda x: (x, x), out_keys=["action", "extra"], spec=Unbounded(3))
        assert actor.spec["action"].shape == (3,) and actor.spec["extra"] is None

    def test_safe(self):
        actor = Actor(lambda x: x * 100, spec=Bounded(-2.0, 2.0, (2,)), safe=True)
        assert actor(TensorDict(observation=torch.tensor([1.0, -0.0078125])))["action"].tolist() == [2.0, -0.78125]

    def test_get_dist(self):
        net = nn.Linear(3, 2)
        actor = Actor(net)
        td = TensorDict(observation=torch.randn(3))
        dist = actor.get_dist(td)
        assert isinstance(dist, Delta)
        torch.testing.assert_close(dist.mode, net(td["observation"]))
        assert "action" not in td  # get_dist works on a copy


def _param_net():
    return TensorDictModule(
        nn.Sequential(nn.LazyLinear(256), nn.Tanh(), nn.Linear(256, 2), NormalParamExtractor()),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )


class TestProbabilisticActor:
    def test_seed_example(self):
        # the README example, unchanged
        actor = ProbabilisticActor(
            _param_net(),
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=TanhNormal,
            distribution_kwargs={"low": -1.0, "high": 1.0},
            return_log_prob=True,
        )
        assert isinstance(actor, SafeProbabilisticTensorDictSequential)
        assert isinstance(actor, ProbabilisticTensorDictSequential) and isinstance(actor, SafeSequential)
        td = TensorDict(observation=torch.randn(7, 3), batch_size=[7])
        with set_exploration_type(ExplorationType.RANDOM):
            actor(td)
        assert td["action"].shape == (7, 1) and td["action_log_prob"].shape == (7,)
        assert bool((td["action"].abs() <= 1).all())
        dist = TanhNormal(td["loc"], td["scale"], low=-1.0, high=1.0)
        torch.testing.assert_close(td["action_log_prob"], dist.log_prob(td["action"]), rtol=1e-3, atol=1e-3)

    def test_rollout_in_env(self):
        actor = ProbabilisticActor(
            _param_net(), in_keys=["loc", "scale"], distribution_class=TanhNormal,
            distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True,
        )
        rollout = PendulumEnv().rollout(5, actor)
        assert rollout["action"].shape == (5, 1) and rollout["action_log_prob"].shape == (5,)

    def test_default_out_key_and_spec(self):
        spec = Bounded(-1.0, 1.0, (2,))
        actor = ProbabilisticActor(_param_net(), in_keys=["loc", "scale"], spec=spec, distribution_class=TanhNormal)
        assert actor.out_keys[-1] == "action" and actor.spec["action"] == spec

    def test_exploration_type_selects_sample(self):
        actor = ProbabilisticActor(_param_net(), in_keys=["loc", "scale"], distribution_class=TanhNormal)
        td = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
        actor(td)
        det = td["action"].clone()
        torch.testing.assert_close(det, torch.tanh(td["loc"]))
        with set_exploration_type(ExplorationType.RANDOM):
            random = actor(td.clone())["action"]
        assert not torch.allclose(random, det)

    def test_default_interaction_type(self):
        actor = ProbabilisticActor(
            _param_net(), in_keys=["loc", "scale"], distribution_class=TanhNormal, default_interaction_type="random"
        )
        td = TensorDict(observation=torch.zeros(64, 3), batch_size=[64])
        assert actor(td)["action"].std(0).min() > 0

    def test_safe_projection(self):
        params = TensorDictModule(lambda x: (x * 0 + 5.0, x * 0 + 1e-3), in_keys=["observation"], out_keys=["loc", "scale"])
        actor = ProbabilisticActor(
            params, in_keys=["loc", "scale"], spec=Bounded(-1.0, 1.0, (2,)), safe=True,
            distribution_class=d.Normal, default_interaction_type="random",
        )
        assert actor(TensorDict(observation=torch.zeros(2)))["action"].tolist() == [1.0, 1.0]

    def test_composite_distribution_infers_out_keys(self):
        def params(x):
            return TensorDict(
                normal=TensorDict(loc=x[..., :2], scale=x[..., 2:4].exp(), batch_size=x.shape[:-1]),
                categ=TensorDict(logits=x[..., 4:7], batch_size=x.shape[:-1]),
                batch_size=x.shape[:-1],
            )

        module = TensorDictModule(params, in_keys=["observation"], out_keys=["params"])
        actor = ProbabilisticActor(
            module,
            in_keys=["params"],
            distribution_class=CompositeDistribution,
            distribution_kwargs={"distribution_map": {"normal": d.Normal, "categ": d.Categorical}},
            default_interaction_type="random",
        )
        assert [k for k in actor.out_keys if k in ("normal", "categ")] == ["normal", "categ"]
        td = actor(TensorDict(observation=torch.randn(5, 7), batch_size=[5]))
        assert td["normal"].shape == (5, 2) and td["categ"].shape == (5,)

    def test_plain_module_raises(self):
        with pytest.raises(TypeError, match="TensorDictModule"):
            ProbabilisticActor(nn.Linear(3, 4), in_keys=["loc", "scale"], distribution_class=TanhNormal)


class TestValueOperator:
    def test_defaults(self):
        assert ValueOperator(nn.Linear(3, 1)).out_keys == ["state_value"]
        critic = ValueOperator(MLP(in_features=5, out_features=1, num_cells=[8]), in_keys=["observation", "action"])
        assert critic.out_keys == ["state_action_value"]
        td = TensorDict(observation=torch.randn(2, 4), action=torch.randn(2, 1), batch_size=[2])
        assert critic(td)["state_action_value"].shape == (2, 1)


VALUES = torch.tensor([[1.0, 3.0, 2.0], [5.0, -1.0, 0.0]])


class TestQValueModule:
    def test_categorical(self):
        module = QValueModule(spec=Categorical(3))
        td = module(TensorDict(action_value=VALUES, batch_size=[2]))
        assert td["action"].tolist() == [1, 0]
        assert td["chosen_action_value"].tolist() == [[3.0], [5.0]]
        assert module.action_space == "categorical" and module.out_keys == ["action", "action_value", "chosen_action_value"]

    def test_action_is_int64_whatever_the_spec_dtype(self):
        # as TorchRL: a bool OneHot spec (or an int32 Categorical) still gives int64 actions
        module = QValueModule(spec=OneHot(3))
        td = module(TensorDict(action_value=VALUES, batch_size=[2]))
        assert td["action"].dtype == torch.long
        assert td["action"].tolist() == [[0, 1, 0], [1, 0, 0]]
        module = QValueModule(spec=Categorical(3, dtype=torch.int32))
        assert module(TensorDict(action_value=VALUES, batch_size=[2]))["action"].dtype == torch.long
        module = QValueModule(action_space="one-hot")
        assert module(TensorDict(action_value=VALUES, batch_size=[2]))["action"].dtype == torch.long

    def test_mult_one_hot(self):
        module = QValueModule(spec=MultiOneHot([2, 3]))
        values = torch.tensor([0.0, 1.0, 5.0, 2.0, 3.0])
        td = module(TensorDict(action_value=values))
        assert td["action"].long().tolist() == [0, 1, 1, 0, 0]
        assert td["chosen_action_value"].tolist() == [6.0]  # summed over the components, as TorchRL
        assert module.var_nums == [2, 3]

    def test_binary(self):
        module = QValueModule(spec=Binary(3))
        td = module(TensorDict(action_value=torch.tensor([0.5, -1.0, 2.0])))
        assert td["action"].long().tolist() == [1, 0, 1]
        assert td["chosen_action_value"].tolist() == [2.5]

    def test_mask(self):
        module = QValueModule(spec=Categorical(3), action_mask_key="mask")
        mask = torch.tensor([[True, False, True], [False, True, True]])
        td = module(TensorDict(action_value=VALUES, mask=mask, batch_size=[2]))
        assert td["action"].tolist() == [2, 2]
        assert td["chosen_action_value"].tolist() == [[2.0], [0.0]]
        assert td["action_value"][0, 1] == torch.finfo(torch.float32).min
        with pytest.raises(KeyError, match="mask"):
            module(TensorDict(action_value=VALUES, batch_size=[2]))

    def test_dispatch_with_tensors(self):
        action, values, chosen = QValueModule(action_space="categorical")(action_value=VALUES)
        assert action.tolist() == [1, 0] and chosen.tolist() == [[3.0], [5.0]]

    def test_action_space_errors(self):
        with pytest.raises(ValueError, match="Unknown action_space"):
            QValueModule(action_space="continuous")
        with pytest.raises(ValueError, match="does not match"):
            QValueModule(action_space="one_hot", spec=Categorical(3))
        with pytest.raises(ValueError, match="Cannot infer"):
            QValueModule(spec=Bounded(-1.0, 1.0, (3,)))
        with pytest.raises(ValueError, match="Neither action_space nor spec"):
            QValueModule()
        with pytest.raises(KeyError, match="action-value key"):
            QValueModule(action_space="categorical", out_keys=["a", "b", "c"])

    def test_strict_shape(self):
        with pytest.raises(ValueError, match="spec has 4 actions"):
            QValueModule(spec=Categorical(4))(TensorDict(action_value=VALUES, batch_size=[2]))
        QValueModule(spec=Categorical(4), strict_shape=False)(TensorDict(action_value=VALUES, batch_size=[2]))
        auto = QValueModule(spec=Categorical(3, shape=(1,)), strict_shape="auto")
        assert auto(TensorDict(action_value=VALUES, batch_size=[2]))["action"].shape == (2, 1)

    def test_safe_projects_action(self):
        module = QValueModule(spec=Categorical(3), safe=True)
        assert module.spec["action"].n == 3 and module.safe


class TestQValueActor:
    def test_seed_quickstart_gym(self):
        gym = pytest.importorskip("torchrl.envs.libs.gym")
        env = gym.GymEnv("CartPole-v1")
        actor = QValueActor(
            MLP(in_features=env.observation_spec["observation"].shape[-1], out_features=2, num_cells=[64, 64]),
            in_keys=["observation"],
            spec=env.action_spec,
        )
        rollout = env.rollout(max_steps=200, policy=actor)
        assert rollout["action"].shape == (rollout.shape[0], 2)
        assert bool((rollout["action"].sum(-1) == 1).all())
        assert rollout["next", "reward"].sum().item() == rollout.shape[0]

    def test_mock_discrete_env(self):
        env = DiscreteActionVecMockEnv()
        n_obs = env.observation_spec["observation"].shape[-1]
        actor = QValueActor(nn.Linear(n_obs, env.action_spec.shape[-1]), spec=env.action_spec)
        rollout = env.rollout(5, actor)
        # int64 one-hot actions (as TorchRL), valid once cast to the spec's dtype
        assert rollout["action"].dtype == torch.long
        assert env.action_spec.is_in(rollout["action"][0].to(env.action_spec.dtype))

    def test_seed_tensordict_module(self):
        qnet = TensorDictModule(
            nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2)), in_keys=["observation"], out_keys=["action_value"]
        )
        actor = QValueActor(qnet, in_keys=["observation"], spec=Categorical(n=2))
        td = actor(TensorDict(observation=torch.randn(8, 4), batch_size=[8]))
        torch.testing.assert_close(td["action"], td["action_value"].argmax(-1))
        assert isinstance(actor, SafeSequential)

    def test_custom_keys(self):
        actor = QValueActor(
            nn.Linear(4, 3), in_keys=["obs"], action_space="categorical", action_value_key="q", action_key="a",
            chosen_action_value_key="q_a",
        )
        td = actor(TensorDict(obs=torch.randn(4)))
        assert {"q", "a", "q_a"} <= set(td.keys())

    def test_wrong_action_value_key(self):
        qnet = TensorDictModule(nn.Linear(4, 2), in_keys=["observation"], out_keys=["values"])
        with pytest.raises(KeyError, match="action_value"):
            QValueActor(qnet, spec=OneHot(2))


SUPPORT = torch.tensor([0.0, 1.0])
LOGITS = torch.tensor([[0.0, 5.0], [5.0, 0.0]]).log_softmax(-2)  # action 0 mostly atom 1, action 1 atom 0


class TestDistributional:
    def test_module(self):
        module = DistributionalQValueModule("categorical", support=SUPPORT)
        td = module(TensorDict(action_value=LOGITS))
        assert td["action"].item() == 0 and module.out_keys == ["action", "action_value"]
        one_hot = DistributionalQValueModule(None, support=SUPPORT, spec=OneHot(2))
        assert one_hot(TensorDict(action_value=LOGITS))["action"].long().tolist() == [1, 0]

    def test_mask(self):
        module = DistributionalQValueModule("categorical", support=SUPPORT, action_mask_key="mask")
        td = module(TensorDict(action_value=LOGITS, mask=torch.tensor([False, True])))
        assert td["action"].item() == 1

    def test_actor_applies_log_softmax(self):
        raw = torch.tensor([[0.0, 5.0], [5.0, 0.0]])
        net = TensorDictModule(lambda x: raw.expand(*x.shape[:-1], 2, 2), in_keys=["observation"], out_keys=["action_value"])
        actor = DistributionalQValueActor(net, support=SUPPORT, action_space="categorical")
        td = actor(TensorDict(observation=torch.zeros(3, 1), batch_size=[3]))
        assert td["action"].tolist() == [0, 0, 0]
        torch.testing.assert_close(td["action_value"].exp().sum(-2), torch.ones(3, 2))

    def test_hooks(self):
        net = nn.Linear(4, 3)
        net.register_forward_hook(QValueHook("one_hot"))
        action, values, chosen = net(torch.randn(4))
        assert action.sum() == 1 and chosen.item() == values.max().item()
        action, _ = DistributionalQValueHook("categorical", support=SUPPORT)(None, None, LOGITS)
        assert action.item() == 0


def _trunk():
    return TensorDictModule(nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"])


class TestOperators:
    def test_actor_value_operator(self):
        common = _trunk()
        policy = TensorDictModule(nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"])
        value = ValueOperator(nn.Linear(4, 1), in_keys=["hidden"])
        op = ActorValueOperator(common, policy, value)
        td = op(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
        assert {"action", "state_value", "hidden"} <= set(td.keys())
        pol, val = op.get_policy_operator(), op.get_value_operator()
        assert pol.module[0] is common and val.module[1] is value
        assert op.get_policy_head() is policy and op.get_value_head() is value
        ref = TensorDict(observation=torch.randn(3), batch_size=[])
        torch.testing.assert_close(pol(ref.clone())["action"], policy(common(ref.clone()))["action"])
        assert "state_value" not in pol(ref.clone())

    def test_probabilistic_policy_head(self):
        head = ProbabilisticActor(
            TensorDictModule(nn.Sequential(nn.Linear(4, 4), NormalParamExtractor()), in_keys=["hidden"], out_keys=["loc", "scale"]),
            in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True,
        )
        op = ActorValueOperator(_trunk(), head, ValueOperator(nn.Linear(4, 1), in_keys=["hidden"]))
        policy = op.get_policy_operator()
        assert isinstance(policy, SafeProbabilisticTensorDictSequential)
        with set_exploration_type(ExplorationType.RANDOM):
            td = policy(TensorDict(observation=torch.randn(3)))
        assert td["action"].shape == (2,) and "action_log_prob" in td

    def test_actor_critic_operator(self):
        common = _trunk()
        policy = TensorDictModule(nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"])
        critic = ValueOperator(MLP(in_features=6, out_features=1, num_cells=[]), in_keys=["hidden", "action"])
        op = ActorCriticOperator(common, policy, critic)
        assert op.get_critic_operator() is op
        with pytest.raises(RuntimeError, match="Use get_critic_operator"):  # as TorchRL
            op.get_value_operator()
        td = op.get_critic_operator()(TensorDict(observation=torch.randn(3)))
        assert td["state_action_value"].shape == (1,)
        assert op.get_policy_head() is policy and op.get_value_head() is critic
        with pytest.raises(RuntimeError, match="state_action_value"):
            ActorCriticOperator(_trunk(), policy, ValueOperator(nn.Linear(4, 1), in_keys=["hidden"]))

    def test_actor_critic_wrapper(self):
        policy = TensorDictModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"])
        value = ValueOperator(nn.Linear(3, 1))
        both = ActorCriticWrapper(policy, value)
        td = both(TensorDict(observation=torch.randn(3)))
        assert {"action", "state_value"} <= set(td.keys())
        assert both.get_policy_operator() is policy and both.get_value_operator() is value
        assert both.get_policy_head() is policy and both.get_value_head() is value
        assert isinstance(both, TensorDictSequential)
