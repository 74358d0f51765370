"""Discrete distributions: one-hot, masked and ordinal categoricals."""
from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import torch
from torch import distributions as D
from torch.nn import functional as F

__all__ = [
    "OneHotCategorical",
    "MaskedCategorical",
    "MaskedOneHotCategorical",
    "Ordinal",
    "OneHotOrdinal",
    "ReparamGradientStrategy",
]


class ReparamGradientStrategy(Enum):
    """How one-hot distributions build reparameterised (``rsample``) samples.

    ``PassThrough``: a hard one-hot sample whose gradient is the gradient of the probabilities
    (straight-through). ``RelaxedOneHot``: the hard one-hot of a
    ``torch.distributions.RelaxedOneHotCategorical`` sample (temperature 1), with the relaxed sample's
    gradient.
    """

    PassThrough = 1
    RelaxedOneHot = 2


def _shape(sample_shape) -> torch.Size:
    return torch.Size(sample_shape) if sample_shape is not None else torch.Size()


def _one_hot_rsample(dist: D.Categorical, sample_shape, grad_method: ReparamGradientStrategy) -> torch.Tensor:
    probs = dist.probs
    if grad_method is ReparamGradientStrategy.PassThrough:
        index = D.Categorical.sample(dist, _shape(sample_shape))
        hard = F.one_hot(index, dist._num_events).to(probs.dtype)
        return hard + probs - probs.detach()
    soft = D.RelaxedOneHotCategorical(torch.ones((), dtype=probs.dtype, device=probs.device), probs=probs).rsample(
        _shape(sample_shape)
    )
    hard = F.one_hot(soft.argmax(-1), dist._num_events).to(soft.dtype)
    return hard + soft - soft.detach()


def _check_grad_method(grad_method) -> ReparamGradientStrategy:
    if not isinstance(grad_method, ReparamGradientStrategy):
        raise ValueError(
            f"grad_method must be a ReparamGradientStrategy (PassThrough or RelaxedOneHot), got {grad_method!r}."
        )
    return grad_method


class OneHotCategorical(D.Categorical):
    """A categorical distribution that reads and writes one-hot encodings.

    Behaves as ``torch.distributions.Categorical`` except that samples, modes and the values given to
    :meth:`log_prob` are one-hot tensors (samples are ``torch.long``). :meth:`rsample` returns float
    one-hot samples that carry a gradient, chosen by ``grad_method``; as in TorchRL, ``has_rsample`` is
    ``False``, so probabilistic modules draw plain samples unless :meth:`rsample` is called explicitly.

    Args:
        logits (torch.Tensor): unnormalised log-probabilities.
        probs (torch.Tensor): probabilities (exclusive with ``logits``).
        grad_method (ReparamGradientStrategy, optional): how :meth:`rsample` builds gradients.
            Defaults to ``ReparamGradientStrategy.PassThrough``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import OneHotCategorical
        >>> dist = OneHotCategorical(logits=torch.tensor([0.0, 10.0, 0.0]))
        >>> dist.mode
        tensor([0, 1, 0])
        >>> float(dist.log_prob(torch.tensor([0, 1, 0]))) > -1e-3
        True
    """

    num_params = 1
    has_rsample = False

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        grad_method: ReparamGradientStrategy = ReparamGradientStrategy.PassThrough,
        **kwargs,
    ) -> None:
        self._grad_method = _check_grad_method(grad_method)
        super().__init__(probs=probs, logits=logits, **kwargs)

    @property
    def grad_method(self) -> ReparamGradientStrategy:
        """How :meth:`rsample` builds its gradient."""
        return self._grad_method

    @property
    def num_samples(self) -> int:
        """The number of categories."""
        return self._num_events

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(value.argmax(dim=-1))

    @property
    def mode(self) -> torch.Tensor:
        return F.one_hot(self.logits.argmax(-1), self._num_events)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    def entropy(self):
        return super().entropy()

    def sample(self, sample_shape: torch.Size | Sequence | None = None) -> torch.Tensor:
        return F.one_hot(super().sample(_shape(sample_shape)), self._num_events)

    def rsample(self, sample_shape: torch.Size | Sequence = None) -> torch.Tensor:
        return _one_hot_rsample(self, sample_shape, self._grad_method)


