"""TensorDict modules of torchrl.modules: actors, critics, Q-value modules, operators, safe modules, recurrent
modules and exploration modules, on fixed inputs with identical (shape-determined) weights."""
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

import parity
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import (
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    AdditiveGaussianModule,
    DistributionalQValueActor,
    DistributionalQValueModule,
    EGreedyModule,
    GRUModule,
    LSTMModule,
    OrnsteinUhlenbeckProcessModule,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    SafeModule,
    SafeSequential,
    TanhModule,
    TanhNormal,
    ValueOperator,
    set_recurrent_mode,
)


def _fill(module, scale=1.0):
    """Deterministic weights that depend only on each parameter's shape."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.linspace(-0.6, 0.7, p.numel()).reshape(p.shape) * scale / max(1.0, p.shape[-1] ** 0.5))
    return module


def _x(*shape, phase=0.0):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * 0.37 + phase).reshape(shape)


def _td(n=4, obs=3, **extra):
    return TensorDict({"observation": _x(n, obs), **extra}, batch_size=[n])


# ------------------------------------------------------------------------------------- actors, critics
def scenario_actor_defaults():
    actor = Actor(_fill(nn.Linear(3, 2)))
    out = actor(_td())
    return [out, actor.in_keys, actor.out_keys, actor.spec]


def scenario_actor_spec_and_safe():
    spec = Bounded(-0.2, 0.2, (2,))
    out = {}
    for safe in (False, True):
        actor = Actor(_fill(nn.Linear(3, 2), 3.0), spec=spec, safe=safe)
        out[str(safe)] = [actor(_td())["action"], actor.spec]
    out["composite"] = Actor(_fill(nn.Linear(3, 2)), spec=Composite(action=spec)).spec
    out["keys"] = parity.attempt(lambda: Actor(_fill(nn.Linear(3, 2)), in_keys=["obs"], out_keys=["act"])(
        TensorDict({"obs": _x(4, 3)}, [4])))
    return out


def _prob_actor(dist=TanhNormal, **kwargs):
    module = TensorDictModule(nn.Sequential(_fill(nn.Linear(3, 4)), NormalParamExtractor()), ["observation"],
                              ["loc", "scale"])
    return ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=dist, **kwargs)


def scenario_probabilistic_actor_deterministic():
    out = {}
    for kw in (dict(), dict(return_log_prob=True), dict(distribution_kwargs={"low": -2.0, "high": 2.0}),
               dict(spec=Bounded(-1.0, 1.0, (2,)), return_log_prob=True)):
        actor = _prob_actor(**kw)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            res = actor(_td())
        out[str(sorted(kw))] = [res, actor.out_keys]
    return out


def scenario_probabilistic_actor_random_structure():
    actor = _prob_actor(return_log_prob=True)
    with set_exploration_type(ExplorationType.RANDOM):
        res = actor(_td())
    dist = actor.get_dist(_td())
    return [parity.structure(res), type(dist).__name__, actor.in_keys, actor.out_keys]


def scenario_probabilistic_actor_default_interaction():
    # no exploration type set: the actor's default interaction
    res = _prob_actor()(_td())
    return res


def scenario_value_operator():
    out = {}
    v = ValueOperator(_fill(nn.Linear(3, 1)), in_keys=["observation"])
    out["state"] = [v(_td()), v.in_keys, v.out_keys]

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = _fill(nn.Linear(5, 1))

        def forward(self, obs, act):
            return self.lin(torch.cat([obs, act], -1))

    q = ValueOperator(Q(), in_keys=["observation", "action"])
    out["state_action"] = [q(_td(action=_x(4, 2, phase=1.0))), q.out_keys]
    out["default_in"] = ValueOperator(nn.Linear(3, 1)).in_keys
    return out


# ------------------------------------------------------------------------------------------ Q-values
Q_VALUES = torch.tensor([[0.1, 0.9, -0.3], [2.0, -1.0, 0.5], [0.0, 0.0, 0.1], [-1.0, -2.0, -0.5]])


def _qvalue_call(space, **kwargs):
    mod = QValueModule(action_space=space, **kwargs)
    td = TensorDict({"action_value": Q_VALUES.clone()}, [4])
    return [mod(td), mod.in_keys, mod.out_keys, mod.action_space]


def scenario_qvalue_module_action_spaces():
    out = {space: parity.attempt(lambda s=space: _qvalue_call(s))
           for space in ("one_hot", "one-hot", "categorical", "mult_one_hot")}
    out["mult_one_hot_var_nums"] = parity.attempt(lambda: _qvalue_call("mult_one_hot", var_nums=[1, 2]))
    return out


def scenario_qvalue_one_hot_ties():
    q = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    return [QValueModule(action_space=space)(TensorDict({"action_value": q.clone()}, [2]))["action"]
            for space in ("one_hot", "categorical")]


def scenario_qvalue_module_binary():
    return parity.attempt(lambda: _qvalue_call("binary"))


def scenario_qvalue_module_spec_and_mask():
    mod = QValueModule(spec=OneHot(3), action_mask_key="action_mask")
    mask = torch.tensor([[True, False, True], [False, True, True], [True, True, True], [True, False, False]])
    td = TensorDict({"action_value": Q_VALUES.clone(), "action_mask": mask}, [4])
    return [mod(td), mod.in_keys, mod.out_keys,
            parity.attempt(lambda: QValueModule()), parity.attempt(lambda: QValueModule(action_space="discrete")),
            QValueModule(spec=Categorical(3)).action_space]


def scenario_qvalue_actor():
    out = {}
    for spec in (OneHot(3), Categorical(3)):
        actor = QValueActor(_fill(nn.Linear(3, 3)), in_keys=["observation"], spec=spec)
        out[type(spec).__name__] = [actor(_td()), actor.in_keys, actor.out_keys, actor.spec]
    actor = QValueActor(_fill(nn.Linear(3, 3)), in_keys=["observation"], action_space="one-hot")
    out["space"] = actor(_td())
    return out


SUPPORT = torch.linspace(-1.0, 1.0, 4)


def scenario_distributional_qvalue_module():
    logits = _x(2, 4, 3)
    mod = DistributionalQValueModule(action_space="one-hot", support=SUPPORT)
    td = TensorDict({"action_value": logits.log_softmax(-2)}, [2])
    res = mod(td)
    cat = DistributionalQValueModule(action_space="categorical", support=SUPPORT)(
        TensorDict({"action_value": logits.log_softmax(-2)}, [2]))
    return [res, cat, mod.in_keys, mod.out_keys]


class _AtomNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _fill(nn.Linear(3, 4 * 3))
        with torch.no_grad():  # distinct expected values per action (no ties)
            self.lin.weight.mul_(torch.linspace(0.5, 2.0, 12).unsqueeze(-1))

    def forward(self, x):
        return self.lin(x).reshape(*x.shape[:-1], 4, 3)


def scenario_distributional_qvalue_actor():
    actor = DistributionalQValueActor(_AtomNet(), in_keys=["observation"], spec=OneHot(3), support=SUPPORT)
    return [actor(_td()), actor.out_keys]


def scenario_distributional_qvalue_needs_log_softmax():
    actor = DistributionalQValueActor(_AtomNet(), in_keys=["observation"], spec=OneHot(3), support=SUPPORT,
                                      make_log_softmax=False)
    mod = DistributionalQValueModule(action_space="one-hot", support=SUPPORT)
    return [parity.attempt(lambda: actor(_td())),
            parity.attempt(lambda: mod(TensorDict({"action_value": torch.ones(2, 4, 3)}, [2])))]


# ------------------------------------------------------------------------------------------- operators
def _common():
    return TensorDictModule(_fill(nn.Linear(3, 5)), ["observation"], ["hidden"])


def _policy_head():
    module = TensorDictModule(nn.Sequential(_fill(nn.Linear(5, 4)), NormalParamExtractor()), ["hidden"],
                              ["loc", "scale"])
    return ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True)


def scenario_actor_value_operator():
    value = ValueOperator(_fill(nn.Linear(5, 1)), in_keys=["hidden"])
    op = ActorValueOperator(_common(), _policy_head(), value)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        full = op(_td())
        policy = op.get_policy_operator()(_td())
        value_only = op.get_value_operator()(_td())
    return [full, policy, value_only, type(op.get_policy_head()).__name__, type(op.get_value_head()).__name__,
            op.in_keys, op.out_keys]


class _QHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _fill(nn.Linear(7, 1))

    def forward(self, hidden, action):
        return self.lin(torch.cat([hidden, action], -1))


def scenario_actor_critic_operator():
    value = ValueOperator(_QHead(), in_keys=["hidden", "action"])
    op = ActorCriticOperator(_common(), _policy_head(), value)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        full = op(_td())
        critic = op.get_critic_operator()(_td())
        policy = op.get_policy_operator()(_td())
    return [full, critic, policy, parity.attempt(lambda: op.get_value_operator()), op.out_keys]


def scenario_actor_critic_wrapper():
    policy = Actor(_fill(nn.Linear(3, 2)))

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = _fill(nn.Linear(5, 1))

        def forward(self, obs, act):
            return self.lin(torch.cat([obs, act], -1))

    op = ActorCriticWrapper(policy, ValueOperator(Q(), in_keys=["observation", "action"]))
    return [op(_td()), op.get_policy_operator()(_td()), op.get_value_operator()(_td(action=_x(4, 2))),
            op.in_keys, op.out_keys]


# ------------------------------------------------------------------------------------------- safe modules
def scenario_safe_module():
    spec = Bounded(-0.3, 0.3, (2,))
    out = {}
    for safe in (False, True):
        mod = SafeModule(_fill(nn.Linear(3, 2), 3.0), in_keys=["observation"], out_keys=["out"], spec=spec, safe=safe)
        out[str(safe)] = [mod(_td()), mod.spec]
    out["no_spec_safe"] = parity.attempt(lambda: SafeModule(nn.Linear(3, 2), in_keys=["observation"],
                                                            out_keys=["out"], safe=True))
    out["two_outs_leaf_spec"] = parity.attempt(lambda: SafeModule(nn.Linear(3, 2), in_keys=["observation"],
                                                                  out_keys=["a", "b"], spec=spec))
    return out


def scenario_safe_sequential():
    m1 = SafeModule(_fill(nn.Linear(3, 4)), in_keys=["observation"], out_keys=["hidden"],
                    spec=Unbounded((4,)))
    m2 = SafeModule(_fill(nn.Linear(4, 2), 4.0), in_keys=["hidden"], out_keys=["out"], spec=Bounded(-1, 1, (2,)),
                    safe=True)
    seq = SafeSequential(m1, m2)
    return [seq(_td()), seq.in_keys, seq.out_keys, seq.spec]


def scenario_tanh_module():
    x = _x(4, 2) * 3
    out = {}
    for kw in (dict(), dict(low=-2.0, high=1.0), dict(spec=Bounded(-0.5, 2.0, (2,))), dict(low=-1.0, high=1.0,
                                                                                              clamp=True)):
        mod = TanhModule(in_keys=["feature"], out_keys=["action"], **kw)
        out[str(sorted(kw))] = [mod(TensorDict({"feature": x.clone()}, [4]))["action"], mod.out_keys]
    out["default_out"] = TanhModule(in_keys=["feature"]).out_keys
    out["bad"] = parity.attempt(lambda: TanhModule(in_keys=["a"], out_keys=["b", "c"]))
    return out


# -------------------------------------------------------------------------------------------- recurrent
def _seq_td(batch=2, T=5, feat=3):
    is_init = torch.zeros(batch, T, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[0, 3] = True
    return TensorDict({"observation": _x(batch, T, feat), "is_init": is_init}, [batch, T])


def scenario_lstm_module_sequential_steps():
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key="observation", out_key="features")
    _fill(lstm)
    td = _seq_td()[:, 0]
    out = lstm(td)
    nxt = out["next"]
    return [out.exclude("next"), nxt, lstm.in_keys, lstm.out_keys]


def scenario_lstm_module_recurrent_mode():
    lstm = _fill(LSTMModule(input_size=3, hidden_size=4, in_key="observation", out_key="features"))
    td = _seq_td()
    with set_recurrent_mode(True):
        out = lstm(td.clone())
    default = _fill(LSTMModule(input_size=3, hidden_size=4, in_key="observation", out_key="features",
                               default_recurrent_mode=True))
    out2 = default(td.clone())
    with set_recurrent_mode(False):
        step = default(td[:, 0].clone())
    ends = out["next", "recurrent_state_h"][[0, 0, 1], [2, 4, 4]]  # the last step of each segment
    return [out["features"], ends, out["next", "recurrent_state_c"][[0, 0, 1], [2, 4, 4]], out2["features"],
            default.recurrent_mode, lstm.recurrent_mode, step["features"]]


def scenario_lstm_recurrent_mode_intermediate_states():
    lstm = _fill(LSTMModule(input_size=3, hidden_size=4, in_key="observation", out_key="features"))
    with set_recurrent_mode(True):
        out = lstm(_seq_td())
    return out["next", "recurrent_state_h"]


def scenario_recurrent_mode_cannot_be_set_on_the_module():
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key="observation", out_key="features")
    return [parity.attempt(lambda: lstm.set_recurrent_mode(True)),
            parity.attempt(lambda: setattr(lstm, "recurrent_mode", True)), lstm.recurrent_mode]


def scenario_bidirectional_recurrent_modules():
    gru = parity.attempt(lambda: GRUModule(input_size=3, hidden_size=4, in_key="observation", out_key="features",
                                           bidirectional=True))
    if isinstance(gru, Exception):
        return gru
    td = _seq_td()
    with set_recurrent_mode(True):
        seq = parity.structure(gru(td.clone()))
    return [parity.structure(gru(td[:, 0].clone())), seq]


def scenario_lstm_module_primer():
    lstm = LSTMModule(input_size=3, hidden_size=4, num_layers=2, in_key="observation", out_key="features")
    primer = lstm.make_tensordict_primer()
    return [type(primer).__name__, primer.primers]


def scenario_gru_module():
    gru = _fill(GRUModule(input_size=3, hidden_size=4, in_key="observation", out_key="features"))
    td = _seq_td()
    step = gru(td[:, 0].clone())
    with set_recurrent_mode(True):
        seq = gru(td.clone())
    primer = gru.make_tensordict_primer()
    return [step.exclude("next"), step["next"], seq["features"], gru.in_keys, gru.out_keys, primer.primers]


def scenario_recurrent_module_errors():
    return [parity.attempt(lambda: LSTMModule(input_size=3, hidden_size=4)),
            parity.attempt(lambda: LSTMModule(input_size=3, hidden_size=4, in_key="x", out_key="y",
                                              batch_first=False)),
            parity.attempt(lambda: LSTMModule(input_size=3, hidden_size=4, in_keys=["x", "h", "c"],
                                              out_keys=["y", ("next", "h"), ("next", "c")]).in_keys)]


# ------------------------------------------------------------------------------------------ exploration
def scenario_egreedy_annealing_and_greedy():
    spec = OneHot(3)
    mod = EGreedyModule(spec, eps_init=0.0, eps_end=0.0, annealing_num_steps=10)
    td = TensorDict({"action": torch.nn.functional.one_hot(torch.tensor([0, 2, 1, 1]), 3)}, [4])
    with set_exploration_type(ExplorationType.RANDOM):
        greedy = mod(td.clone())
    anneal = EGreedyModule(spec, eps_init=1.0, eps_end=0.1, annealing_num_steps=10)
    eps = []
    for _ in range(4):
        anneal.step(3)
        eps.append(anneal.eps)
    return [greedy, eps, mod.in_keys, mod.out_keys, parity.attempt(lambda: EGreedyModule(None))]


def scenario_egreedy_random_structure():
    mod = EGreedyModule(Categorical(3), eps_init=1.0, eps_end=1.0, action_mask_key="action_mask")
    td = TensorDict({"action": torch.tensor([0, 2, 1, 1]), "action_mask": torch.tensor(
        [[True, False, False], [False, True, False], [False, False, True], [True, True, False]])}, [4])
    with set_exploration_type(ExplorationType.RANDOM):
        out = mod(td.clone())
    allowed = out["action_mask"].gather(-1, out["action"].unsqueeze(-1)).all()
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        det = mod(td.clone())
    return [parity.structure(out), bool(allowed), det["action"], mod.in_keys]


def scenario_additive_gaussian():
    spec = Bounded(-1.0, 1.0, (2,))
    mod = AdditiveGaussianModule(spec, sigma_init=1.0, sigma_end=0.1, annealing_num_steps=4)
    td = TensorDict({"action": _x(4, 2) * 0.5}, [4])
    with set_exploration_type(ExplorationType.RANDOM):
        noisy = mod(td.clone())
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        det = mod(td.clone())
    sigmas = []
    for _ in range(5):
        mod.step()
        sigmas.append(mod.sigma)
    return [parity.structure(noisy), bool((noisy["action"].abs() <= 1).all()), det, sigmas, mod.in_keys,
            mod.out_keys]


def scenario_ornstein_uhlenbeck():
    spec = Bounded(-1.0, 1.0, (2,))
    mod = OrnsteinUhlenbeckProcessModule(spec, annealing_num_steps=4)
    td = TensorDict({"action": _x(4, 2) * 0.5, "is_init": torch.ones(4, 1, dtype=torch.bool)}, [4])
    with set_exploration_type(ExplorationType.RANDOM):
        noisy = mod(td.clone())
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        det = mod(td.clone())
    eps = []
    for _ in range(3):
        mod.step()
        eps.append(mod.eps)
    primer = mod.make_tensordict_primer() if hasattr(mod, "make_tensordict_primer") else None
    return [parity.structure(noisy), det, eps, mod.in_keys, mod.out_keys,
            None if primer is None else sorted(map(str, primer.primers.keys(True, True)))]
