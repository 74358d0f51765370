"""``NoopResetEnv``: takes a random number of random steps after every reset (Atari-style start diversity)."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.envs.transforms._transform import Transform

__all__ = ["NoopResetEnv"]

_MAX_TRIALS = 10


class NoopResetEnv(Transform):
    """After each reset, runs a number of random actions so that episodes start from varied states.

    The steps go through this transform's ``parent`` (the base env plus the transforms before this one),
    so those transforms see them; usually this transform comes first. If an episode ends during the
    no-op steps the env is reset and the no-ops start over; after 10 such trials a ``RuntimeError`` is
    raised (lower ``noops``).

    Batched envs: on a full reset all sub-environments take the same number of random steps. On a partial
    reset only the reset sub-environments step, which requires an env that accepts a sub-batch
    (``batch_locked=False``); batch-locked envs raise ``RuntimeError`` on partial resets.

    Args:
        noops: the (maximum) number of random steps after each reset.
        random: when True the number is drawn uniformly from ``0 .. noops - 1`` (torch's global RNG) at
            every reset; when False it is always ``noops``.

    Examples:
        >>> import torch
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms._noop_reset_env import NoopResetEnv
        >>> env = TransformedEnv(PendulumEnv(), StepCounter())
        >>> env = env.insert_transform(0, NoopResetEnv(noops=4, random=False))
        >>> env.reset()["step_count"].item()  # StepCounter comes after: the no-ops are not counted
        0
    """

    def __init__(self, noops: int = 30, random: bool = True) -> None:
        if not isinstance(noops, int) or isinstance(noops, bool) or noops < 0:
            raise ValueError(f"NoopResetEnv: noops must be a non-negative integer, got {noops!r}.")
        super().__init__()
        self.noops = noops
        self.random = bool(random)

    @property
    def base_env(self):
        """The env the random steps are taken in (this transform's ``parent``)."""
        return self.parent

    def _count(self) -> int:
        if not self.random:
            return self.noops
        # as TorchRL: uniform over 0 .. noops - 1
        return int(torch.randint(0, self.noops, ())) if self.noops > 0 else 0

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        noops = self._count()
        if noops == 0:
            return tensordict_reset
        parent = self.parent
        if parent is None:
            raise RuntimeError("NoopResetEnv must be used inside a TransformedEnv.")
        mask = self._sub_env_mask(parent, tensordict, tensordict_reset.batch_size)
        if mask is None:
            return self._noop(parent, tensordict_reset, noops, parent.rand_action)
        if parent.batch_locked:
            raise RuntimeError(
                f"NoopResetEnv: partial reset of a batch-locked env ({type(parent.base_env).__name__}, batch_size="
                f"{tuple(parent.batch_size)}): the no-op steps would also advance the sub-environments that are not "
                f"being reset. Reset all sub-environments at once, or drop NoopResetEnv for this env."
            )
        spec = parent.full_action_spec

        def sample(td: TensorDictBase) -> TensorDictBase:
            return td.update(spec.rand()[mask])

        sub = self._noop(parent, tensordict_reset[mask], noops, sample)
        out = tensordict_reset.clone(False)
        out[mask] = sub.select(*out.keys(True, True), strict=False)
        return out

    @staticmethod
    def _sub_env_mask(parent, tensordict: TensorDictBase | None, batch: torch.Size) -> torch.Tensor | None:
        """Which sub-environments (batch-shaped bool) are being reset; ``None`` when all of them are."""
        if tensordict is None or not batch:
            return None
        mask = None
        for reset_key in parent.reset_keys:
            value = tensordict.get(reset_key, None)
            if value is None:
                continue
            value = value.reshape(*batch, -1).any(-1)
            mask = value if mask is None else mask | value
        if mask is None or bool(mask.all()):
            return None
        return mask

    def _noop(self, parent, tensordict: TensorDictBase, noops: int, sample) -> TensorDictBase:
        done_keys = [g.done for g in parent.done_structure.groups if g.done is not None]
        td = tensordict
        for _ in range(_MAX_TRIALS):
            for _ in range(noops):
                td = parent.step(sample(td))
                ended = any(bool(td.get(("next",) + _tuple(k)).any()) for k in done_keys)
                td = parent.step_mdp(td)
                if ended:
                    break
            else:
                return td.exclude(*parent.action_keys)  # the reset output holds no action
            td = parent.reset(td.exclude(*parent.done_keys))
        raise RuntimeError(
            f"NoopResetEnv: the env reached a done state during the {noops} random steps after reset in "
            f"{_MAX_TRIALS} successive trials; use a smaller noops (currently {self.noops})."
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("NoopResetEnv acts at environment resets; it cannot be applied to stored data.")

    def __repr__(self) -> str:
        return f"NoopResetEnv(noops={self.noops}, random={self.random})"


def _tuple(key) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)