class MaskedCategorical(D.Categorical):
    """A categorical distribution over the actions a mask allows.

    Masked-out actions get the log-probability ``neg_inf`` (``-inf`` by default) and are never sampled;
    probabilities are renormalised over the allowed actions. Give either a boolean ``mask`` (``True`` =
    allowed, same shape as the logits) or ``indices`` of the allowed actions (padded with
    ``padding_value`` where rows allow fewer actions).

    Args:
        logits (torch.Tensor): unnormalised log-probabilities.
        probs (torch.Tensor): probabilities (exclusive with ``logits``).

    Keyword Args:
        mask (torch.Tensor): boolean mask, ``False`` where an action is not allowed.
        indices (torch.Tensor): indices of the allowed actions along the last dimension (exclusive with
            ``mask``).
        neg_inf (float, optional): log-probability given to masked actions. Defaults to ``-inf``.
        padding_value (int, optional): a value that marks padding: padding entries of ``indices`` are
            ignored; when it is not a valid action (outside ``[0, n)``, e.g. ``-100``), :meth:`log_prob`
            returns ``0`` where the value equals it (a valid action keeps its log-probability, as in TorchRL).
        use_cross_entropy (bool, optional): compute :meth:`log_prob` with ``cross_entropy`` (one fused
            kernel) when the value has the batch shape. Defaults to ``True``.
        padding_side (str, optional): ``"left"`` or ``"right"``, the side on which padded sequences of
            values are padded; kept for API compatibility, since padding is found by value. Defaults to
            ``"left"``.

    Raises:
        ValueError: unless exactly one of ``mask``/``indices`` and one of ``logits``/``probs`` is given.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import MaskedCategorical
        >>> dist = MaskedCategorical(logits=torch.zeros(4), mask=torch.tensor([True, False, True, True]))
        >>> bool((dist.sample((100,)) != 1).all())
        True
        >>> dist.log_prob(torch.tensor([0, 1]))
        tensor([-1.0986,    -inf])
    """

    num_params = 1

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        indices: torch.Tensor | None = None,
        neg_inf: float = float("-inf"),
        padding_value: int | None = None,
        use_cross_entropy: bool = True,
        padding_side: str = "left",
    ) -> None:
        name = type(self).__name__
        if (mask is None) == (indices is None):
            raise ValueError(f"{name}: pass exactly one of mask or indices (got {'both' if mask is not None else 'neither'}).")
        if (logits is None) == (probs is None):
            raise ValueError(f"{name}: pass exactly one of logits or probs (got {'both' if logits is not None else 'neither'}).")
        if padding_side not in ("left", "right"):
            raise ValueError(f"{name}: padding_side must be 'left' or 'right', got {padding_side!r}.")
        params = logits if logits is not None else probs
        if indices is not None:
            mask = self._mask_from_indices(params, indices, padding_value)
        elif mask.dtype is not torch.bool:
            mask = mask.bool()
        self._mask = mask
        self.neg_inf = neg_inf
        self._padding_value = padding_value
        self._padding_side = padding_side
        self.use_cross_entropy = use_cross_entropy
        if logits is not None:
            super().__init__(logits=logits.masked_fill(~mask, neg_inf))
        else:
            probs = probs * mask
            super().__init__(probs=probs / probs.sum(-1, keepdim=True))

    @staticmethod
    def _mask_from_indices(params: torch.Tensor, indices: torch.Tensor, padding_value) -> torch.Tensor:
        n = params.shape[-1]
        indices = indices.long()
        if padding_value is not None:
            # Send padding to an extra column that is dropped afterwards.
            indices = indices.masked_fill(indices == padding_value, n)
        mask = torch.zeros((*params.shape[:-1], n + 1), dtype=torch.bool, device=params.device)
        mask.scatter_(-1, indices.expand(*params.shape[:-1], indices.shape[-1]), True)
        return mask[..., :n]

    @property
    def mask(self) -> torch.Tensor:
        """The boolean mask (``True`` = allowed)."""
        return self._mask

    @property
    def padding_value(self) -> int:
        """The padding value of ``indices`` (``0`` when none was given, as TorchRL reports it)."""
        return 0 if self._padding_value is None else self._padding_value

    @property
    def num_samples(self) -> int:
        """The number of categories."""
        return self._num_events

    @property
    def padding_side(self) -> str:
        return self._padding_side

    def sample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        return super().sample(_shape(sample_shape))

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        padding = None
        pad = self._padding_value
        if pad is not None and not 0 <= pad < self.logits.shape[-1]:  # a valid action is never padding
            padding = value == pad
            value = value.masked_fill(padding, 0)
        logits = self.logits
        if self.use_cross_entropy and value.shape == self.batch_shape and value.ndim >= 1:
            lp = -F.cross_entropy(logits.reshape(-1, logits.shape[-1]), value.reshape(-1).long(), reduction="none")
            lp = lp.reshape(value.shape)
        else:
            value = value.long().unsqueeze(-1)
            value, logits = torch.broadcast_tensors(value, logits)
            lp = logits.gather(-1, value[..., :1]).squeeze(-1)
        if padding is not None:
            lp = lp.masked_fill(padding, 0.0)
        return lp

    def entropy(self):
        probs = self.probs
        logits = self.logits.masked_fill(~self._mask, 0.0)
        return -(probs * logits).sum(-1)

    @property
    def mode(self) -> torch.Tensor:
        return self.logits.argmax(-1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class MaskedOneHotCategorical(MaskedCategorical):
    """:class:`MaskedCategorical` that reads and writes one-hot encodings.

    Args and keyword args are those of :class:`MaskedCategorical` (except ``use_cross_entropy`` and
    ``padding_side``), plus ``grad_method`` (:class:`ReparamGradientStrategy`) for :meth:`rsample`.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import MaskedOneHotCategorical
        >>> dist = MaskedOneHotCategorical(logits=torch.zeros(3), mask=torch.tensor([False, True, False]))
        >>> dist.sample()
        tensor([0, 1, 0])
    """

    has_rsample = False

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        mask: torch.Tensor = None,
        indices: torch.Tensor = None,
        neg_inf: float = float("-inf"),
        padding_value: int | None = None,
        grad_method: ReparamGradientStrategy = ReparamGradientStrategy.PassThrough,
    ) -> None:
        self._grad_method = _check_grad_method(grad_method)
        super().__init__(
            logits=logits, probs=probs, mask=mask, indices=indices, neg_inf=neg_inf, padding_value=padding_value
        )

    @property
    def grad_method(self) -> ReparamGradientStrategy:
        """How :meth:`rsample` builds its gradient."""
        return self._grad_method

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(value.argmax(dim=-1))

    @property
    def mode(self) -> torch.Tensor:
        return F.one_hot(self.logits.argmax(-1), self._num_events)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    def sample(self, sample_shape: torch.Size | Sequence[int] | None = None) -> torch.Tensor:
        return F.one_hot(super().sample(sample_shape), self._num_events)

    def rsample(self, sample_shape: torch.Size | Sequence = None) -> torch.Tensor:
        return _one_hot_rsample(self, sample_shape, self._grad_method)


