"""Names user code imports and small behaviours (issue 17): ``torchrl._utils``, ``_has_*`` flags,
``_apply_to_composite``, ``ValueEstimators``, distributions' attributes, squeeze transforms, ``Composite``
options, ``EnvBase`` keywords, conv / multi-agent networks, gSDE, ``split_trajectories``, ``MultiStep``."""
import importlib

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

import parity
from torchrl.data import Bounded, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase
from torchrl.envs.transforms import SqueezeTransform, Transform, UnsqueezeTransform


# ------------------------------------------------------------------------------------------ torchrl._utils
def scenario_utils_names():
    import torchrl._utils as u

    names = ["logger", "timeit", "get_available_device", "compile_with_warmup", "set_profiling_enabled", "VERBOSE",
             "RL_WARNINGS", "LOGGING_LEVEL", "rl_warnings", "accept_remote_rref_invocation",
             "accept_remote_rref_udf_invocation", "implement_for", "seed_generator", "prod", "strtobool",
             "get_binary_env_var", "KeyDependentDefaultDict", "DEFAULT_DONE_KEYS", "BATCHED_PIPE_TIMEOUT",
             "WEIGHT_SYNC_TIMEOUT", "cuda_memory_profile", "cuda_memory_stats", "reset_cuda_peak_stats",
             "auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env", "is_compiling", "unravel_key",
             "print_directory_tree", "get_trace", "record_function"]
    return [[n for n in names if not hasattr(u, n)], u.VERBOSE, u.RL_WARNINGS, u.rl_warnings(), u.LOGGING_LEVEL,
            list(u.DEFAULT_DONE_KEYS), u.BATCHED_PIPE_TIMEOUT, u.WEIGHT_SYNC_TIMEOUT, u.logger.name]


def scenario_utils_helpers():
    import torchrl._utils as u

    d = u.KeyDependentDefaultDict(lambda k: k * 2)
    return [u.prod([2, 3, 4]), u.prod(()), u.seed_generator(0), u.seed_generator(1), u.strtobool("yes"),
            u.strtobool("0"), parity.attempt(lambda: u.strtobool("maybe")), u.get_binary_env_var("TORCHRL_NOT_SET_XYZ"),
            u.get_available_device(return_str=True), d[3], dict(d), u.accept_remote_rref_invocation(lambda x: x + 1)(1),
            parity.warns(lambda: u.set_profiling_enabled(True))]


def scenario_timeit_registry():
    from torchrl._utils import timeit

    timeit._REG.clear()
    with timeit("a"):
        pass

    @timeit("b")
    def f(x):
        return x + 1

    f(1)
    keys = [sorted(timeit.todict()), sorted(timeit.todict(percall=False)), sorted(timeit.todict(prefix="pp"))]
    timeit.erase()
    out = [keys, timeit.todict(), timeit.print(), timeit.print(prefix="PX"),
           parity.attempt(lambda: timeit.mark_end("never_started")), parity.attempt(lambda: timeit("y").elapsed())]
    timeit._REG.clear()
    return out


def scenario_env_set_seed_chain():
    from torchrl.envs import GymEnv

    env = GymEnv("Pendulum-v1")
    return [env.set_seed(0), env.set_seed(1), env.set_seed(5, static_seed=True)]


# ------------------------------------------------------------------------------------------- _has_ flags
def scenario_has_flags_names():
    out = {}
    for name in ["torchrl.envs.libs.gym", "torchrl.envs.libs.envpool", "torchrl.envs.libs._gym_utils",
                 "torchrl.record.loggers.tensorboard", "torchrl.record.loggers.mlflow",
                 "torchrl.record.loggers.wandb", "torchrl.record.loggers.common", "torchrl.record.loggers.csv"]:
        module = importlib.import_module(name)
        out[name] = sorted(n for n in dir(module) if n.startswith("_has_"))
    return out


