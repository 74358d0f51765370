"""``RNDTransform``: random network distillation, an intrinsic reward from a predictor's error on a frozen random net."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._groups import holder
from torchrl.envs.transforms._running_mean_std import RunningMeanStd
from torchrl.envs.transforms._transform import Transform

__all__ = ["RNDTransform"]


class RNDTransform(Transform):
    """Random Network Distillation: writes an exploration bonus, the predictor's error on a frozen random net.

    Burda et al., "Exploration by Random Network Distillation" (2018), https://arxiv.org/abs/1810.12894.
    After every env step (without gradients) the transform

    1. optionally standardizes the observation ``in_keys[0]`` with running statistics (a
       :class:`RunningMeanStd`, updated with it first) and clips it to ``[-obs_clip, obs_clip]``;
    2. feeds it to the frozen ``target_network`` and the trainable ``predictor_network``;
    3. writes the mean squared difference of their outputs, shape ``(*batch, 1)``, at ``out_keys[0]`` (a
       new reward entry); for an observation in a group (``("agents", "observation")``) the batch is the
       group's, so each agent gets its own bonus (wherever ``out_keys[0]`` is, as TorchRL);
    4. optionally divides that reward by the running standard deviation of the rewards it produced (no
       mean subtracted) and clips it to ``[-reward_clip, reward_clip]``.

    Observations seen often are predicted well, so their bonus shrinks as the predictor is trained (e.g.
    by an ``RNDLoss`` on the same normalized observations, :attr:`obs_rms`). The running statistics are
    created on the first step (their shape is the observation's) and travel in ``state_dict()`` as
    ``_obs_rms.*`` / ``_reward_rms.*``; loading such a state creates them. Outside an env (e.g. on
    replay-buffer samples) the transform reads ``in_keys[0]`` and writes ``out_keys[0]`` at the root.

    Args:
        target_network: the fixed random network; its parameters are frozen (``requires_grad=False``) here.
        predictor_network: the network trained to match the target's outputs.
        in_keys: the observation to read (only the first is used; default ``["observation"]``).
        out_keys: the intrinsic reward to write (default ``["intrinsic_reward"]``).
        normalize_obs: standardize observations with running statistics before the networks.
        normalize_reward: divide the intrinsic reward by its running standard deviation.
        obs_clip: bound of the standardized observations.
        reward_clip: bound of the normalized intrinsic reward.

    Raises:
        TypeError: a network is not an ``nn.Module``.
        ValueError: a clip bound is not positive.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import RNDTransform
        >>> target = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 16))
        >>> predictor = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 16))
        >>> env = TransformedEnv(PendulumEnv(seed=0), RNDTransform(target, predictor))
        >>> env.rollout(3)["next", "intrinsic_reward"].shape
        torch.Size([3, 1])
        >>> any(p.requires_grad for p in target.parameters())
        False
    """

    def __init__(
        self,
        target_network: nn.Module,
        predictor_network: nn.Module,
        in_keys: list[NestedKey] | None = None,
        out_keys: list[NestedKey] | None = None,
        normalize_obs: bool = True,
        normalize_reward: bool = True,
        obs_clip: float = 5.0,
        reward_clip: float = 5.0,
    ) -> None:
        super().__init__(
            in_keys=["observation"] if in_keys is None else in_keys,
            out_keys=["intrinsic_reward"] if out_keys is None else out_keys,
        )
        for name, net in (("target_network", target_network), ("predictor_network", predictor_network)):
            if not isinstance(net, nn.Module):
                raise TypeError(f"RNDTransform: {name} must be an nn.Module, got {type(net).__name__}.")
        if not self.in_keys or not self.out_keys:
            raise ValueError(f"RNDTransform: needs one in_key and one out_key, got {self.in_keys} and {self.out_keys}.")
        for name, bound in (("obs_clip", obs_clip), ("reward_clip", reward_clip)):
            if not bound > 0:
                raise ValueError(f"RNDTransform: {name} must be positive, got {bound}.")
        target_network.requires_grad_(False)
        self.target_network = target_network
        self.predictor_network = predictor_network
        self.normalize_obs = bool(normalize_obs)
        self.normalize_reward = bool(normalize_reward)
        self.obs_clip = float(obs_clip)
        self.reward_clip = float(reward_clip)
        self._obs_rms: RunningMeanStd | None = None
        self._reward_rms: RunningMeanStd | None = None
        self._bonus_batch: torch.Size | None = None  # the observation's group shape (None: the env's)

    @property
    def obs_rms(self) -> RunningMeanStd | None:
        """Running observation statistics (``None`` before the first step or when ``normalize_obs=False``)."""
        return self._obs_rms

    @property
    def reward_rms(self) -> RunningMeanStd | None:
        """Running intrinsic-reward statistics (``None`` before the first step or when ``normalize_reward=False``)."""
        return self._reward_rms

    @property
    def _in_group(self) -> tuple:
        """The key of the container of ``in_keys[0]`` (``()`` at the root)."""
        key = self.in_keys[0]
        return tuple(key[:-1]) if isinstance(key, tuple) else ()

    # -- data ---------------------------------------------------------------------------------------------
    def _intrinsic_reward(self, obs: torch.Tensor, batch_dims: int) -> torch.Tensor:
        """The (normalized, clipped) bonus of ``obs``, shape ``(*obs.shape[:batch_dims], 1)``; updates the statistics."""
        with torch.no_grad():
            x = obs if obs.is_floating_point() else obs.to(torch.get_default_dtype())
            if self.normalize_obs:
                rms = self._obs_rms
                if rms is None:
                    rms = self._obs_rms = RunningMeanStd(shape=x.shape[batch_dims:]).to(x.device)
                rms.update(x)
                x = rms.normalize(x).clamp_(-self.obs_clip, self.obs_clip)
            diff = self.predictor_network(x) - self.target_network(x)
            batch = x.shape[:batch_dims]
            reward = diff.pow(2).reshape(*batch, -1).mean(-1, keepdim=True)
            if self.normalize_reward:
                rms = self._reward_rms
                if rms is None:
                    rms = self._reward_rms = RunningMeanStd(shape=()).to(reward.device)
                rms.update(reward)
                reward = (reward / rms.var.sqrt().clamp_min(1e-4)).clamp_(-self.reward_clip, self.reward_clip)
        return reward

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        in_key = self.in_keys[0]
        obs = fast_get(next_tensordict, in_key)
        if obs is None:
            if self._missing_tolerance:
                return next_tensordict
            raise KeyError(
                f"RNDTransform: key {in_key!r} not found; available keys: "
                f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        # one bonus per entry of the observation's container: per agent when it sits in a group ("agents", ...)
        batch_dims = holder(next_tensordict, in_key).batch_dims
        fast_set(next_tensordict, self.out_keys[0], self._intrinsic_reward(obs, batch_dims))
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset  # a reset has no reward

    # -- state --------------------------------------------------------------------------------------------
    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # the statistics are created on the first step: create them now when the state holds them
        for name in ("_obs_rms", "_reward_rms"):
            mean = state_dict.get(f"{prefix}{name}.mean")
            if mean is not None and getattr(self, name) is None:
                setattr(self, name, RunningMeanStd(shape=mean.shape).to(mean.device))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    # -- specs --------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        observations, group = output_spec["full_observation_spec"], self._in_group
        self._bonus_batch = observations[group].shape if group and group in observations.keys(True) else None
        return super().transform_output_spec(output_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):
            raise TypeError(f"RNDTransform: expects the env's full reward spec (a Composite), got {type(reward_spec).__name__}.")
        param = next(self.predictor_network.parameters(), None)
        dtype = torch.get_default_dtype() if param is None or not param.is_floating_point() else param.dtype
        shape = self._bonus_batch or reward_spec.shape
        reward_spec[self.out_keys[0]] = Unbounded(shape=shape + (1,), dtype=dtype, device=reward_spec.device)
        return reward_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        key = self.in_keys[0]
        if isinstance(observation_spec, Composite) and key not in observation_spec:
            raise KeyError(
                f"RNDTransform: in_key {key!r} is not an observation of the env; observations: "
                f"{sorted(map(str, observation_spec.keys(include_nested=True, leaves_only=True)))}."
            )
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"RNDTransform(in_keys={self.in_keys}, out_keys={self.out_keys}, normalize_obs={self.normalize_obs}, "
            f"normalize_reward={self.normalize_reward})"
        )
