"""``RandomCropTensorDict``: random contiguous sub-sequences of sampled trajectories."""
from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.envs.transforms._transform import Transform

__all__ = ["RandomCropTensorDict"]


class RandomCropTensorDict(Transform):
    """Crops a random window of ``sub_seq_len`` consecutive steps from each sampled sequence.

    Along ``sample_dim`` (time), every sequence (every index of the other batch dims) gets its own window,
    drawn uniformly among the windows that fit. With ``mask_key``, only the valid steps of each sequence
    are used: the mask is ``True`` on a prefix of the sequence (its first steps) and ``False`` after it, as
    TorchRL assumes; windows are drawn inside that prefix.

    This is a transform for sampled data (replay buffers, datasets of trajectories); in an environment, a
    reset or a step raises ``RuntimeError``.

    Args:
        sub_seq_len (int): the length of the windows.
        sample_dim (int): the time dim of the batch. Defaults to ``-1``.
        mask_key (NestedKey, optional): a boolean entry shaped like the batch, ``True`` on the valid steps.

    Raises:
        ValueError: ``sub_seq_len`` is not a positive int, or ``sample_dim`` is not an int.
        RuntimeError: a sequence (or its valid prefix) is shorter than ``sub_seq_len``; data without batch
            dims; used in an environment.
        IndexError: ``sample_dim`` is out of range for the data.
        KeyError: ``mask_key`` is not in the data.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import RandomCropTensorDict
        >>> data = TensorDict(obs=torch.arange(20).view(2, 10), batch_size=[2, 10])
        >>> out = RandomCropTensorDict(3)(data)
        >>> out.shape
        torch.Size([2, 3])
        >>> bool(((out["obs"][:, 1:] - out["obs"][:, :-1]) == 1).all())  # consecutive steps
        True
    """

    def __init__(self, sub_seq_len: int, sample_dim: int = -1, mask_key: NestedKey | None = None) -> None:
        if isinstance(sub_seq_len, bool) or not isinstance(sub_seq_len, int) or sub_seq_len < 1:
            raise ValueError(f"RandomCropTensorDict: sub_seq_len must be a positive int, got {sub_seq_len!r}.")
        if isinstance(sample_dim, bool) or not isinstance(sample_dim, int):
            raise ValueError(f"RandomCropTensorDict: sample_dim must be an int, got {sample_dim!r}.")
        super().__init__()
        self.sub_seq_len = sub_seq_len
        self.sample_dim = sample_dim
        self.mask_key = mask_key

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        ndim = tensordict.ndim
        if ndim == 0:
            raise RuntimeError(
                "RandomCropTensorDict: cannot sub-sample from a tensordict with an empty shape (batch_size=[])."
            )
        dim = self.sample_dim + ndim if self.sample_dim < 0 else self.sample_dim
        if not 0 <= dim < ndim:
            raise IndexError(
                f"RandomCropTensorDict: sample_dim={self.sample_dim} is out of range for data with batch_size "
                f"{tuple(tensordict.shape)}."
            )
        shape, window = tensordict.shape, self.sub_seq_len
        other = shape[:dim] + shape[dim + 1:]
        device = tensordict.device
        if self.mask_key is not None:
            mask = tensordict.get(self.mask_key, None)
            if mask is None:
                raise KeyError(f"RandomCropTensorDict: mask entry {self.mask_key!r} not found in the data.")
            lengths = mask.reshape(*shape, -1).all(-1).sum(dim)
            shortest = int(lengths.min())
            if shortest < window:
                raise RuntimeError(
                    f"RandomCropTensorDict: cannot sample windows of length {window} when the shortest valid "
                    f"sequence ({self.mask_key!r}) has {shortest} steps."
                )
            device = mask.device
        else:
            if shape[dim] < window:
                raise RuntimeError(
                    f"RandomCropTensorDict: cannot sample windows of length {window} along dim {self.sample_dim} "
                    f"of data with batch_size {tuple(shape)}; reduce sub_seq_len or sample longer sequences."
                )
            lengths = torch.full(other, shape[dim], device=device)
        # one start per sequence, uniform over the windows that fit
        start = (torch.rand(other, device=device) * (lengths - window + 1)).floor().long()
        out_shape = list(shape)
        out_shape[dim] = window
        steps = torch.arange(window, device=device).view([window if d == dim else 1 for d in range(ndim)])
        index = []
        for d in range(ndim):
            if d == dim:
                index.append(start.unsqueeze(dim) + steps)
            else:
                rows = torch.arange(shape[d], device=device).view([-1 if k == d else 1 for k in range(ndim)])
                index.append(rows.expand(out_shape))
        if isinstance(tensordict, LazyStackedTensorDict):
            tensordict = tensordict.contiguous()
        return tensordict[tuple(index)]

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def _refuse_env(self):
        raise RuntimeError(
            "RandomCropTensorDict crops sampled sequences (e.g. as a replay-buffer transform); it cannot run in "
            "an environment."
        )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_env()

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._refuse_env()

    def __repr__(self) -> str:
        return (
            f"RandomCropTensorDict(sub_seq_len={self.sub_seq_len}, sample_dim={self.sample_dim}, "
            f"mask_key={self.mask_key!r})"
        )