# ----------------------------------------------------------------------------------- _apply_to_composite
def scenario_apply_to_composite():
    from torchrl.envs.transforms.transforms import _apply_to_composite

    class Sin(Transform):
        def _apply_transform(self, obs):
            return obs.sin()

        @_apply_to_composite
        def transform_observation_spec(self, observation_spec):
            return Bounded(low=-1, high=1, shape=observation_spec.shape, dtype=observation_spec.dtype,
                           device=observation_spec.device)

    spec = Composite(a=Unbounded((3,)), n=Composite(b=Unbounded((2,))), z=Unbounded((1,)))
    t = Sin(in_keys=["a", ("n", "b"), "missing", "n"], out_keys=["a2", ("n", "b2"), "m2", "n2"])
    out = t.transform_observation_spec(spec)
    leaf = Sin(in_keys=["a"], out_keys=["a"]).transform_observation_spec(Unbounded((4,)))
    bad = parity.attempt(lambda: Sin(in_keys=["a"], out_keys=["a", "b"]).transform_observation_spec(spec.clone()))
    return [out, leaf, bad, type(spec["a"]).__name__]


# ------------------------------------------------------------------------------------- ValueEstimators
def scenario_value_estimators():
    from torchrl.modules import ProbabilisticActor, QValueActor, TanhNormal, ValueOperator
    from torchrl.objectives import ClipPPOLoss, DQNLoss
    from torchrl.objectives.utils import ValueEstimators, default_value_kwargs

    def ppo():
        net = nn.Sequential(nn.Linear(3, 4), NormalParamExtractor())
        actor = ProbabilisticActor(TensorDictModule(net, ["observation"], ["loc", "scale"]), in_keys=["loc", "scale"],
                                   distribution_class=TanhNormal, return_log_prob=True)
        return ClipPPOLoss(actor, ValueOperator(nn.Linear(3, 1), in_keys=["observation"]))

    def dqn():
        return DQNLoss(QValueActor(nn.Linear(3, 2), spec=OneHot(2)), action_space="one-hot")

    out = [[(v.name, v.value) for v in ValueEstimators], {v.name: default_value_kwargs(v) for v in ValueEstimators}]
    for make in (ppo, dqn):
        row = {}
        for vt in ValueEstimators:
            loss = make()
            res = parity.attempt(lambda: loss.make_value_estimator(vt))
            row[vt.name] = res if isinstance(res, Exception) else type(loss.value_estimator).__name__
        out.append(row)
    loss = ppo()
    loss.make_value_estimator(ValueEstimators.MAGAE, gamma=0.5, lmbda=0.7)
    out.append([loss.value_estimator.gamma, loss.value_estimator.lmbda, loss.value_estimator.agent_dim])
    return out


# ---------------------------------------------------------------------------------------- distributions
def scenario_truncated_normal_attributes():
    from torchrl.modules.distributions import TruncatedNormal

    loc, scale = torch.tensor([[-0.5, 0.0, 0.3, 2.0]]), torch.tensor([[0.5, 1.0, 2.0, 0.1]])
    d = TruncatedNormal(loc, scale, low=-1.0, high=2.0)
    t = TruncatedNormal(loc, scale, low=-1.0, high=2.0, tanh_loc=True, upscale=2.0)
    return [d.device, d.low, d.high, d.upscale, d.non_trivial_max, d.non_trivial_min, d.loc, d.scale,
            sorted(d.arg_constraints), d.deterministic_sample, d.mean, d.mode,
            d.log_prob(torch.tensor([[0.1, 0.5, 1.0, 1.5]])), t.loc, d.batch_shape, d.event_shape]


def scenario_tanh_normal_attributes():
    from torchrl.modules.distributions import TanhNormal

    loc, scale = torch.tensor([-0.5, 0.0, 0.3, 2.0]), torch.tensor([0.5, 1.0, 2.0, 0.1])
    out = []
    for kw in (dict(low=-1.0, high=2.0), dict(low=0.0, high=4.0, tanh_loc=True),
               dict(low=-2.0, high=2.0, upscale=3.0, tanh_loc=True)):
        d = TanhNormal(loc, scale, **kw)
        x = torch.tensor([0.1, 0.5, 1.0, 1.5]) if kw["high"] > 1.5 else torch.tensor([0.1, 0.5, -0.5, 0.9])
        out.append([d.device, d.low, d.high, d.non_trivial_max, d.non_trivial_min, type(d.root_dist).__name__,
                    type(d.base_dist).__name__, d.root_dist.loc, d.deterministic_sample, d.log_prob(x),
                    parity.attempt(lambda: d.mode), parity.attempt(lambda: d.mean), repr(d), d.batch_shape,
                    d.event_shape])
    return out