def _ordinal_logits(scores: torch.Tensor) -> torch.Tensor:
    r"""Ordinal log-weights (Tang & Agrawal, 2020, §5): ``l_k = sum_{i<=k} log s_i + sum_{i>k} log(1 - s_i)``.

    ``s_i = sigmoid(scores_i)``; computed with cumulative sums of ``logsigmoid``.
    """
    log_s = F.logsigmoid(scores)
    log_1ms = F.logsigmoid(-scores)
    below = log_s.cumsum(-1)
    above = log_1ms.flip(-1).cumsum(-1).flip(-1) - log_1ms
    return below + above


class Ordinal(D.Categorical):
    """A categorical distribution over an ordered set, parametrised by per-atom scores.

    The log-weight of atom ``k`` is ``sum_{i<=k} log sigmoid(s_i) + sum_{i>k} log(1 - sigmoid(s_i))``
    (Tang & Agrawal, 2020, §5, https://arxiv.org/abs/1901.10500), which ties neighbouring atoms together:
    useful when the atoms discretise a continuous range.

    Args:
        scores (torch.Tensor): scores of shape ``[..., N]``, ``N`` the number of atoms.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import Ordinal
        >>> dist = Ordinal(scores=torch.tensor([10.0, 10.0, -10.0, -10.0]))
        >>> int(dist.mode)
        1
    """

    def __init__(self, scores: torch.Tensor):
        super().__init__(logits=_ordinal_logits(scores))


class OneHotOrdinal(OneHotCategorical):
    """The one-hot version of :class:`Ordinal`.

    Args:
        scores (torch.Tensor): scores of shape ``[..., N]``, ``N`` the number of atoms.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import OneHotOrdinal
        >>> OneHotOrdinal(scores=torch.tensor([10.0, 10.0, -10.0, -10.0])).mode
        tensor([0, 1, 0, 0])
    """

    def __init__(self, scores: torch.Tensor):
        super().__init__(logits=_ordinal_logits(scores))
