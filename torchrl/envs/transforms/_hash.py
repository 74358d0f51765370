"""``Hash``: replaces entries (tensors or non-tensor data such as strings) by a hash tensor."""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import TensorSpec
from torchrl.envs.transforms._groups import holder
from torchrl.envs.transforms._unary_transform import UnaryTransform, _unwrap, spec_of_value

__all__ = ["Hash"]


def _as_items(value, batch_dims: int) -> list | None:
    """The per-batch-element values of ``value`` (flattened batch), or ``None`` when not batched."""
    if batch_dims == 0:
        return None
    if isinstance(value, NonTensorStack):
        flat = value.tolist()
        for _ in range(batch_dims - 1):
            flat = [x for sub in flat for x in sub]
        return flat
    if isinstance(value, NonTensorData):
        data = value.data
        return [data] * value.batch_size.numel()
    if isinstance(value, torch.Tensor):
        return list(value.reshape(-1, *value.shape[batch_dims:]).unbind(0))
    return None


class Hash(UnaryTransform):
    """Hashes each ``in_keys`` entry into a ``uint8`` tensor written at the paired ``out_keys`` entry.

    The default hash is SHA-256 of ``seed + str(value)`` (32 bytes): a string such as a prompt or a
    ``NonTensorData`` gives the digest of its text, a tensor the digest of its printed form. On batched data
    (a ``NonTensorStack`` of strings, a batch of observations) each batch element is hashed separately, so
    the result has shape ``(*batch, 32)`` (TorchRL 0.14.1 raises there). With a ``repertoire`` (a dict), every
    hash is recorded with its input, so that :meth:`get_input_from_hash` (and the inverse transform, on
    ``in_keys_inv``/``out_keys_inv``) can map hashes back.

    Args:
        in_keys: entries to hash.
        out_keys: where the hashes go.
        in_keys_inv: entries recovered from hashes on the input side (needs a ``repertoire``).
        out_keys_inv: hash entries read on the input side.

    Keyword Args:
        hash_fn (callable): ``hash_fn(value)`` (or ``hash_fn(value, seed)`` when ``seed`` is given) returning a
            tensor. Defaults to :meth:`reproducible_hash`.
        seed: prepended to the text before hashing (default ``None``: no seed).
        use_raw_nontensor (bool): pass ``NonTensorData`` itself to ``hash_fn`` instead of its content.
        repertoire (dict): where hashes and their inputs are recorded; kept in the ``state_dict`` under
            ``"_repertoire"``.

    Examples:
        >>> from tensordict import NonTensorData, TensorDict
        >>> from torchrl.envs.transforms import Hash
        >>> t = Hash(in_keys=["text"], out_keys=["hash"], repertoire={})
        >>> h = t(TensorDict(text=NonTensorData("abc")))["hash"]
        >>> h.shape, h.dtype, h[:4].tolist()  # SHA-256("abc") starts with ba 78 16 bf
        (torch.Size([32]), torch.uint8, [186, 120, 22, 191])
        >>> t.get_input_from_hash(h)
        'abc'
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        in_keys_inv: Sequence[NestedKey] = None,
        out_keys_inv: Sequence[NestedKey] = None,
        *,
        hash_fn: Callable = None,
        seed: Any | None = None,
        use_raw_nontensor: bool = False,
        repertoire: tuple[tuple[int], Any] = None,
    ) -> None:
        self._hash_fn = self.reproducible_hash if hash_fn is None else hash_fn
        self._seed = seed
        self._repertoire = repertoire
        super().__init__(
            in_keys=in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
            fn=self.call_hash_fn,
            inv_fn=self.get_input_from_hash,
            use_raw_nontensor=use_raw_nontensor,
        )

    # -- hashing ----------------------------------------------------------------------------------------
    @classmethod
    def reproducible_hash(cls, string, seed=None) -> torch.Tensor:
        """SHA-256 of ``str(seed) + str(string)`` (or of ``string`` alone) as a ``uint8`` tensor of 32 values."""
        text = str(string) if seed is None else str(seed) + str(string)
        return torch.frombuffer(bytearray(hashlib.sha256(text.encode()).digest()), dtype=torch.uint8)

    def call_hash_fn(self, value):
        """Hashes one value (recording it in the repertoire when there is one)."""
        if not self._use_raw_nontensor:
            value = _unwrap(value)
        out = self._hash_fn(value) if self._seed is None else self._hash_fn(value, self._seed)
        if self._repertoire is not None:
            self._repertoire[self.hash_to_repertoire_key(out)] = value
        return out

    @classmethod
    def hash_to_repertoire_key(cls, hash_tensor) -> tuple:
        """The repertoire key of a hash: its values as a (nested) tuple."""
        if isinstance(hash_tensor, torch.Tensor):
            hash_tensor = hash_tensor.tolist()
        if isinstance(hash_tensor, list):
            return tuple(cls.hash_to_repertoire_key(x) for x in hash_tensor)
        return hash_tensor

    def get_input_from_hash(self, hash_tensor) -> Any:
        """The input recorded for ``hash_tensor`` (a list of inputs for a batch of hashes)."""
        if self._repertoire is None:
            raise RuntimeError(
                "Hash: an inverse transform was queried but the repertoire is None; build the transform with "
                "repertoire={} to record inputs."
            )
        if isinstance(hash_tensor, torch.Tensor) and hash_tensor.ndim > 1:
            return [self.get_input_from_hash(h) for h in hash_tensor.unbind(0)]
        key = self.hash_to_repertoire_key(hash_tensor)
        if key not in self._repertoire:
            raise KeyError(f"Hash: hash {list(key)[:4]}... is not in the repertoire ({len(self._repertoire)} entries).")
        return self._repertoire[key]

    def _hash_batched(self, value, batch_dims: int, batch_size: torch.Size):
        items = _as_items(value, batch_dims)
        if items is None:
            return self.call_hash_fn(value)
        hashes = torch.stack([self.call_hash_fn(item) for item in items])
        return hashes.reshape(*batch_size, *hashes.shape[1:])

    # -- data -------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            # one hash per element of the batch of the entry's own group (e.g. one per agent)
            batch_dims, batch_size = _group_batch(next_tensordict, in_key)
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"Hash: key {in_key!r} not found; available keys: "
                    f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            next_tensordict.set(out_key, self._hash_batched(value, batch_dims, batch_size))
        return next_tensordict

    def _map_specs(self, spec: TensorSpec, test: TensorDictBase, pairs) -> TensorSpec:
        if not pairs or pairs[0][2] is not self._fn:  # inverse pairs: the outside writes hashes
            return spec
        repertoire, self._repertoire = self._repertoire, None  # spec probes are not recorded
        try:
            for src, dst, _ in pairs:
                if src in spec.keys(include_nested=True):
                    value = test.get(src)
                    batch_dims, batch_size = _group_batch(test, src)
                    spec[dst] = spec_of_value(self._hash_batched(value, batch_dims, batch_size), spec[src])
        finally:
            self._repertoire = repertoire
        return spec

    def transform_input_spec(self, input_spec):
        # on the input side, the outside writes hashes at out_keys_inv: describe them by hashing a zero input
        for part in ("full_action_spec", "full_state_spec"):
            sub = input_spec[part]
            test = sub.zero()
            repertoire, self._repertoire = self._repertoire, None
            try:
                for src, dst in zip(self.in_keys_inv, self.out_keys_inv):
                    if src in sub.keys(include_nested=True):
                        hashed = self._hash_batched(test.get(src), test.batch_dims, test.batch_size)
                        sub[dst] = spec_of_value(hashed, sub[src])
            finally:
                self._repertoire = repertoire
        return input_spec

    # -- state ------------------------------------------------------------------------------------------
    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        out = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        out[prefix + "_repertoire"] = self._repertoire
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        key = prefix + "_repertoire"
        if key in state_dict:
            self._repertoire = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    def __repr__(self) -> str:
        return f"Hash(in_keys={self.in_keys}, out_keys={self.out_keys}, seed={self._seed!r})"


def _group_batch(tensordict: TensorDictBase, key) -> tuple[int, torch.Size]:
    """``(batch_dims, batch_size)`` of the (sub-)TensorDict holding ``key``."""
    held_in = holder(tensordict, key)
    return held_in.batch_dims, held_in.batch_size