def scenario_tanh_delta_and_discrete():
    from torchrl.modules.distributions import MaskedCategorical, MaskedOneHotCategorical, OneHotCategorical, TanhDelta

    p = torch.tensor([[-0.5, 0.0, 0.5, 3.0]])
    sym = TanhDelta(p)
    vec = TanhDelta(p, low=torch.tensor([-1.0, -2, -3, -4]), high=torch.tensor([1.0, 2, 3, 4]))
    logits = torch.tensor([[0.1, -1.0, 2.0, 0.5]]).expand(3, 4)
    mask = torch.tensor([[True, False, True, True]] * 3)
    o, m, mo = OneHotCategorical(logits=logits), MaskedCategorical(logits=logits, mask=mask), \
        MaskedOneHotCategorical(logits=logits, mask=mask)
    return [sym.mode, sym.low, sym.high, sym.has_rsample, sorted(sym.arg_constraints), vec.mode,
            sym.log_prob(sym.sample()), o.has_rsample, o.grad_method.name, o.num_samples, o.mode,
            m.padding_value, m.num_samples, m.log_prob(torch.tensor([0, 2, 3])), mo.has_rsample, mo.num_samples,
            mo.grad_method.name]


def scenario_tanh_delta_asymmetric_bounds():
    from torchrl.modules.distributions import TanhDelta

    d = TanhDelta(torch.tensor([[-0.5, 0.0, 0.5, 3.0]]), low=-1.0, high=2.0)
    return [d.mode, d.deterministic_sample, d.low, d.high, d.base_dist.param]


# ------------------------------------------------------------------------------------- squeeze transforms
def _shapes(fn):
    res = parity.attempt(fn)
    if isinstance(res, Exception):
        return res
    return {str(k): list(v.shape) for k, v in res.items(True, True)}


def scenario_squeeze_transforms_data():
    td = TensorDict({"x": torch.zeros(4, 3, 1), "y": torch.zeros(4, 1, 3)}, [4])
    out = {}
    for dim in (-1, -2, -3, -5, 0):
        out[f"sq{dim}"] = _shapes(lambda: SqueezeTransform(dim, in_keys=["x", "y"])(td.clone()))
    for dim in (-1, -2, -4, -6, 1):
        out[f"unsq{dim}"] = _shapes(lambda: UnsqueezeTransform(dim, in_keys=["x", "y"])(td.clone()))
    for dim in (1, 2, 5):
        out[f"sqpos{dim}"] = _shapes(lambda: SqueezeTransform(dim, in_keys=["x", "y"], allow_positive_dim=True)(td.clone()))
    out["batch_squeeze"] = _shapes(lambda: SqueezeTransform(-1, in_keys=["x"])(TensorDict({"x": torch.zeros(1)}, [1])))
    out["inv_sq"] = _shapes(lambda: SqueezeTransform(-1, in_keys_inv=["a"]).inv(TensorDict({"a": torch.zeros(4, 3)}, [4])))
    out["inv_unsq"] = _shapes(lambda: UnsqueezeTransform(-1, in_keys_inv=["a"]).inv(TensorDict({"a": torch.zeros(4, 3)}, [4])))
    return out


def scenario_squeeze_transforms_specs():
    out = {}
    for cls, dims in ((SqueezeTransform, (-1, -2, -3)), (UnsqueezeTransform, (-1, -3, -4))):
        for dim in dims:
            for shape in ((4, 3, 2), (4, 1), (4,)):
                t = cls(dim, in_keys=["x"])
                res = parity.attempt(lambda: t.transform_observation_spec(Composite(x=Unbounded(shape), shape=(4,))))
                out[f"{cls.__name__}{dim}{shape}"] = res if isinstance(res, Exception) else list(res["x"].shape)
    for cls, dim, shape in ((SqueezeTransform, 1, (4, 3, 1)), (SqueezeTransform, 1, (4, 1, 3)),
                            (UnsqueezeTransform, 1, (4, 3)), (UnsqueezeTransform, 0, (4, 3))):
        t = cls(dim, in_keys=["x"], allow_positive_dim=True)
        res = parity.attempt(lambda: t.transform_observation_spec(Composite(x=Unbounded(shape), shape=(4,))))
        out[f"pos{cls.__name__}{dim}{shape}"] = res if isinstance(res, Exception) else list(res["x"].shape)
    return out


