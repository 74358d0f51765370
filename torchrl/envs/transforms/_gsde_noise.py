"""``gSDENoise``: primes the gSDE exploration matrix ``"_eps_gSDE"`` at every reset."""
from __future__ import annotations

from collections.abc import Sequence

from torchrl.data.tensor_specs import Composite, Unbounded
from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer

__all__ = ["gSDENoise"]


class gSDENoise(TensorDictPrimer):  # noqa: N801 - TorchRL's public name
    """A :class:`TensorDictPrimer` for the exploration matrix of :class:`~torchrl.modules.models.exploration.gSDEModule`.

    At each reset it writes ``"_eps_gSDE"``: zeros of shape ``[*shape, 1]`` by default, which tell the gSDE
    module to draw a new ``[action_dim, state_dim]`` matrix at the first step of the episode; or, when both
    ``state_dim`` and ``action_dim`` are given, a standard normal matrix of shape
    ``[*shape, action_dim, state_dim]`` right away. Between resets the matrix is carried from step to step,
    so the noise of an episode is a fixed (linear) function of the state.

    Args:
        state_dim (int, optional): the state size of the gSDE module.
        action_dim (int, optional): the action size of the gSDE module.
        shape (sequence of int, optional): leading (batch) shape of the primed entry. Defaults to ``()``.
        **kwargs: forwarded to :class:`TensorDictPrimer` (``reset_key``, ``expand_specs``...).

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import gSDENoise
        >>> env = TransformedEnv(PendulumEnv(), gSDENoise())
        >>> env.reset()["_eps_gSDE"]
        tensor([0.])
        >>> TransformedEnv(PendulumEnv(), gSDENoise(state_dim=3, action_dim=1)).reset()["_eps_gSDE"].shape
        torch.Size([1, 3])
    """

    def __init__(
        self,
        state_dim: int | None = None,
        action_dim: int | None = None,
        shape: Sequence[int] | None = None,
        **kwargs,
    ) -> None:
        shape = tuple(shape) if shape is not None else ()
        random = state_dim is not None and action_dim is not None
        tail = (action_dim, state_dim) if random else (1,)
        primers = Composite(_eps_gSDE=Unbounded(shape=(*shape, *tail)), shape=shape)
        if random:
            super().__init__(primers=primers, random=True, **kwargs)
        else:
            super().__init__(primers=primers, default_value=0.0, **kwargs)
