"""Exploration modules: epsilon-greedy, additive Gaussian noise and Ornstein-Uhlenbeck noise.

Each module follows a policy in a ``TensorDictSequential`` and perturbs its action when the exploration
type is ``RANDOM`` or unset (``set_exploration_type(DETERMINISTIC)`` or ``MODE``/``MEAN`` turn it off).
The exploration factor anneals linearly with :meth:`step` (call it in the training loop, once per batch
of ``frames``). The pre-0.4 wrapper classes (``EGreedyWrapper``, ...) still work: they wrap a policy and
apply the matching module after it, with a one-time deprecation warning.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModuleBase, TensorDictModuleWrapper, interaction_type
from tensordict.utils import NestedKey, unravel_key
from torch import nn

from torchrl._utils._deprecation import warn_once
from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, TensorSpec

__all__ = [
    "AdditiveGaussianModule",
    "AdditiveGaussianWrapper",
    "EGreedyModule",
    "EGreedyWrapper",
    "OrnsteinUhlenbeckProcessModule",
    "OrnsteinUhlenbeckProcessWrapper",
    "set_exploration_modules_spec_from_env",
]

_EXPLORING = (InteractionType.RANDOM, None)


def _explores() -> bool:
    return interaction_type() in _EXPLORING


def _expand_right(cond: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if cond.ndim < like.ndim:
        cond = cond.reshape(*cond.shape, *([1] * (like.ndim - cond.ndim)))
    return cond.expand_as(like)


class _ExplorationBase(TensorDictModuleBase):
    """Spec handling (a leaf spec picked by ``action_key``) and linear annealing shared by the modules."""

    def _init_keys(self, action_key: NestedKey, extra_in: list[NestedKey], extra_out: list[NestedKey]) -> None:
        self.action_key = unravel_key(action_key)
        self.in_keys = [self.action_key, *extra_in]
        self.out_keys = [self.action_key, *extra_out]

    @property
    def spec(self) -> TensorSpec | None:
        """The action spec (the leaf at ``action_key`` when a Composite was given)."""
        return self._spec

    _spec = None  # the action spec (see spec)
    _device = None  # the device the spec is moved to
    _keeps_composite_without_action = False  # OU (as in TorchRL): a Composite without the key is kept as is

    @spec.setter
    def spec(self, spec: TensorSpec | None) -> None:
        if isinstance(spec, Composite):
            leaf = spec.get(self.action_key, None)
            if leaf is None and self._keeps_composite_without_action:
                leaf = spec  # nothing to project onto: the noisy action is written unprojected
            if leaf is None:
                raise KeyError(
                    f"{type(self).__name__}: action key {self.action_key!r} not found in the Composite spec; "
                    f"keys: {list(spec.keys(True, True))}."
                )
            spec = leaf
        elif spec is not None and not isinstance(spec, TensorSpec):
            raise TypeError(f"{type(self).__name__}: spec must be a TensorSpec, got {type(spec).__name__}.")
        device = self._device
        if spec is not None and device is not None:
            spec = spec.to(device)
        self._spec = spec

    def _anneal(self, name: str, init_name: str, end_name: str, frames: int) -> None:
        value, init, end = getattr(self, name), getattr(self, init_name), getattr(self, end_name)
        delta = frames * (init - end) / self.annealing_num_steps
        if float(init) >= float(end):
            value.copy_(torch.maximum(end, value - delta))
        else:
            value.copy_(torch.minimum(end, value - delta))

    def _parent(self, tensordict: TensorDictBase) -> TensorDictBase:
        key = self.action_key
        if isinstance(key, tuple) and len(key) > 1:
            return tensordict.get(key[:-1])
        return tensordict

    def _action(self, tensordict: TensorDictBase) -> torch.Tensor:
        action = fast_get(tensordict, self.action_key)
        if action is None:
            raise KeyError(
                f"{type(self).__name__}: action {self.action_key!r} not found in the input; place this module after "
                f"the policy (TensorDictSequential(policy, module)). Keys: {list(tensordict.keys(True, True))}."
            )
        return action


class EGreedyModule(_ExplorationBase):
    """Epsilon-greedy exploration: each action is replaced by a random one with probability ``eps``.

    ``eps`` goes linearly from ``eps_init`` to ``eps_end`` over ``annealing_num_steps`` frames of
    :meth:`step`. Random actions respect an action mask when ``action_mask_key`` is set.

    Args:
        spec (TensorSpec): the action spec random actions are drawn from (a Composite is indexed by
            ``action_key``). May be ``None`` until :func:`set_exploration_modules_spec_from_env` fills it.
        eps_init (float, optional): initial epsilon. Defaults to ``1.0``.
        eps_end (float, optional): final epsilon. Defaults to ``0.1``.
        annealing_num_steps (int, optional): frames to go from ``eps_init`` to ``eps_end``. Defaults to 1000.

    Keyword Args:
        action_key (NestedKey, optional): defaults to ``"action"``.
        action_mask_key (NestedKey, optional): a boolean mask of allowed actions.
        device (torch.device, optional): where the buffers live.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Categorical
        >>> from torchrl.modules import EGreedyModule
        >>> explore = EGreedyModule(Categorical(4), eps_init=1.0, eps_end=0.0, annealing_num_steps=10)
        >>> explore.step(5)
        >>> float(explore.eps)
        0.5
        >>> mask = torch.tensor([False, False, True, False]).expand(8, 4)
        >>> explore = EGreedyModule(Categorical(4), eps_init=1.0, action_mask_key="mask")
        >>> explore(TensorDict(action=torch.zeros(8, dtype=torch.long), mask=mask, batch_size=[8]))["action"]
        tensor([2, 2, 2, 2, 2, 2, 2, 2])
    """

    def __init__(
        self,
        spec: TensorSpec,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        *,
        action_key: NestedKey | None = "action",
        action_mask_key: NestedKey | None = None,
        device: torch.device | None = None,
    ) -> None:
        super().__init__()
        if annealing_num_steps <= 0:
            raise ValueError(f"EGreedyModule: annealing_num_steps must be positive, got {annealing_num_steps}.")
        self._init_keys("action" if action_key is None else action_key, [action_mask_key] if action_mask_key else [], [])
        self.action_mask_key = unravel_key(action_mask_key) if action_mask_key is not None else None
        self._device = torch.device(device) if device is not None else None
        self.register_buffer("eps_init", torch.tensor(float(eps_init), device=device))
        self.register_buffer("eps_end", torch.tensor(float(eps_end), device=device))
        self.register_buffer("eps", torch.tensor(float(eps_init), device=device))
        self.annealing_num_steps = int(annealing_num_steps)
        self.spec = spec

    def step(self, frames: int = 1) -> None:
        """Anneals ``eps`` by ``frames`` steps (never past ``eps_end``)."""
        self._anneal("eps", "eps_init", "eps_end", frames)

    def _random_action(self, action: torch.Tensor, tensordict: TensorDictBase) -> torch.Tensor:
        spec = self.spec
        if spec is None:
            raise RuntimeError(
                "EGreedyModule: no action spec to draw random actions from; pass spec=env.action_spec or call "
                "set_exploration_modules_spec_from_env(policy, env)."
            )
        if self.action_mask_key is None:
            if spec.shape == action.shape:
                return spec.rand()
            return spec.rand(action.shape[: action.ndim - spec.ndim])
        mask = fast_get(tensordict, self.action_mask_key)
        if mask is None:
            raise KeyError(f"EGreedyModule: action mask {self.action_mask_key!r} not found in the input.")
        mask = mask.bool()
        if type(spec) is Categorical or type(spec) is OneHot:
            n = mask.shape[-1]
            idx = torch.multinomial(mask.reshape(-1, n).float(), 1).reshape(mask.shape[:-1])
            if type(spec) is OneHot:
                return torch.zeros_like(mask, dtype=action.dtype).scatter_(-1, idx.unsqueeze(-1), 1)
            return idx.to(action.dtype)
        if isinstance(spec, (MultiCategorical, MultiOneHot)):
            expanded = spec.expand(*action.shape[: action.ndim - spec.ndim], *spec.shape).clone()
            expanded.update_mask(mask)
            return expanded.rand()
        raise TypeError(f"EGreedyModule: action masks need a categorical or one-hot spec, got {type(spec).__name__}.")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _explores():
            return tensordict
        action = self._action(tensordict)
        batch = self._parent(tensordict).batch_size
        cond = torch.rand(batch, device=action.device) < self.eps
        random = self._random_action(action, tensordict)
        fast_set(tensordict, self.action_key, torch.where(_expand_right(cond, action), random.to(action.device), action))
        return tensordict


class AdditiveGaussianModule(_ExplorationBase):
    """Adds ``sigma * N(mean, std)`` noise to the action; ``sigma`` anneals from ``sigma_init`` to ``sigma_end``.

    Args:
        spec (TensorSpec, optional): the action spec; it must be set (here, through the ``spec`` property or
            :func:`set_exploration_modules_spec_from_env`) before the module adds noise.
        sigma_init (float, optional): initial noise scale. Defaults to ``1.0``.
        sigma_end (float, optional): final noise scale. Defaults to ``0.1``.
        annealing_num_steps (int, optional): frames to go from ``sigma_init`` to ``sigma_end``.
        mean (float, optional): mean of the noise. Defaults to ``0.0``.
        std (float, optional): standard deviation of the noise. Defaults to ``1.0``.

    Keyword Args:
        action_key (NestedKey, optional): defaults to ``"action"``.
        safe (bool, optional): kept for TorchRL compatibility: the noisy action is projected onto the spec
            either way (as TorchRL does). Defaults to ``False``.
        device (torch.device, optional): where the buffers live.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.modules import AdditiveGaussianModule
        >>> noise = AdditiveGaussianModule(Bounded(-1.0, 1.0, (2,)), sigma_init=10.0, safe=True)
        >>> action = noise(TensorDict(action=torch.zeros(100, 2), batch_size=[100]))["action"]
        >>> bool(action.abs().max() <= 1.0), bool(action.std() > 0.5)
        (True, True)
    """

    def __init__(
        self,
        spec: TensorSpec | None = None,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        mean: float = 0.0,
        std: float = 1.0,
        *,
        action_key: NestedKey | None = "action",
        safe: bool = False,
        device: torch.device | None = None,
    ) -> None:
        super().__init__()
        if annealing_num_steps <= 0:
            raise ValueError(f"AdditiveGaussianModule: annealing_num_steps must be positive, got {annealing_num_steps}.")
        self._init_keys("action" if action_key is None else action_key, [], [])
        self._device = torch.device(device) if device is not None else None
        self.register_buffer("sigma_init", torch.tensor(float(sigma_init), device=device))
        self.register_buffer("sigma_end", torch.tensor(float(sigma_end), device=device))
        self.register_buffer("sigma", torch.tensor(float(sigma_init), device=device))
        self.annealing_num_steps = int(annealing_num_steps)
        self.mean = float(mean)
        self.std = float(std)
        self.safe = bool(safe)
        self.spec = spec

    def step(self, frames: int = 1) -> None:
        """Anneals ``sigma`` by ``frames`` steps (never past ``sigma_end``)."""
        self._anneal("sigma", "sigma_init", "sigma_end", frames)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _explores():
            return tensordict
        if self.spec is None:
            raise RuntimeError(
                "AdditiveGaussianModule: spec has not been set. Pass spec at construction, set it through the "
                "`spec` property, or call set_exploration_modules_spec_from_env(policy, env) before calling it."
            )
        action = self._action(tensordict)
        noise = torch.randn_like(action) * self.std + self.mean
        action = action + noise * self.sigma.to(action.dtype)
        # the explored action is projected onto the spec (TorchRL does so whatever ``safe``)
        action = self.spec.project(action)
        fast_set(tensordict, self.action_key, action)
        return tensordict


class OrnsteinUhlenbeckProcessModule(_ExplorationBase):
    r"""Ornstein-Uhlenbeck noise added to the action, with per-environment noise state in the data.

    :math:`x_{t+1} = x_t + \theta(\mu - x_t)dt + \sigma_t\sqrt{dt}\,\epsilon`, with :math:`\sigma_t`
    decreasing linearly from ``sigma`` to ``sigma_min`` over ``n_steps_annealing`` calls (constant when
    ``sigma_min`` is None); the action receives ``eps * x``, ``eps`` annealing from ``eps_init`` to
    ``eps_end`` with :meth:`step`.

    The noise and its step count are stored in the TensorDict (``"_ou_prev_noise"``, ``"_ou_steps"``), so
    each sub-environment carries its own process through ``step_mdp``; the process restarts where
    ``is_init_key`` is True (add :class:`~torchrl.envs.InitTracker` to the env, or build the env with
    ``policy=...``). Without ``is_init`` the noise never restarts: the module warns once.

    Args:
        spec (TensorSpec): the action spec.
        eps_init, eps_end, annealing_num_steps: the noise weight schedule (see :meth:`step`).
        theta, mu, sigma, dt: the process parameters.
        x0 (tensor or array, optional): the initial noise (default zeros).
        sigma_min (float, optional): the final ``sigma`` (None: no annealing of ``sigma``).
        n_steps_annealing (int, optional): calls over which ``sigma`` anneals.

    Keyword Args:
        action_key (NestedKey, optional): defaults to ``"action"``.
        is_init_key (NestedKey, optional): the episode-start flag. Defaults to ``"is_init"``.
        safe (bool, optional): project the noisy action into the spec. Defaults to ``True``.
        device (torch.device, optional): where the buffers live.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.modules import OrnsteinUhlenbeckProcessModule
        >>> ou = OrnsteinUhlenbeckProcessModule(Bounded(-1.0, 1.0, (2,)))
        >>> td = ou(TensorDict(action=torch.zeros(3, 2), is_init=torch.ones(3, 1, dtype=torch.bool), batch_size=[3]))
        >>> td["_ou_steps"].tolist()
        [1, 1, 1]
    """

    noise_key = "_ou_prev_noise"
    steps_key = "_ou_steps"
    _keeps_composite_without_action = True

    def __init__(
        self,
        spec: TensorSpec,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        theta: float = 0.15,
        mu: float = 0.0,
        sigma: float = 0.2,
        dt: float = 1e-2,
        x0: torch.Tensor | np.ndarray | None = None,
        sigma_min: float | None = None,
        n_steps_annealing: int = 1000,
        *,
        action_key: NestedKey = "action",
        is_init_key: NestedKey = "is_init",
        safe: bool = True,
        device: torch.device | None = None,
    ) -> None:
        super().__init__()
        if annealing_num_steps <= 0 or n_steps_annealing <= 0:
            raise ValueError("OrnsteinUhlenbeckProcessModule: annealing_num_steps and n_steps_annealing must be positive.")
        self.is_init_key = unravel_key(is_init_key)
        # TorchRL lists the action only as input (the episode-start flag is read when present)
        self._init_keys(action_key, [], [self.noise_key, self.steps_key])
        self._device = torch.device(device) if device is not None else None
        self.register_buffer("eps_init", torch.tensor(float(eps_init), device=device))
        self.register_buffer("eps_end", torch.tensor(float(eps_end), device=device))
        self.register_buffer("eps", torch.tensor(float(eps_init), device=device))
        self.annealing_num_steps = int(annealing_num_steps)
        self.theta, self.mu, self.sigma, self.dt = float(theta), float(mu), float(sigma), float(dt)
        self.sigma_min = None if sigma_min is None else float(sigma_min)
        self.n_steps_annealing = int(n_steps_annealing)
        self.register_buffer("x0", None if x0 is None else torch.as_tensor(x0, dtype=torch.get_default_dtype(), device=device))
        self.safe = bool(safe)
        self.spec = spec

    def step(self, frames: int = 1) -> None:
        """Anneals ``eps`` by ``frames`` steps (never past ``eps_end``)."""
        self._anneal("eps", "eps_init", "eps_end", frames)

    def _current_sigma(self, n_steps: torch.Tensor) -> torch.Tensor:
        if self.sigma_min is None:
            return torch.full_like(n_steps, self.sigma, dtype=torch.get_default_dtype())
        slope = -(self.sigma - self.sigma_min) / self.n_steps_annealing
        return (slope * n_steps + self.sigma).clamp_min(self.sigma_min)

    def _state(self, tensordict: TensorDictBase, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parent = self._parent(tensordict)
        noise = fast_get(parent, self.noise_key)
        steps = fast_get(parent, self.steps_key)
        x0 = self.x0.to(action) if self.x0 is not None else None
        if noise is None or steps is None:
            noise = torch.zeros_like(action) if x0 is None else x0.expand_as(action).clone()
            steps = torch.zeros(parent.batch_size, dtype=torch.long, device=action.device)  # [*B], as TorchRL
            return noise, steps
        is_init = fast_get(tensordict, self.is_init_key)
        if is_init is None:
            warn_once(
                f"OrnsteinUhlenbeckProcessModule: the input has noise state but no {self.is_init_key!r} entry, so "
                f"the noise never restarts at episode starts. Add InitTracker() to the env "
                f"(env.append_transform(InitTracker())) or build the env with policy=...",
                category=UserWarning,
            )
            return noise, steps
        is_init = is_init.reshape(*parent.batch_size, -1).any(-1)
        if is_init.any():
            fresh = torch.zeros_like(noise) if x0 is None else x0.expand_as(noise)
            noise = torch.where(_expand_right(is_init, noise), fresh, noise)
            steps = torch.where(_expand_right(is_init, steps), torch.zeros_like(steps), steps)
        return noise, steps

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not _explores():
            return tensordict
        action = self._action(tensordict)
        prev, steps = self._state(tensordict, action)
        sigma = _expand_right(self._current_sigma(steps), prev).to(prev.dtype)
        noise = prev + self.theta * (self.mu - prev) * self.dt + sigma * math.sqrt(self.dt) * torch.randn_like(prev)
        new_action = action + self.eps.to(action.dtype) * noise
        if self.safe and self.spec is not None and not isinstance(self.spec, Composite):
            new_action = self.spec.project(new_action)
        parent = self._parent(tensordict)
        fast_set(parent, self.noise_key, noise)
        fast_set(parent, self.steps_key, steps + 1)
        fast_set(tensordict, self.action_key, new_action)
        return tensordict


def set_exploration_modules_spec_from_env(policy: nn.Module, env) -> None:
    """Gives every exploration module of ``policy`` that has no spec the env's action spec.

    Examples:
        >>> from tensordict.nn import TensorDictSequential
        >>> from torchrl.envs import PendulumEnv
        >>> from torchrl.modules import AdditiveGaussianModule, set_exploration_modules_spec_from_env
        >>> noise = AdditiveGaussianModule()
        >>> set_exploration_modules_spec_from_env(TensorDictSequential(noise), PendulumEnv())
        >>> noise.spec.shape
        torch.Size([1])
    """
    action_spec = env.full_action_spec
    for module in policy.modules():
        if isinstance(module, _ExplorationBase) and module.spec is None:
            module.spec = action_spec


# -- deprecated wrappers ------------------------------------------------------------------------------------
def _policy_spec(policy, action_key: NestedKey) -> TensorSpec | None:
    spec = getattr(policy, "spec", None)
    if isinstance(spec, Composite):
        return spec.get(action_key, None)
    return spec


class _ExplorationWrapper(TensorDictModuleWrapper):
    """Runs ``policy`` then an exploration module; attribute reads fall back to the module."""

    def _setup(self, old: str, new: str, module: _ExplorationBase) -> None:
        warn_once(f"{old} is deprecated; use TensorDictSequential(policy, {new}(...)) instead.")
        self.exploration_module = module

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.exploration_module(self.td_module(tensordict))

    def step(self, frames: int = 1) -> None:
        self.exploration_module.step(frames)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules", {})
            if "exploration_module" in modules:
                return getattr(modules["exploration_module"], name)
            raise


class EGreedyWrapper(_ExplorationWrapper):
    """Deprecated: ``policy`` followed by an :class:`EGreedyModule` (see there for the arguments).

    Examples:
        >>> import torch, warnings
        >>> from tensordict import TensorDict
        >>> from torchrl.data import OneHot
        >>> from torchrl.modules import EGreedyWrapper, QValueActor
        >>> policy = QValueActor(torch.nn.Linear(4, 3), spec=OneHot(3))
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     explore = EGreedyWrapper(policy, eps_init=0.5)
        >>> explore(TensorDict(observation=torch.randn(4)))["action"].sum().item()
        1
    """

    def __init__(
        self,
        policy: TensorDictModuleBase,
        *,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        action_key: NestedKey | None = "action",
        action_mask_key: NestedKey | None = None,
        spec: TensorSpec | None = None,
    ) -> None:
        super().__init__(policy)
        action_key = "action" if action_key is None else action_key
        spec = spec if spec is not None else _policy_spec(policy, action_key)
        module = EGreedyModule(spec, eps_init, eps_end, annealing_num_steps, action_key=action_key, action_mask_key=action_mask_key)
        self._setup("EGreedyWrapper", "EGreedyModule", module)


class AdditiveGaussianWrapper(_ExplorationWrapper):
    """Deprecated: ``policy`` followed by an :class:`AdditiveGaussianModule` (see there for the arguments).

    Examples:
        >>> import torch, warnings
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Unbounded
        >>> from torchrl.modules import Actor, AdditiveGaussianWrapper
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     explore = AdditiveGaussianWrapper(Actor(torch.nn.Linear(3, 2), spec=Unbounded(2)), safe=False)
        >>> explore(TensorDict(observation=torch.randn(3)))["action"].shape
        torch.Size([2])
    """

    def __init__(
        self,
        policy: TensorDictModuleBase,
        *,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        mean: float = 0.0,
        std: float = 1.0,
        action_key: NestedKey | None = "action",
        spec: TensorSpec | None = None,
        safe: bool | None = True,
        device: torch.device | None = None,
    ) -> None:
        super().__init__(policy)
        action_key = "action" if action_key is None else action_key
        spec = spec if spec is not None else _policy_spec(policy, action_key)
        safe = bool(safe) and spec is not None
        module = AdditiveGaussianModule(
            spec, sigma_init, sigma_end, annealing_num_steps, mean, std, action_key=action_key, safe=safe, device=device
        )
        self._setup("AdditiveGaussianWrapper", "AdditiveGaussianModule", module)


class OrnsteinUhlenbeckProcessWrapper(_ExplorationWrapper):
    """Deprecated: ``policy`` followed by an :class:`OrnsteinUhlenbeckProcessModule` (same arguments).

    Examples:
        >>> import torch, warnings
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.modules import Actor, OrnsteinUhlenbeckProcessWrapper
        >>> actor = Actor(torch.nn.Linear(3, 2), spec=Bounded(-1.0, 1.0, (2,)))
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     explore = OrnsteinUhlenbeckProcessWrapper(actor)
        >>> "_ou_prev_noise" in explore(TensorDict(observation=torch.randn(3)))
        True
    """

    def __init__(
        self,
        policy: TensorDictModuleBase,
        *,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        theta: float = 0.15,
        mu: float = 0.0,
        sigma: float = 0.2,
        dt: float = 1e-2,
        x0: torch.Tensor | np.ndarray | None = None,
        sigma_min: float | None = None,
        n_steps_annealing: int = 1000,
        action_key: NestedKey | None = "action",
        is_init_key: NestedKey | None = "is_init",
        spec: TensorSpec = None,
        safe: bool = True,
        key: NestedKey | None = None,
        device: torch.device | None = None,
    ) -> None:
        super().__init__(policy)
        if key is not None:
            warn_once("OrnsteinUhlenbeckProcessWrapper: the keyword 'key' is deprecated; use 'action_key' instead.")
            action_key = key
        action_key = "action" if action_key is None else action_key
        spec = spec if spec is not None else _policy_spec(policy, action_key)
        module = OrnsteinUhlenbeckProcessModule(
            spec, eps_init, eps_end, annealing_num_steps, theta, mu, sigma, dt, x0, sigma_min, n_steps_annealing,
            action_key=action_key, is_init_key="is_init" if is_init_key is None else is_init_key,
            safe=safe and spec is not None, device=device,
        )
        self._setup("OrnsteinUhlenbeckProcessWrapper", "OrnsteinUhlenbeckProcessModule", module)