# ------------------------------------------------------------------------------------ Composite options
def scenario_composite_names_and_dtype():
    def names(fn):
        res = parity.attempt(fn)
        return res if isinstance(res, Exception) else list(res)

    spec = lambda: Composite(a=Unbounded((3, 2)), shape=(3,), names=["t"])  # noqa: E731
    return [names(lambda: spec().names), sorted(spec().keys()), names(lambda: spec().zero().names),
            names(lambda: spec().expand(2, 3).names), names(lambda: spec()[0].names),
            names(lambda: spec().unsqueeze(0).names), names(lambda: spec().unsqueeze(-1).names),
            names(lambda: spec().clone().names), names(lambda: Composite(shape=(3,), names="t").names),
            names(lambda: Composite(shape=(3, 2), names=["b", None]).rand().names),
            names(lambda: spec().zero((5,)).names), names(lambda: spec().refine_names("u").names),
            names(lambda: Composite(a=Unbounded((3, 2)), shape=(3,), names=["b", "c"]).rand().names),
            parity.attempt(lambda: Composite(a=Unbounded((3, 2)), shape=(3,), dtype=torch.float64)),
            parity.attempt(lambda: Composite(a=Unbounded((3, 2)), shape=(3,), dtype=None)),
            spec() == Composite(a=Unbounded((3, 2)), shape=(3,))]


def scenario_composite_reserved_entries():
    out = {}
    for key in ("dtype", "shape", "device", "space", "names", "domain", "lock"):
        c = Composite(shape=())
        res = parity.attempt(lambda: c.__setitem__(key, Unbounded(1)))
        out[key] = res if isinstance(res, Exception) else sorted(c.keys())
    out["int"] = parity.attempt(lambda: Composite(a=3))
    out["lock_kw"] = parity.attempt(lambda: Composite(shape=(3,), lock=True))
    return out


# ------------------------------------------------------------------------------------------- EnvBase
def scenario_envbase_keywords():
    class E(EnvBase):
        def __init__(self, **kw):
            super().__init__(**kw)

        def _reset(self, td):
            return None

        def _step(self, td):
            return None

        def _set_seed(self, seed):
            return None

    out = {}
    for name in ("action_spec", "observation_spec", "reward_spec", "done_spec", "state_spec"):
        out[name] = parity.attempt(lambda: E(**{name: Unbounded((1,))}))
    env = E(batch_size=[2], spec_locked=False, auto_reset=True)
    out["ok"] = [list(env.batch_size), env.is_spec_locked]
    return out


# ---------------------------------------------------------------------------------------------- networks
def scenario_conv_nets():
    from torchrl.modules import Conv3dNet, ConvNet

    out = []
    for cls, shape in ((ConvNet, (2, 3, 8, 8)), (Conv3dNet, (2, 3, 8, 8, 8))):
        attrs = lambda n: [n.depth, list(n.num_cells), list(n.kernel_sizes), n.out_features, n.aggregator_kwargs,  # noqa: E731
                           n.activation_kwargs, n.norm_kwargs, n.squeeze_output]
        net = cls()
        out += [repr(net), attrs(net), list(net(torch.randn(*shape)).shape), list(net(torch.randn(4, *shape)).shape),
                list(cls(in_features=3)(torch.randn(*shape)).shape)]
        out.append(repr(cls(num_cells=[8], norm_class=nn.Identity)))
        out.append(list(cls(in_features=3, num_cells=[4], kernel_sizes=8, aggregator_class=None, squeeze_output=True)(
            torch.randn(*shape)).shape))
        for kw in (dict(depth=2), dict(num_cells=4), dict(num_cells=4, kernel_sizes=[3, 3]), dict(depth=0),
                   dict(num_cells=[4, 5], kernel_sizes=[3, 3, 3]), dict(num_cells=[4, 5], depth=2, strides=[1, 1, 1]),
                   dict(paddings=[1, 1], num_cells=4, kernel_sizes=[3, 3, 3])):
            res = parity.attempt(lambda: cls(**kw))
            out.append(res if isinstance(res, Exception) else attrs(res))
        out.append(parity.attempt(lambda: cls()(torch.randn(*shape[2:]))))
        out.append(parity.attempt(lambda: cls(aggregator_class=None, num_cells=[4], squeeze_output=True)(torch.randn(*shape))))
    return out


