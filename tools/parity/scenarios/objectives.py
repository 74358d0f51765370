"""Losses: outputs on a fixed batch with identical weights, keys, reductions, options and errors."""
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

import parity
from torchrl.data import Bounded, Categorical, OneHot
from torchrl.modules import (
    Actor,
    DistributionalQValueActor,
    IndependentNormal,
    OneHotCategorical,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
)
from torchrl.objectives import (
    A2CLoss,
    ClipPPOLoss,
    DDPGLoss,
    DiscreteSACLoss,
    DistributionalDQNLoss,
    DQNLoss,
    HardUpdate,
    KLPENPPOLoss,
    PPOLoss,
    ReinforceLoss,
    SACLoss,
    SoftUpdate,
    TD3BCLoss,
    TD3Loss,
    ValueEstimators,
)

N, OBS, ACT, NA = 5, 3, 2, 3  # batch, observation dim, continuous action dim, discrete actions


def _fill(module, scale=1.0):
    """Deterministic weights that depend only on each parameter's shape."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.linspace(-0.6, 0.7, p.numel()).reshape(p.shape) * scale)
    return module


def _obs(*shape, phase=0.0):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * 0.7 + phase).reshape(shape)


def _batch(action=None, n=N, **extra):
    done = torch.tensor([False, True, False, True, True][:n]).reshape(n, 1)
    terminated = torch.tensor([False, True, False, False, False][:n]).reshape(n, 1)
    td = TensorDict(
        {
            "observation": _obs(n, OBS),
            "next": {
                "observation": _obs(n, OBS, phase=1.0),
                "reward": torch.linspace(-1.0, 1.5, n).reshape(n, 1),
                "done": done,
                "terminated": terminated,
            },
        },
        batch_size=[n],
    )
    if action is not None:
        td["action"] = action
    for k, v in extra.items():
        td[k] = v
    return td


def _in_keys(loss):
    """``loss.in_keys`` in a fixed order (TorchRL's order is a set's)."""
    return sorted(loss.in_keys, key=lambda k: str(k if isinstance(k, tuple) else (k,)))


def _tensor_keys(loss):
    tk = loss.tensor_keys
    return {k: v for k, v in sorted(vars(tk).items())}


def _losses(td):
    return {k: v for k, v in td.items() if isinstance(k, str) and k.startswith("loss")}


def _grads(loss, td):
    """The gradient norms of the loss module's parameters after one backward of the summed loss terms, sorted
    (the parameter names are compared by ``scenario_loss_parameter_names``)."""
    out = loss(td)
    total = sum(v for k, v in out.items() if k.startswith("loss") and v.requires_grad)
    loss.zero_grad()
    total.backward()
    norms = sorted(round(p.grad.norm().item(), 5) for p in loss.parameters() if p.grad is not None)
    return [norms, sum(1 for p in loss.parameters() if p.grad is None)]


# ------------------------------------------------------------------------------------------------- DQN
def _qnet(action_space="one-hot"):
    spec = OneHot(NA) if action_space == "one-hot" else Categorical(NA)
    return QValueActor(_fill(nn.Linear(OBS, NA)), in_keys=["observation"], spec=spec)


def _dqn_batch(categorical=False):
    idx = torch.tensor([0, 2, 1, 1, 0])
    action = idx if categorical else torch.nn.functional.one_hot(idx, NA)
    return _batch(action)


def scenario_dqn_default():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    td = _dqn_batch()
    out = loss(td)
    return [out, td.get("td_error", None), _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_dqn_options():
    out = {}
    for kw in (dict(loss_function="l1"), dict(loss_function="smooth_l1"), dict(double_dqn=True),
               dict(delay_value=False), dict(gamma=0.5), dict(reduction="none"), dict(reduction="sum")):
        res = parity.attempt(lambda: DQNLoss(_qnet(), action_space="one-hot", **kw)(_dqn_batch()))
        out[str(kw)] = res
    return out


def scenario_dqn_categorical_action_space():
    loss = DQNLoss(_qnet("categorical"), action_space="categorical")
    return loss(_dqn_batch(categorical=True))


def scenario_dqn_action_space_from_spec():
    loss = DQNLoss(_qnet())  # the QValueActor's spec gives the action space
    return [loss(_dqn_batch()), parity.attempt(lambda: DQNLoss(_fill(nn.Linear(OBS, NA))))]


def scenario_dqn_value_estimators():
    out = {}
    for vt in (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda):
        loss = DQNLoss(_qnet(), action_space="one-hot")
        loss.make_value_estimator(vt, gamma=0.8)
        out[vt.name] = [loss(_dqn_batch().unsqueeze(0))["loss"], type(loss.value_estimator).__name__]
    loss = DQNLoss(_qnet(), action_space="one-hot")
    out["GAE"] = parity.attempt(lambda: loss.make_value_estimator(ValueEstimators.GAE))
    return out


def scenario_dqn_set_keys():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    loss.set_keys(reward="r", done="d", terminated="t")
    td = _dqn_batch()
    td.rename_key_(("next", "reward"), ("next", "r"))
    td.rename_key_(("next", "done"), ("next", "d"))
    td.rename_key_(("next", "terminated"), ("next", "t"))
    return [loss(td), _in_keys(loss), _tensor_keys(loss), parity.attempt(lambda: loss.set_keys(not_a_key="x"))]


def scenario_dqn_missing_action():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    td = _dqn_batch()
    del td["action"]
    return parity.attempt(lambda: loss(td))


def scenario_dqn_bad_options():
    return [parity.attempt(lambda: DQNLoss(_qnet(), action_space="one-hot", loss_function="l3")(_dqn_batch())),
            parity.attempt(lambda: DQNLoss(_qnet(), action_space="one-hot", reduction="avg")(_dqn_batch()))]


def scenario_dqn_backward():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    return _grads(loss, _dqn_batch())


# ------------------------------------------------------------------------------------- Distributional DQN
ATOMS = 5


class _DistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _fill(nn.Linear(OBS, ATOMS * NA))

    def forward(self, x):
        return self.lin(x).reshape(*x.shape[:-1], ATOMS, NA).log_softmax(-2)


def _dist_actor():
    return DistributionalQValueActor(_DistNet(), in_keys=["observation"], spec=OneHot(NA),
                                     support=torch.linspace(-2.0, 2.0, ATOMS))


def scenario_distributional_dqn():
    loss = DistributionalDQNLoss(_dist_actor(), gamma=0.9)
    out = loss(_dqn_batch())
    return [out, _tensor_keys(loss)]


def scenario_distributional_dqn_options():
    out = {}
    for kw in (dict(reduction="none"), dict(reduction="sum"), dict(delay_value=False)):
        out[str(kw)] = parity.attempt(lambda: DistributionalDQNLoss(_dist_actor(), gamma=0.9, **kw)(_dqn_batch()))
    return out


# ------------------------------------------------------------------------------------------------ DDPG
class _QNet(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.lin = _fill(nn.Linear(OBS + ACT, 1), scale)

    def forward(self, obs, action):
        return self.lin(torch.cat([obs, action], -1))


def _det_actor(spec=None):
    return Actor(_fill(nn.Sequential(nn.Linear(OBS, ACT), nn.Tanh())), in_keys=["observation"], spec=spec)


def _qvalue(scale=1.0):
    return ValueOperator(_QNet(scale), in_keys=["observation", "action"])


def _cont_action():
    return torch.linspace(-0.8, 0.9, N * ACT).reshape(N, ACT)


def scenario_ddpg_default():
    loss = DDPGLoss(_det_actor(), _qvalue())
    td = _batch(_cont_action())
    out = loss(td)
    return [out, td.get("td_error", None), _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_ddpg_options():
    out = {}
    for kw in (dict(loss_function="l1"), dict(loss_function="smooth_l1"), dict(delay_actor=True),
               dict(delay_value=False), dict(gamma=0.5), dict(reduction="none"), dict(reduction="sum"),
               dict(separate_losses=True)):
        out[str(kw)] = parity.attempt(lambda: DDPGLoss(_det_actor(), _qvalue(), **kw)(_batch(_cont_action())))
    return out


def scenario_ddpg_backward():
    return _grads(DDPGLoss(_det_actor(), _qvalue()), _batch(_cont_action()))


def scenario_ddpg_value_estimators():
    out = {}
    for vt in (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda):
        loss = DDPGLoss(_det_actor(), _qvalue())
        loss.make_value_estimator(vt, gamma=0.8)
        out[vt.name] = loss(_batch(_cont_action()).unsqueeze(0))["loss_value"]
    return out


# ------------------------------------------------------------------------------------------------ TD3
def _bounded():
    return Bounded(low=-torch.ones(ACT), high=torch.ones(ACT), shape=(ACT,))


def _twin_q(n=2):
    # a list of networks: their parameters are stacked as given (a single network's copies are re-initialised)
    return [_qvalue(1.0 - 0.3 * i) for i in range(n)]


def scenario_td3_no_noise():
    loss = TD3Loss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded(), policy_noise=0.0, noise_clip=0.0)
    td = _batch(_cont_action())
    out = loss(td)
    return [out, _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_td3_options():
    out = {}
    for kw in (dict(loss_function="l2"), dict(reduction="none"), dict(reduction="sum"), 
               dict(delay_actor=False, delay_qvalue=False), dict(separate_losses=True)):
        out[str(kw)] = parity.attempt(lambda: TD3Loss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded(),
                                                      policy_noise=0.0, noise_clip=0.0, **kw)(_batch(_cont_action())))
    return out


def scenario_td3_random_noise_structure():
    loss = TD3Loss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded())
    return parity.structure(loss(_batch(_cont_action())))


def scenario_td3_three_qvalue_nets():
    loss = TD3Loss(_det_actor(_bounded()), _twin_q(3), action_spec=_bounded(), num_qvalue_nets=3, policy_noise=0.0,
                   noise_clip=0.0)
    return loss(_batch(_cont_action()))


def scenario_td3_single_qvalue_net_structure():
    loss = TD3Loss(_det_actor(_bounded()), _qvalue(), action_spec=_bounded(), policy_noise=0.0)
    return [parity.structure(loss(_batch(_cont_action()))), parity.structure(loss.qvalue_network_params),
            parity.structure(loss.target_qvalue_network_params)]


def scenario_td3_bounds_and_errors():
    return [
        _losses(TD3Loss(_det_actor(), _twin_q(), bounds=(-1.0, 1.0), policy_noise=0.0)(_batch(_cont_action()))),
        parity.attempt(lambda: TD3Loss(_det_actor(), _twin_q())),
        parity.attempt(lambda: TD3Loss(_det_actor(), _twin_q(), action_spec=_bounded(), bounds=(-1.0, 1.0))),
    ]


def scenario_td3_bc_no_noise():
    loss = TD3BCLoss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded(), policy_noise=0.0, noise_clip=0.0)
    out = loss(_batch(_cont_action()))
    return [out, _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_td3_bc_options():
    out = {}
    for kw in (dict(alpha=1.0), dict(reduction="none"), dict(reduction="sum"), dict(loss_function="l2")):
        out[str(kw)] = parity.attempt(lambda: TD3BCLoss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded(),
                                                        policy_noise=0.0, noise_clip=0.0, **kw)(_batch(_cont_action())))
    return out


# ----------------------------------------------------------------------------------- on-policy losses
def _normal_actor(dist=IndependentNormal, **kwargs):
    net = nn.Sequential(_fill(nn.Linear(OBS, 2 * ACT)), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=dist, return_log_prob=True,
                              **kwargs)


def _critic():
    return ValueOperator(_fill(nn.Linear(OBS, 1), 0.5), in_keys=["observation"])


def _onpolicy_batch(with_advantage=True):
    td = _batch(_cont_action(), action_log_prob=torch.linspace(-2.0, -0.5, N))
    if with_advantage:
        td["advantage"] = torch.linspace(-1.0, 1.0, N).reshape(N, 1)
        td["value_target"] = torch.linspace(0.0, 2.0, N).reshape(N, 1)
    return td


def scenario_ppo_losses_default():
    out = {}
    for cls in (PPOLoss, ClipPPOLoss, KLPENPPOLoss):
        loss = cls(_normal_actor(), _critic())
        td = _onpolicy_batch()
        res = loss(td)
        out[cls.__name__] = [res, _in_keys(loss), loss.out_keys, _tensor_keys(loss)]
    return out


def scenario_ppo_options():
    out = {}
    for kw in (dict(entropy_bonus=False), dict(entropy_coeff=0.1), dict(critic_coeff=0.5), dict(critic_coeff=None),
               dict(loss_critic_type="l2"), dict(loss_critic_type="l1"), dict(normalize_advantage=True),
               dict(reduction="none"), dict(reduction="sum"), dict(clip_value=0.1), dict(separate_losses=True),
               dict(log_explained_variance=False), dict(functional=False)):
        out[str(kw)] = parity.attempt(lambda: PPOLoss(_normal_actor(), _critic(), **kw)(_onpolicy_batch()))
    return out


def scenario_clip_ppo_options():
    out = {}
    for kw in (dict(clip_epsilon=0.05), dict(clip_epsilon=(0.1, 0.3)), dict(clip_value=True), dict(clip_value=0.05),
               dict(reduction="none"), dict(normalize_advantage=True), dict(entropy_bonus=False)):
        out[str(kw)] = parity.attempt(lambda: ClipPPOLoss(_normal_actor(), _critic(), **kw)(_onpolicy_batch()))
    return out


def scenario_klpen_ppo_options():
    out = {}
    for kw in (dict(dtarg=0.5, beta=2.0), dict(increment=3.0, decrement=0.1), dict(reduction="sum")):
        loss = KLPENPPOLoss(_normal_actor(), _critic(), **kw)
        td = _onpolicy_batch()
        td["loc"] = torch.zeros(N, ACT)
        td["scale"] = torch.ones(N, ACT)
        first = parity.attempt(lambda: loss(td.clone()))
        out[str(kw)] = [first, loss.beta]
    return out


def scenario_ppo_computes_advantage():
    out = {}
    for cls in (PPOLoss, ClipPPOLoss, A2CLoss):
        loss = cls(_normal_actor(), _critic())
        loss.make_value_estimator(ValueEstimators.GAE, gamma=0.9, lmbda=0.8)
        td = _onpolicy_batch(with_advantage=False).unsqueeze(0)
        res = loss(td)
        out[cls.__name__] = [_losses(res), td.get("advantage", None), td.get("value_target", None)]
    return out


def scenario_ppo_tanh_normal_structure():
    actor = _normal_actor(TanhNormal)
    loss = ClipPPOLoss(actor, _critic())
    return parity.structure(loss(_onpolicy_batch()))


def scenario_ppo_missing_keys():
    loss = ClipPPOLoss(_normal_actor(), _critic())
    out = {}
    for key in ("action", "action_log_prob", "observation"):
        td = _onpolicy_batch()
        del td[key]
        out[key] = parity.attempt(lambda t=td: loss(t))
    return out


def scenario_ppo_backward():
    return _grads(ClipPPOLoss(_normal_actor(), _critic()), _onpolicy_batch())


def scenario_a2c_default():
    loss = A2CLoss(_normal_actor(), _critic())
    out = loss(_onpolicy_batch())
    return [out, _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_a2c_options():
    out = {}
    for kw in (dict(entropy_bonus=False), dict(entropy_coeff=0.1), dict(critic_coeff=0.5),
               dict(loss_critic_type="l2"), dict(reduction="none"), dict(reduction="sum"), dict(clip_value=0.1),
               dict(separate_losses=True)):
        out[str(kw)] = parity.attempt(lambda: A2CLoss(_normal_actor(), _critic(), **kw)(_onpolicy_batch()))
    return out


def scenario_reinforce_default():
    loss = ReinforceLoss(_normal_actor(), _critic())
    out = loss(_onpolicy_batch())
    return [out, _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_reinforce_per_dimension_log_prob():
    # a Normal (not Independent) actor: log-probabilities [B, action dim] against advantages [B, 1]
    loss = ReinforceLoss(_normal_actor(torch.distributions.Normal), _critic())
    return [parity.attempt(lambda: loss(_onpolicy_batch())),
            parity.attempt(lambda: A2CLoss(_normal_actor(torch.distributions.Normal), _critic())(_onpolicy_batch()))]


def scenario_on_policy_losses_need_a_critic():
    return [parity.attempt(lambda: A2CLoss(_normal_actor())), parity.attempt(lambda: ReinforceLoss(_normal_actor())),
            PPOLoss(_normal_actor()).out_keys, A2CLoss(_normal_actor(), _critic(), critic_coeff=None).out_keys]


def scenario_reinforce_options():
    out = {}
    for kw in (dict(loss_critic_type="l2"), dict(reduction="none"), dict(reduction="sum"), dict(clip_value=0.1),
               dict(delay_value=True)):
        out[str(kw)] = parity.attempt(lambda: ReinforceLoss(_normal_actor(), _critic(), **kw)(_onpolicy_batch()))
    return out


# ------------------------------------------------------------------------------------------------- SAC
def _sac_actor(spec=None):
    return _normal_actor(TanhNormal, spec=spec)


def scenario_sac_structure():
    out = {}
    for kw in (dict(), dict(fixed_alpha=True), dict(reduction="none", scalar_output_mode="exclude"),
               dict(num_qvalue_nets=3), dict(reduction="none", scalar_output_mode="non_tensor")):
        n = kw.get("num_qvalue_nets", 2)
        loss = SACLoss(_sac_actor(), _twin_q(n), action_spec=_bounded(), **kw)
        res = loss(_batch(_cont_action()))
        out[str(sorted(kw))] = [parity.structure(res), _in_keys(loss), loss.out_keys, _tensor_keys(loss)]
    return out


def scenario_sac_reduction_none_warns():
    loss = SACLoss(_sac_actor(), _twin_q(), action_spec=_bounded(), reduction="none")
    return parity.warns(lambda: parity.structure(loss(_batch(_cont_action()))))


def _v_net():
    return ValueOperator(_fill(nn.Linear(OBS, 1)), in_keys=["observation"])


def scenario_sac_v1_structure():
    loss = SACLoss(_sac_actor(), _twin_q(), _v_net(), action_spec=_bounded())
    res = loss(_batch(_cont_action()[:4], n=4))
    return [parity.structure(res), _in_keys(loss), loss.out_keys, _tensor_keys(loss)]


def scenario_sac_v1_odd_batch():
    loss = SACLoss(_sac_actor(), _twin_q(), _v_net(), action_spec=_bounded())
    return parity.attempt(lambda: parity.structure(loss(_batch(_cont_action()))))


def scenario_sac_needs_action_dim():
    out = [parity.attempt(lambda: SACLoss(_sac_actor(), _twin_q())),
           parity.attempt(lambda: SACLoss(_sac_actor(), _twin_q())(_batch(_cont_action())))]
    loss = SACLoss(_sac_actor(_bounded()), _twin_q())  # the actor's spec gives the action dim
    out.append(loss.target_entropy)
    return out


def scenario_sac_alpha_and_entropy():
    out = {}
    for kw in (dict(), dict(alpha_init=0.5), dict(target_entropy=-3.0), dict(fixed_alpha=True, alpha_init=2.0),
               dict(min_alpha=0.1, max_alpha=0.5, alpha_init=3.0)):
        loss = SACLoss(_sac_actor(), _twin_q(), action_spec=_bounded(), **kw)
        out[str(sorted(kw))] = [loss.target_entropy, loss.log_alpha, loss(_batch(_cont_action()))["alpha"]]
    return out


def _discrete_actor():
    module = TensorDictModule(_fill(nn.Linear(OBS, NA)), in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(module, in_keys=["logits"], distribution_class=OneHotCategorical,
                              return_log_prob=False, spec=OneHot(NA))


def _discrete_q(n=2):
    return [ValueOperator(_fill(nn.Linear(OBS, NA), 0.7 - 0.2 * i), in_keys=["observation"], out_keys=["action_value"])
            for i in range(n)]


def scenario_discrete_sac_default():
    loss = DiscreteSACLoss(_discrete_actor(), _discrete_q(), action_space="one-hot", num_actions=NA)
    td = _dqn_batch()
    out = loss(td)
    return [out, _in_keys(loss), loss.out_keys, _tensor_keys(loss), loss.target_entropy]


def scenario_discrete_sac_options():
    out = {}
    for kw in (dict(reduction="none"), dict(reduction="sum"), dict(target_entropy_weight=0.5),
               dict(target_entropy=-1.0), dict(fixed_alpha=True, alpha_init=0.3), dict(num_qvalue_nets=3),
               dict(loss_function="l2")):
        nq = kw.get("num_qvalue_nets", 2)
        loss = parity.attempt(lambda: DiscreteSACLoss(_discrete_actor(), _discrete_q(nq), action_space="one-hot",
                                                      num_actions=NA, **kw))
        out[str(kw)] = loss if isinstance(loss, Exception) else parity.attempt(lambda: loss(_dqn_batch()))
    return out


def scenario_discrete_sac_skip_done_states():
    # done only where terminated: skipping the done next states changes nothing
    td = _dqn_batch()
    td["next", "done"] = td["next", "terminated"].clone()
    return [DiscreteSACLoss(_discrete_actor(), _discrete_q(), action_space="one-hot", num_actions=NA,
                            skip_done_states=skip)(td.clone())["loss_qvalue"] for skip in (False, True)]


def scenario_discrete_sac_skip_done_states_truncated():
    # a truncated step (done, not terminated) with skip_done_states=True
    loss = DiscreteSACLoss(_discrete_actor(), _discrete_q(), action_space="one-hot", num_actions=NA,
                           skip_done_states=True)
    return loss(_dqn_batch())["loss_qvalue"]


def scenario_discrete_sac_construction_errors():
    return [parity.attempt(lambda: DiscreteSACLoss(_discrete_actor(), _discrete_q(), action_space=OneHot(NA))),
            parity.attempt(lambda: DiscreteSACLoss(_discrete_actor(), _discrete_q(), action_space="one-hot",
                                                   target_entropy=-1.0).target_entropy),
            parity.attempt(lambda: DiscreteSACLoss(_discrete_actor(), _discrete_q(), num_actions=NA).target_entropy)]


# --------------------------------------------------------------------------------- target updaters
def _first_target(loss, name):
    return [p.detach().clone() for p in getattr(loss, name).values(True, True)][0]


def scenario_soft_update():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    upd = SoftUpdate(loss, eps=0.75)
    with torch.no_grad():
        for p in loss.value_network_params.values(True, True):
            p.add_(1.0)
    before = _first_target(loss, "target_value_network_params")
    upd.step()
    after = _first_target(loss, "target_value_network_params")
    upd.step()
    return [before, after, _first_target(loss, "target_value_network_params"),
            parity.attempt(lambda: SoftUpdate(loss, eps=0.75, tau=0.25)),
            SoftUpdate(DQNLoss(_qnet(), action_space="one-hot"), tau=0.1).eps,
            parity.attempt(lambda: SoftUpdate(loss, eps=1.5))]


def scenario_soft_update_errors():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    return [parity.attempt(lambda: SoftUpdate(loss)), parity.attempt(lambda: SoftUpdate(loss, eps=-0.1)),
            parity.attempt(lambda: SoftUpdate(loss, tau=0.3).eps)]


def scenario_hard_update():
    loss = DDPGLoss(_det_actor(), _qvalue())
    upd = HardUpdate(loss, value_network_update_interval=2)
    with torch.no_grad():
        for p in loss.value_network_params.values(True, True):
            p.mul_(2.0)
    out = []
    for _ in range(3):
        upd.step()
        out.append(_first_target(loss, "target_value_network_params"))
    return out


def _state_names(loss):
    # parameter names (optimizer groups) and state-dict keys (checkpoints); named_buffers is left out: TorchRL's
    # SAC saves _target_entropy without listing it among its buffers
    return [sorted(n for n, _ in loss.named_parameters()), sorted(loss.state_dict())]


def scenario_loss_parameter_names():
    makers = {
        "dqn": lambda: DQNLoss(_qnet(), action_space="one-hot"),
        "ddpg": lambda: DDPGLoss(_det_actor(), _qvalue()),
        "td3": lambda: TD3Loss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded()),
        "td3bc": lambda: TD3BCLoss(_det_actor(_bounded()), _twin_q(), action_spec=_bounded()),
        "ppo": lambda: ClipPPOLoss(_normal_actor(), _critic()),
        "klpen": lambda: KLPENPPOLoss(_normal_actor(), _critic()),
        "a2c": lambda: A2CLoss(_normal_actor(), _critic()),
        "reinforce": lambda: ReinforceLoss(_normal_actor(), _critic()),
        "sac": lambda: SACLoss(_sac_actor(), _twin_q(), action_spec=_bounded()),
        "sac_v1": lambda: SACLoss(_sac_actor(), _twin_q(), _v_net(), action_spec=_bounded()),
        "discrete_sac": lambda: DiscreteSACLoss(_discrete_actor(), _discrete_q(), action_space="one-hot",
                                                num_actions=NA),
    }
    return {name: _state_names(make()) for name, make in makers.items()}


def scenario_loss_state_dict_round_trip():
    loss = DDPGLoss(_det_actor(), _qvalue())
    other = DDPGLoss(_det_actor(), _qvalue(0.5))
    other.load_state_dict(loss.state_dict())
    return [other(_batch(_cont_action())), sorted(other.state_dict())]


def scenario_distributional_dqn_parameter_names():
    return _state_names(DistributionalDQNLoss(_dist_actor(), gamma=0.9))


def scenario_loss_without_target_update_warns():
    loss = DQNLoss(_qnet(), action_space="one-hot")
    return parity.warns(lambda: _losses(loss(_dqn_batch())))
