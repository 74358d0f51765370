"""Compact checkpoint layouts for TED ("TorchRL episode data") content.

In TED data every step stores its observation twice: at the root of step ``t`` and under ``"next"`` at step
``t - 1``. :class:`TED2Flat` keeps the root copy and only the ``"next"`` values that cannot be rebuilt (the
last step of each trajectory), halving the size of observation-heavy checkpoints; :class:`Flat2TED` rebuilds
the original exactly. :class:`TED2Nested` / :class:`Nested2TED` do the same and also split the flat
content into one entry per trajectory.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

DEFAULT_DONE_KEYS = ("done", "truncated", "terminated")
_REWARD_KEYS = ("reward",)


def _last(key) -> str:
    return key[-1] if isinstance(key, tuple) else key


class TED2Flat:
    """Converts TED content (batch ``[N]``) into the flat layout; a storage save hook.

    Each ``("next", key)`` entry that duplicates the root ``key`` of the following row (observations,
    states) is dropped, except at the rows where it does not (trajectory ends, the newest row of a circular
    storage): those values are kept with their row index. Done and reward entries are kept for every row.
    The conversion is exact whatever the order of the rows, so no trajectory bookkeeping is needed.

    The output is a tensordict with an empty batch size holding ``"root"`` (batch ``[N]``), ``"next_value"``
    / ``"next_index"`` (the kept ``"next"`` values and their rows, per key), and the ``shift`` / ``is_full``
    scalars describing the storage the rows came from.

    Args:
        done_key (NestedKey): the key marking the last step of a trajectory, recorded for reference.
            Defaults to ``("next", "done")``.
        shift_key (str): output key of the storage cursor shift. Defaults to ``"shift"``.
        is_full_key (str): output key of the "storage is full" flag. Defaults to ``"is_full"``.
        done_keys (tuple of str): ``"next"`` entries kept for every row. Defaults to
            ``("done", "truncated", "terminated")``.
        reward_keys (tuple of str): ``"next"`` entries kept for every row. Defaults to ``("reward",)``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TED2Flat, Flat2TED
        >>> obs = torch.arange(5.0)
        >>> done = torch.tensor([False, True, False, False, True]).unsqueeze(-1)
        >>> ted = TensorDict(observation=obs, next=TensorDict(observation=obs + 1, done=done, batch_size=[5]),
        ...                  batch_size=[5])
        >>> ted["next", "observation"][1] = 10.0  # the last observation of the first trajectory
        >>> flat = TED2Flat()(ted)
        >>> flat["next_value", "observation"], flat["next_index", "observation"]
        (tensor([10.,  5.]), tensor([1, 4]))
        >>> bool((Flat2TED()(flat) == ted).all())
        True
    """

    def __init__(
        self,
        done_key=("next", "done"),
        shift_key="shift",
        is_full_key="is_full",
        done_keys=DEFAULT_DONE_KEYS,
        reward_keys=_REWARD_KEYS,
    ):
        self.done_key = done_key
        self.shift_key = shift_key
        self.is_full_key = is_full_key
        self.done_keys = tuple(_last(k) for k in done_keys)
        self.reward_keys = tuple(_last(k) for k in reward_keys)
        self._shift = 0
        self._is_full = False

    @property
    def shift(self) -> int:
        """The cursor of the storage the rows came from (recorded in the output)."""
        return self._shift

    @shift.setter
    def shift(self, value: int) -> None:
        self._shift = int(value)

    @property
    def is_full(self) -> bool:
        """Whether the storage the rows came from was full (recorded in the output)."""
        return self._is_full

    @is_full.setter
    def is_full(self, value: bool) -> None:
        self._is_full = bool(value)

    def __call__(self, data: TensorDictBase, path: Path = None):
        nxt = data.get("next", None)
        values, indices, dropped = {}, {}, []
        if nxt is not None:
            for key in nxt.keys(True, True):
                tkey = (key,) if isinstance(key, str) else key
                if tkey[-1] in self.done_keys or tkey[-1] in self.reward_keys or tkey not in _root_keys(data):
                    continue
                following = data.get(tkey)
                value = nxt.get(tkey)
                differs = torch.ones(value.shape[0], dtype=torch.bool, device=value.device)
                if value.shape[0] > 1:
                    same = value[:-1] == following[1:]
                    differs[:-1] = ~same.reshape(same.shape[0], -1).all(-1)
                rows = differs.nonzero().squeeze(-1)
                values[tkey] = value[rows]
                indices[tkey] = rows
                dropped.append(("next", *tkey))
        out = TensorDict(
            {
                "root": data.exclude(*dropped),
                self.shift_key: torch.tensor(self._shift),
                self.is_full_key: torch.tensor(self._is_full),
            },
            batch_size=[],
        )
        for key in values:
            out.set(("next_value", *key), values[key])
            out.set(("next_index", *key), indices[key])
        if path is not None:
            out.memmap(Path(path) / "flat", num_threads=0)
        return out


def _root_keys(data: TensorDictBase) -> set:
    return {(k,) if isinstance(k, str) else k for k in data.keys(True, True)}


class Flat2TED:
    """Rebuilds TED content from the flat layout written by :class:`TED2Flat`; a storage load hook.

    Args:
        done_key, shift_key, is_full_key, done_keys, reward_keys: as in :class:`TED2Flat`.

    Examples:
        >>> from torchrl.data.replay_buffers import Flat2TED
        >>> Flat2TED().shift_key
        'shift'
    """

    def __init__(
        self,
        done_key="done",
        shift_key="shift",
        is_full_key="is_full",
        done_keys=DEFAULT_DONE_KEYS,
        reward_keys=_REWARD_KEYS,
    ):
        self.done_key = done_key
        self.shift_key = shift_key
        self.is_full_key = is_full_key
        self.done_keys = done_keys
        self.reward_keys = reward_keys

    def __call__(self, data: TensorDictBase, out: TensorDictBase = None):
        if "root" not in data.keys():
            return data  # not in the flat layout
        root = data.get("root").clone()
        if "next_value" in data.keys():
            for key, value in data.get("next_value").items(True, True):
                tkey = (key,) if isinstance(key, str) else key
                full = torch.roll(root.get(tkey), -1, 0).clone()
                full[data.get(("next_index", *tkey))] = value
                root.set(("next", *tkey), full)
        if out is not None:
            out.update_(root)
            return out
        return root


class TED2Nested(TED2Flat):
    """Like :class:`TED2Flat`, and splits the root content into one entry per trajectory.

    Trajectories end where ``done_key`` is set (and at the last row). The output's ``"trajectories"`` entry
    is a lazy stack of the trajectories (ragged along the time dim).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TED2Nested
        >>> done = torch.tensor([False, True, False]).unsqueeze(-1)
        >>> ted = TensorDict(obs=torch.arange(3.0), next=TensorDict(obs=torch.arange(1.0, 4), done=done,
        ...                  batch_size=[3]), batch_size=[3])
        >>> [t.shape[0] for t in TED2Nested()(ted)["trajectories"].tensordicts]
        [2, 1]
    """

    def __call__(self, data: TensorDictBase, path: Path = None):
        flat = TED2Flat.__call__(self, data)
        root = flat.get("root")
        done = data.get(self.done_key).reshape(data.shape[0], -1).any(-1).clone()
        done[-1] = True
        ends = done.nonzero().squeeze(-1).tolist()
        starts = [0] + [e + 1 for e in ends[:-1]]
        trajs = [root[s : e + 1] for s, e in zip(starts, ends)]
        flat.del_("root")
        flat.set("trajectories", LazyStackedTensorDict(*trajs, stack_dim=0))
        if path is not None:
            flat.memmap(Path(path) / "nested", num_threads=0)
        return flat


class Nested2TED(Flat2TED):
    """Rebuilds TED content from the layout written by :class:`TED2Nested`.

    Examples:
        >>> from torchrl.data.replay_buffers import Nested2TED
        >>> Nested2TED().is_full_key
        'is_full'
    """

    def __call__(self, data, out: TensorDictBase = None):
        if "trajectories" not in data.keys():
            return data
        trajs = data.get("trajectories")
        parts = trajs.tensordicts if isinstance(trajs, LazyStackedTensorDict) else list(trajs.unbind(0))
        flat = data.exclude("trajectories")
        flat.set("root", torch.cat(list(parts), 0))
        return Flat2TED.__call__(self, flat, out)