def scenario_mlp_defaults():
    from torchrl.modules import MLP

    out = {}
    for i, kw in enumerate([dict(), dict(depth=2), dict(num_cells=8), dict(num_cells=[8, 9]), dict(depth=0),
                            dict(depth=-1), dict(depth=2, num_cells=[4, 5, 6])]):
        res = parity.attempt(lambda: MLP(in_features=3, out_features=2, **kw))
        out[i] = res if isinstance(res, Exception) else [repr(res), res.depth, list(res.num_cells)]
    return out


def scenario_multiagent_reprs():
    from torchrl.modules import MultiAgentConvNet, MultiAgentMLP

    out = []
    for kw in (dict(n_agent_inputs=3, n_agent_outputs=2, n_agents=4, centralized=False, share_params=False, depth=2,
                    num_cells=8),
               dict(n_agent_inputs=3, n_agent_outputs=2, n_agents=4, centralized=True, share_params=True),
               dict(n_agent_inputs=None, n_agent_outputs=2, n_agents=4, centralized=True, share_params=False, depth=1,
                    num_cells=5, activation_class=nn.Tanh)):
        m = MultiAgentMLP(**kw)
        before = repr(m)
        out += [before, list(m(torch.randn(5, 4, 3)).shape), repr(m)]
    conv = MultiAgentConvNet(n_agents=2, centralized=False, share_params=False, num_cells=[4], kernel_sizes=3)
    out += [repr(conv), list(conv(torch.randn(5, 2, 3, 8, 8)).shape), repr(conv)]
    return out


# ------------------------------------------------------------------------------------------------ gSDE
def scenario_gsde_module():
    from torchrl.envs.utils import ExplorationType, set_exploration_type
    from torchrl.modules.models.exploration import gSDEModule

    torch.manual_seed(0)
    m = gSDEModule(action_dim=2, state_dim=3)
    mu, state, eps = torch.zeros(4, 2), torch.randn(4, 3), torch.randn(4, 2, 3)
    out = [sorted(n for n, _ in m.named_parameters()), sorted(m.state_dict()), m.sigma_init, m.sigma]
    with set_exploration_type(ExplorationType.RANDOM):
        out.append(list(m(mu, state, eps)))
        torch.manual_seed(3)
        out.append(list(m(mu, state, torch.zeros(4, 1))))
        out.append(parity.attempt(lambda: m(mu, state, torch.zeros(1))))
    for mode in (ExplorationType.DETERMINISTIC, ExplorationType.MEAN):
        with set_exploration_type(mode):
            out.append(m(mu + 1, state, eps)[2])
    out.append(parity.attempt(lambda: m(mu, state, eps)))
    fixed = gSDEModule(2, 3, learn_sigma=False)
    out += [sorted(fixed.state_dict()), fixed.sigma, fixed.sigma_init, gSDEModule(2, 3, sigma_init=0.5).sigma_init]
    return out


def scenario_lazy_gsde_module():
    from torchrl.envs.utils import ExplorationType, set_exploration_type
    from torchrl.modules.models.exploration import LazygSDEModule

    torch.manual_seed(0)
    out = []
    for kw in (dict(), dict(sigma_init=0.3), dict(learn_sigma=False)):
        lz = LazygSDEModule(**kw)
        keys = sorted(lz.state_dict())
        with set_exploration_type(ExplorationType.RANDOM):
            res = lz(torch.zeros(2, 5, 2), torch.randn(2, 5, 3), torch.zeros(2, 5, 1))
        out.append([keys, type(lz).__name__, lz.sigma_init, lz.sigma, [list(r.shape) for r in res]])
    return out


def scenario_gsde_noise_transform():
    from torchrl.envs import PendulumEnv, TransformedEnv
    from torchrl.envs.transforms import gSDENoise

    out = []
    for kw in (dict(), dict(state_dim=3, action_dim=2), dict(shape=(2,)), dict(state_dim=3, action_dim=2, shape=(4,))):
        t = gSDENoise(**kw)
        out.append([t.primers, bool(t.random)])
    env = TransformedEnv(PendulumEnv(), gSDENoise())
    out.append(env.reset()["_eps_gSDE"])
    data = env.rollout(3)
    out += [data["_eps_gSDE"], data["next", "_eps_gSDE"], "_eps_gSDE" in env.state_spec.keys()]
    return out


