"""``MultiStepTransform``: n-step returns computed as trajectories are written to a replay buffer."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["MultiStepTransform", "n_step_transitions"]

_DEFAULT_DONE_KEYS = ("done", "truncated", "terminated")


def _next(key: NestedKey) -> tuple:
    return ("next",) + as_tuple(key)


def _original_key(key: NestedKey) -> NestedKey:
    """Where the one-step reward of ``("next", key)`` is kept: ``"original_<name>"`` next to it."""
    parts = as_tuple(key)
    return from_tuple(("next",) + parts[:-1] + (f"original_{parts[-1]}",))


def _gather_time(value: torch.Tensor, index: torch.Tensor, time_dim: int) -> torch.Tensor:
    """``value[..., index[..., t], ...]`` along ``time_dim`` (``index`` has the batch shape)."""
    index = index.reshape(*index.shape, *([1] * (value.ndim - index.ndim))).expand_as(value)
    return value.gather(time_dim, index)


def n_step_transitions(
    tensordict: TensorDictBase,
    gamma: float,
    n_steps: int,
    *,
    reward_keys: Sequence[NestedKey] = ("reward",),
    done_key: NestedKey = "done",
    mask_key: NestedKey | None = None,
) -> TensorDictBase:
    """The n-step version of a batch of transitions whose last batch dim is time.

    For every step ``t``, with ``k`` the number of steps until the episode ends (the first ``("next",
    done_key)`` at or after ``t``, inclusive) or the batch ends, capped at ``n_steps``:

    - each ``("next", reward_key)`` becomes :math:`\\sum_{i<k} \\gamma^i r_{t+i}` (the one-step reward is
      kept next to it as ``"original_<name>"``);
    - every other ``"next"`` entry (observations, done flags...) is taken from step ``t + k - 1``;
    - ``"steps_to_next_obs"`` holds ``k``, ``"gamma"`` holds :math:`\\gamma^k` (the discount of the bootstrap
      term), ``"nonterminal"`` is ``k > 1`` (and the ``mask_key`` entry, when the data has one).

    Returns a new TensorDict (the input is not modified).

    Raises:
        KeyError: ``("next", done_key)`` or a ``("next", reward_key)`` is missing.
    """
    if isinstance(tensordict, LazyStackedTensorDict):  # a rollout's lazy stack: gather on dense entries
        tensordict = tensordict.contiguous()
    time_dim = tensordict.ndim - 1
    length = tensordict.shape[time_dim]
    nxt = tensordict.get("next")
    done = nxt.get(done_key, None)
    if done is None:
        raise KeyError(f"MultiStepTransform: done entry {_next(done_key)} not found in the data.")
    done_flat = done.reshape(*tensordict.shape, -1).any(-1)
    positions = torch.arange(length, device=done.device).expand(tensordict.shape)
    done_at = torch.where(done_flat, positions, torch.full_like(positions, length))
    first_done = done_at.flip(time_dim).cummin(time_dim).values.flip(time_dim)
    steps = torch.minimum(first_done - positions + 1, length - positions).clamp_max(n_steps)
    last = positions + steps - 1
    new_next = nxt.apply(lambda value: _gather_time(value, last, time_dim))
    for key in reward_keys:
        reward = nxt.get(key, None)
        if reward is None:
            raise KeyError(f"MultiStepTransform: reward entry {_next(key)} not found in the data.")
        total = torch.zeros_like(reward)
        for i in range(min(n_steps, length)):  # a look-ahead past the batch adds nothing
            weight = (i < steps).narrow(time_dim, 0, length - i).to(reward.dtype) * gamma**i
            weight = weight.reshape(*weight.shape, *([1] * (reward.ndim - weight.ndim)))
            total.narrow(time_dim, 0, length - i).add_(reward.narrow(time_dim, i, length - i) * weight)
        new_next.set(key, total)
    out = tensordict.clone(False)
    out.set("next", new_next)
    for key in reward_keys:
        out.set(_original_key(key), nxt.get(key))
    nonterminal = steps > 1
    mask = tensordict.get(mask_key, None) if mask_key is not None else None
    if mask is not None:
        nonterminal = nonterminal & mask.reshape(*tensordict.shape, -1).all(-1)
    out.set("steps_to_next_obs", steps)
    out.set("gamma", gamma**steps)
    out.set("nonterminal", nonterminal)
    return out


class MultiStepTransform(Transform):
    """N-step transitions for replay buffers, computed as trajectories are written.

    The transform works as an inverse (it runs on :meth:`~torchrl.data.ReplayBuffer.extend`). It keeps
    the last ``n_steps`` frames of the data it was given; each ``extend`` joins them with the new frames
    along time (the last batch dim), writes the n-step version of all but the last ``n_steps`` frames and
    keeps those for the next call. The n-step windows therefore span ``extend`` calls (a collector's
    batches), unlike the :class:`~torchrl.data.postprocs.MultiStep` post-processing; they stop at the end
    of each episode (``("next", done_key)``). For each written step ``t`` with window length ``k``:

    - each ``("next", reward_key)`` holds :math:`\\sum_{i<k} \\gamma^i r_{t+i}`, the one-step reward being
      kept as ``("next", "original_reward")`` (``"original_<name>"`` next to a reward named otherwise);
    - the other ``"next"`` entries (observations, done flags) come from step ``t + k - 1``;
    - ``"steps_to_next_obs"`` is ``k``, ``"gamma"`` is :math:`\\gamma^k`, ``"nonterminal"`` is ``k > 1``
      (and the ``mask_key`` entry when the data has one).

    Sampled data pass through unchanged, and so does a collector's batch when the transform is used as a
    ``postproc`` (as in TorchRL; :class:`~torchrl.data.postprocs.MultiStep` is the post-processing version).
    The transform cannot be used in an environment: stepping one raises ``ValueError``.

    Args:
        n_steps (int): the window length (>= 1); it can be changed later through ``transform.n_steps``.
        gamma (float): the discount factor.

    Keyword Args:
        reward_keys (list of NestedKey): rewards under ``"next"`` to accumulate. Defaults to ``["reward"]``.
        done_key (NestedKey): the entry under ``"next"`` whose flags end the episodes (and the windows).
            Defaults to ``"done"``.
        done_keys (list of NestedKey): the done entries of the data, kept as an attribute for TorchRL's
            API (here all ``"next"`` entries but the rewards come from the window's last step). Defaults to
            ``["done", "truncated", "terminated"]``.
        mask_key (NestedKey): a root entry marking valid steps; masked steps get ``nonterminal=False``.
            Defaults to ``"mask"``.

    Raises:
        ValueError: ``n_steps`` is not a positive int; the data has no batch dim, or a batch shape (but
            time) different from the frames kept from the previous call; the transform is stepped in an env.
        KeyError: the data lacks ``("next", done_key)`` or a ``("next", reward_key)``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
        >>> from torchrl.envs.transforms import MultiStepTransform
        >>> done = torch.zeros(6, 1, dtype=torch.bool)
        >>> done[2] = True
        >>> data = TensorDict(obs=torch.arange(6.0), next=TensorDict(obs=torch.arange(1.0, 7.0),
        ...     reward=torch.ones(6, 1), done=done, batch_size=[6]), batch_size=[6])
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=MultiStepTransform(2, 0.5))
        >>> rb.extend(data)  # the last 2 frames wait for the next batch
        tensor([0, 1, 2, 3])
        >>> stored = rb[:4]
        >>> stored["next", "reward"].squeeze(-1).tolist(), stored["next", "obs"].tolist()
        ([1.5, 1.5, 1.0, 1.5], [2.0, 3.0, 3.0, 5.0])
        >>> stored["steps_to_next_obs"].tolist(), stored["gamma"].tolist()
        ([2, 2, 1, 2], [0.25, 0.25, 0.5, 0.25])
    """

    def __init__(
        self,
        n_steps,
        gamma,
        *,
        reward_keys: list[NestedKey] | None = None,
        done_key: NestedKey | None = None,
        done_keys: list[NestedKey] | None = None,
        mask_key: NestedKey | None = None,
    ) -> None:
        super().__init__()
        self.n_steps = n_steps
        self.gamma = gamma
        self._reward_keys = _key_list(reward_keys) or ["reward"]
        self._done_key = done_key if done_key is not None else "done"
        self._done_keys = _key_list(done_keys) or list(_DEFAULT_DONE_KEYS)
        self._mask_key = mask_key if mask_key is not None else "mask"
        self._held: TensorDictBase | None = None  # the last n_steps frames, waiting for their future

    # -- options ---------------------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        return self._n_steps

    @n_steps.setter
    def n_steps(self, value) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"MultiStepTransform: n_steps must be a strictly positive int, got {value!r}.")
        self._n_steps = value

    @property
    def reward_keys(self) -> list[NestedKey]:
        return self._reward_keys

    @property
    def done_key(self) -> NestedKey:
        return self._done_key

    @property
    def done_keys(self) -> list[NestedKey]:
        return self._done_keys

    @property
    def mask_key(self) -> NestedKey:
        return self._mask_key

    # -- data ------------------------------------------------------------------------------------------
    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.parent is not None:
            self._refuse_env()
        if tensordict.ndim == 0:
            raise ValueError(
                "MultiStepTransform: the data needs a time dimension (its last batch dim); got a TensorDict "
                "with batch_size=torch.Size([])."
            )
        held = self._held
        if held is not None:
            if held.shape[:-1] != tensordict.shape[:-1]:
                raise ValueError(
                    f"MultiStepTransform: the data has batch shape {tuple(tensordict.shape)} but the frames kept "
                    f"from the previous call have {tuple(held.shape)} (all dims but time must agree)."
                )
            tensordict = torch.cat([held, tensordict], dim=tensordict.ndim - 1)
        n = self._n_steps
        length = tensordict.shape[-1]
        if length <= n:  # no frame has its full window yet
            self._held = tensordict.clone()
            return tensordict[..., :0]
        out = n_step_transitions(
            tensordict, self.gamma, n, reward_keys=self._reward_keys, done_key=self._done_key,
            mask_key=self._mask_key,
        )
        self._held = tensordict[..., length - n:].clone()
        return out[..., : length - n]

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # sampled data are already n-step transitions

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_env()

    def _refuse_env(self):
        raise ValueError(
            "The MultiStepTransform is only an inverse transform and can be applied exclusively to replay "
            "buffers (ReplayBuffer(..., transform=MultiStepTransform(...))); it cannot run in an environment. "
            "Use torchrl.data.postprocs.MultiStep on collected batches instead."
        )

    def __repr__(self) -> str:
        return (
            f"MultiStepTransform(n_steps={self._n_steps}, gamma={self.gamma}, reward_keys={self._reward_keys}, "
            f"done_key={self._done_key!r})"
        )
