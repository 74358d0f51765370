"""``PolicyAgeFilter``: drops stored transitions whose behaviour policy is too many versions old."""
from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._utils import logger as torchrl_logger
from torchrl.envs.transforms._transform import Transform

__all__ = ["PolicyAgeFilter"]


class PolicyAgeFilter(Transform):
    """Filters out elements produced by a behaviour policy that lags the live policy by too many updates.

    Each element carries the version of the policy that produced it at ``policy_version_key`` (stamped by
    the collector or inference service). An element is *stale* when
    ``current_version - stamped_version > max_policy_lag``; stale elements are dropped along the first
    batch dimension (an element whose version entry holds several values, e.g. a trajectory, is dropped
    when any of them is stale). The result may therefore hold fewer elements than the input.

    In a replay buffer the filter runs on both paths: on writes (``extend``, the inverse path) stale
    elements never enter the storage, and on reads (``sample``, the forward path) elements that became
    stale since they were written are dropped from the batch, which may then be smaller than the requested
    batch size. In an environment the transform does nothing: data flowing out of an env comes from the
    live policy. Data without a batch dimension passes through unchanged.

    Args:
        current_version: the live policy version: an ``int`` (fixed), or a callable returning it, called on
            every filtering pass (e.g. ``lambda: collector.policy_version``).
        max_policy_lag: the largest allowed ``current_version - stamped_version`` (non-negative).

    Keyword Args:
        policy_version_key: the entry holding the stamped version. Defaults to ``"policy_version"``.
        strict: if ``True``, data without ``policy_version_key`` raises ``KeyError``; otherwise (default)
            it passes through unfiltered, with a warning logged once.

    Raises:
        ValueError: a negative ``max_policy_lag``, or an integer ``current_version`` that is not a number.
        KeyError: with ``strict=True``, data without ``policy_version_key``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
        >>> from torchrl.envs.transforms import PolicyAgeFilter
        >>> version = [3]
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10),
        ...                   transform=PolicyAgeFilter(lambda: version[0], max_policy_lag=1))
        >>> data = TensorDict(obs=torch.arange(4.0), policy_version=torch.tensor([0, 2, 2, 3]), batch_size=[4])
        >>> _ = rb.extend(data)  # version 0 lags by 3 > 1: not stored
        >>> len(rb)
        3
        >>> version[0] = 4  # the two elements of version 2 are now stale too
        >>> rb.sample(8)["policy_version"].unique().tolist()
        [3]
    """

    def __init__(
        self,
        current_version: int | Callable[[], int],
        max_policy_lag: int,
        *,
        policy_version_key: NestedKey = "policy_version",
        strict: bool = False,
    ) -> None:
        super().__init__(in_keys=[], out_keys=[])
        if not callable(current_version):
            try:
                current_version = int(current_version)
            except (TypeError, ValueError) as err:
                raise ValueError(
                    f"PolicyAgeFilter: current_version must be an int or a callable returning one, "
                    f"got {current_version!r}."
                ) from err
        if max_policy_lag < 0:
            raise ValueError(f"PolicyAgeFilter: max_policy_lag must be non-negative, got {max_policy_lag}.")
        self.current_version = current_version
        self.max_policy_lag = max_policy_lag
        self.policy_version_key = policy_version_key if isinstance(policy_version_key, str) else tuple(
            policy_version_key
        )
        self.strict = bool(strict)
        self._warned = False

    def _current(self) -> int:
        version = self.current_version
        return version() if callable(version) else version

    def _filter(self, tensordict: TensorDictBase) -> TensorDictBase:
        stamped = tensordict.get(self.policy_version_key, None)
        if stamped is None:
            if self.strict:
                raise KeyError(
                    f"PolicyAgeFilter: key {self.policy_version_key!r} not found in the data (strict=True). Check "
                    f"that the producer stamps policy versions under that key, or pass strict=False to let "
                    f"unstamped data through."
                )
            if not self._warned:
                self._warned = True
                torchrl_logger.warning(
                    f"PolicyAgeFilter: no {self.policy_version_key!r} entry in the data; it passes through "
                    f"unfiltered. Check that the producer stamps versions under policy_version_key."
                )
            return tensordict
        if tensordict.batch_dims == 0:
            return tensordict
        stamped = torch.as_tensor(stamped)
        current = torch.as_tensor(self._current(), device=stamped.device)
        stale = (current - stamped) > self.max_policy_lag
        stale = stale.reshape(stale.shape[0], -1).any(-1)
        if not stale.any():
            return tensordict
        return tensordict[~stale]

    # buffers: forward on samples, inverse on writes
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._filter(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._filter(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._chain()[0] is not None:  # inside an env: the live policy made this data
            return tensordict
        return self._filter(tensordict)

    # envs: a no-op
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def __repr__(self) -> str:
        version = "<callable>" if callable(self.current_version) else self.current_version
        return (
            f"PolicyAgeFilter(current_version={version}, max_policy_lag={self.max_policy_lag}, "
            f"policy_version_key={self.policy_version_key!r}, strict={self.strict})"
        )