# ----------------------------------------------------------------------------- split_trajectories
def scenario_split_trajectories_nested():
    from torchrl.collectors.utils import split_trajectories

    obs = torch.arange(8.0)
    traj = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    data = TensorDict({"traj": {"id": traj}, "obs": obs, "next": {"done": torch.zeros(8, 1, dtype=torch.bool),
                                                                   "obs": obs + 1}}, [8])
    done = torch.tensor([0, 0, 1, 0, 1, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
    agents = TensorDict({"obs": obs, "agents": {"x": obs}, "next": {"agents": {"done": done},
                                                                    "done": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
    return [split_trajectories(data.clone(), trajectory_key=("traj", "id")),
            split_trajectories(agents.clone(), done_key=("agents", "done")),
            split_trajectories(data.clone(), trajectory_key=("traj", "missing")),
            parity.attempt(lambda: split_trajectories(agents.clone(), done_key=("next", "agents", "done"))),
            parity.attempt(lambda: split_trajectories(TensorDict({"obs": obs}, [8]))),
            parity.attempt(lambda: split_trajectories(data.clone(), trajectory_key="traj"))]


# ------------------------------------------------------------------------------------------- MultiStep
def _ms_data(shape, done_at=(), reward_shape=(1,)):
    done = torch.zeros(*shape, 1, dtype=torch.bool)
    for idx in done_at:
        done[idx] = True
    n = 1
    for s in shape:
        n *= s
    obs = torch.arange(float(n)).view(*shape)
    reward = torch.arange(1.0, n + 1).view(*shape, *reward_shape)
    return TensorDict({"obs": obs, "next": {"obs": obs + 100, "reward": reward, "done": done, "terminated": done.clone(),
                                            "truncated": torch.zeros_like(done)}}, list(shape))


def _without_done_flags(td):
    return td.exclude(("next", "done"), ("next", "terminated"), ("next", "truncated"))


def scenario_multistep_values():
    from torchrl.data.postprocs import MultiStep

    cases = [(0.9, 3, (5,), [(2,)]), (0.9, 8, (5,), [(2,)]), (0.9, 6, (5,), []), (0.9, 2, (2, 4), [(0, 1), (1, 3)]),
             (0.9, 7, (2, 4), [(0, 1)]), (0.9, 1, (5,), [(2,)]), (0.9, 2, (1,), []), (0.9, 3, (3, 2, 4), [(0, 0, 1)])]
    out = [_without_done_flags(MultiStep(g, n)(_ms_data(s, d))) for g, n, s, d in cases]
    out.append(_without_done_flags(MultiStep(0.9, 2)(_ms_data((5,), [(2,)], reward_shape=()))))
    out.append(_without_done_flags(MultiStep(torch.tensor(0.9), 2)(_ms_data((5,), [(2,)]))))
    m = MultiStep(0.9, 3)
    out += [repr(m), m.done_key, list(m.done_keys), list(m.reward_keys), list(m.mask_key)]
    return out


def scenario_multistep_errors():
    from torchrl.data.postprocs import MultiStep

    return [parity.attempt(lambda: MultiStep(0.9, 0)), parity.attempt(lambda: MultiStep(1.5, 2)),
            parity.attempt(lambda: MultiStep(-0.1, 2)), parity.attempt(lambda: MultiStep(0.9, 2.5)),
            parity.attempt(lambda: MultiStep(0.9, 2)(_ms_data((5,), [(2,)]).exclude(("next", "done")))),
            parity.attempt(lambda: MultiStep(0.9, 2)(_ms_data((5,), [(2,)]).exclude(("next", "reward")))),
            parity.attempt(lambda: MultiStep(0.9, 2)(_ms_data((5,), [(2,)]).exclude("next")))]


def scenario_multistep_done_flags():
    """TorchRL keeps the done flags of step t under "next" (deliberately different here, see deliberate.json)."""
    from torchrl.data.postprocs import MultiStep

    out = MultiStep(0.9, 3)(_ms_data((5,), [(2,)]))
    return [out["next", "done"], out["next", "terminated"]]


# -------------------------------------------------------------------------------------- lazy getattr
def scenario_lazy_getattr():
    import torchrl
    import torchrl.data

    return [hasattr(torchrl, "surely_not_a_name"), hasattr(torchrl.data, "surely_not_a_name"),
            parity.attempt(lambda: torchrl.surely_not_a_name), parity.attempt(lambda: torchrl.data.surely_not_a_name),
            hasattr(torchrl, "envs"), hasattr(torchrl.data, "ReplayBuffer")]


def scenario_distributions_maps_keys():
    from torchrl.modules.distributions import distributions_maps

    return sorted(distributions_maps)
