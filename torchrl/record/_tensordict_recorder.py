"""``TensorDictRecorder``: keeps every ``skip``-th step of a rollout and saves the stack to disk."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl.envs.transforms import Transform

__all__ = ["TensorDictRecorder"]


class TensorDictRecorder(Transform):
    """TensorDict recorder.

    Keeps a copy of the data of every ``skip``-th env step (the selected ``in_keys``, or everything) and,
    when :meth:`dump` is called, saves their stack with ``torch.save`` to
    ``<out_file_base>[_<suffix>]_<n>.pt`` (``n`` counts the dumps), then forgets them.

    Args:
        out_file_base: the path prefix of the files written.
        skip_reset: do not record the data returned by ``env.reset()``. Defaults to ``True``.
        skip: record one step out of ``skip``. Defaults to 4.
        in_keys: the entries to record (default: all).

    Examples:
        >>> import tempfile, torch
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.record import TensorDictRecorder
        >>> base = tempfile.mkdtemp() + "/rollout"
        >>> env = TransformedEnv(PendulumEnv(), TensorDictRecorder(base, skip=2, in_keys=["observation"]))
        >>> _ = env.rollout(6)
        >>> env.transform.dump()
        >>> torch.load(base + "_0.pt", weights_only=False)["observation"].shape
        torch.Size([3, 3])
    """

    def __init__(
        self, out_file_base: str, skip_reset: bool = True, skip: int = 4, in_keys: Sequence[str] | None = None
    ) -> None:
        if int(skip) < 1:
            raise ValueError(f"TensorDictRecorder: skip must be >= 1, got {skip}.")
        super().__init__(in_keys=in_keys)
        self.out_file_base = str(out_file_base)
        self.skip_reset = bool(skip_reset)
        self.skip = int(skip)
        self._select = None if in_keys is None else list(self.in_keys)
        self.count = 0
        self.iter = 0
        self.td: list[TensorDictBase] = []

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        if self.count % self.skip == 0:
            data = next_tensordict if self._select is None else next_tensordict.select(*self._select, strict=True)
            self.td.append(data.clone())
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if self.skip_reset:
            return tensordict_reset
        return self._call(tensordict_reset)

    def dump(self, suffix: str | None = None) -> None:
        """Saves the recorded steps (one stacked TensorDict) and clears them; no file when nothing was kept."""
        if not self.td:
            return
        try:
            data = torch.stack(self.td)
        except (RuntimeError, ValueError):  # different entries (e.g. a reset among steps)
            data = LazyStackedTensorDict.lazy_stack(self.td)
        name = self.out_file_base + (f"_{suffix}" if suffix else "") + f"_{self.iter}.pt"
        torch.save(data, name)
        self.iter += 1
        self.td = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(out_file_base={self.out_file_base!r}, skip={self.skip}, recorded={len(self.td)})"
