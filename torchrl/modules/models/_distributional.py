"""``DistributionalDQNnet``: the log-softmax over atoms of a distributional Q-network's output."""
from __future__ import annotations

from tensordict.nn import dispatch, TensorDictModuleBase
from tensordict.utils import NestedKey

__all__ = ["DistributionalDQNnet"]


class DistributionalDQNnet(TensorDictModuleBase):
    """Replaces action values of shape ``[..., atoms, actions]`` by their log-softmax over the atoms (dim -2).

    Place it between a network that predicts per-atom action values and a distributional Q-value module.

    Keyword Args:
        in_keys (list of NestedKey, optional): entries to normalise. Defaults to ``["action_value"]``.
        out_keys (list of NestedKey, optional): where to write them. Defaults to ``in_keys``.

    Raises:
        ValueError: if ``in_keys`` and ``out_keys`` have different lengths.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules.models import DistributionalDQNnet
        >>> td = DistributionalDQNnet()(TensorDict(action_value=torch.randn(10, 51, 4), batch_size=[10]))
        >>> torch.allclose(td["action_value"].exp().sum(-2), torch.ones(10, 4))
        True
    """

    def __init__(self, *, in_keys: list[NestedKey] | None = None, out_keys: list[NestedKey] | None = None) -> None:
        super().__init__()
        in_keys = ["action_value"] if in_keys is None else list(in_keys) if isinstance(in_keys, list) else [in_keys]
        out_keys = list(in_keys) if out_keys is None else list(out_keys) if isinstance(out_keys, list) else [out_keys]
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"DistributionalDQNnet: in_keys {in_keys} and out_keys {out_keys} must have the same length."
            )
        self.in_keys = in_keys
        self.out_keys = out_keys

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            tensordict.set(out_key, tensordict.get(in_key).log_softmax(dim=-2))
        return tensordict
