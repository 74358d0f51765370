"""``SelectTransform``: keeps only some entries of an environment's outputs."""
from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import entries, new_td
from torchrl.data.tensor_specs import Composite
from torchrl.envs.transforms._exclude_transform import _unpack_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["SelectTransform"]

_DEFAULT_REWARDS = ("reward",)
_DEFAULT_DONES = ("done", "terminated", "truncated")


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _collapse(kept: list[tuple[str, ...]], available: set[tuple[str, ...]]) -> list[NestedKey]:
    """The fewest keys that select ``kept``: a top-level entry whose every known leaf is kept is taken whole."""
    kept_set = set(kept)
    by_top: dict[str, list[tuple[str, ...]]] = {}
    for key in available:
        by_top.setdefault(key[0], []).append(key)
    out: list[NestedKey] = []
    for top, leaves in by_top.items():
        if all(leaf in kept_set for leaf in leaves):
            out.append(top)
        else:
            out.extend(leaf if len(leaf) > 1 else leaf[0] for leaf in leaves if leaf in kept_set)
    out.extend(k if len(k) > 1 else k[0] for k in kept if k not in available)
    return out


def _select_spec(spec: Composite, keys: list[NestedKey]) -> Composite:
    """``spec.select(*keys, strict=False)`` keeping the shapes of nested Composites."""
    out = spec.empty()
    for key in keys:
        path = (key,) if isinstance(key, str) else tuple(key)
        if path not in spec:
            continue
        src, dst = spec, out
        for k in path[:-1]:
            src = src[k]
            if k not in dst.keys():
                dst[k] = src.empty()
            dst = dst[k]
        dst[path[-1]] = src[path[-1]]
    return out


class SelectTransform(Transform):
    """Keeps the selected entries (plus rewards, done signals and env state) of every step and reset output.

    Everything else is dropped from the data and from the specs. Entries of the env's state spec (what a
    stateless env such as :class:`~torchrl.envs.PendulumEnv` reads back at the next step) are always kept,
    so that the env keeps running. Selected keys that are absent are ignored.

    Args:
        *selected_keys: the entries to keep (strings or nested keys, as separate arguments).

    Keyword Args:
        keep_rewards: also keep every reward entry (when False, only selected rewards stay).
        keep_dones: also keep every done entry (when False, only selected done entries stay).

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._select_transform import SelectTransform
        >>> env = TransformedEnv(PendulumEnv(), SelectTransform("observation"))
        >>> sorted(env.observation_spec.keys())
        ['observation', 'params', 'th', 'thdot']
        >>> data = env.rollout(2)
        >>> "reward" in data["next"].keys()
        True
    """

    def __init__(self, *selected_keys: NestedKey, keep_rewards: bool = True, keep_dones: bool = True) -> None:
        super().__init__()
        self.selected_keys = _unpack_keys("SelectTransform", selected_keys)
        self.keep_rewards = bool(keep_rewards)
        self.keep_dones = bool(keep_dones)
        self._kept: list[NestedKey] | None = None
        self._data_keys: tuple | None = None  # (keys to select in the data, whether all are top-level strings)

    def set_container(self, container) -> None:
        super().set_container(container)
        self._kept = None
        self._data_keys = None

    # -- keys -------------------------------------------------------------------------------------------
    def _compute_kept(self, output_spec: Composite | None, state_spec: Composite | None) -> list[NestedKey]:
        kept = list(self.selected_keys)
        if output_spec is None:
            if self.keep_rewards:
                kept += _DEFAULT_REWARDS
            if self.keep_dones:
                kept += _DEFAULT_DONES
        else:
            if self.keep_rewards:
                kept += output_spec["full_reward_spec"].keys(True, True)
            if self.keep_dones:
                kept += output_spec["full_done_spec"].keys(True, True)
        if state_spec is not None:
            kept += state_spec.keys(True, True)
        out, seen = [], set()
        for key in kept:
            if key not in seen:
                seen.add(key)
                out.append(key)
        return out

    def _set_kept(self, output_spec: Composite, state_spec: Composite | None) -> list[NestedKey]:
        kept = self._kept = self._compute_kept(output_spec, state_spec)
        available = set()
        for part in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            available.update(_as_tuple(k) for k in output_spec[part].keys(True, True))
        if state_spec is not None:
            available.update(_as_tuple(k) for k in state_spec.keys(True, True))
        keys = _collapse([_as_tuple(k) for k in kept], available)
        self._data_keys = (keys, all(isinstance(k, str) for k in keys))
        return kept

    def _get_data_keys(self) -> tuple:
        plan = self._data_keys
        if plan is None:
            parent = self.parent
            if parent is None:
                keys = self._compute_kept(None, None)
                return keys, all(isinstance(k, str) for k in keys)
            self._set_kept(parent.output_spec, parent.input_spec["full_state_spec"])
            plan = self._data_keys
        return plan

    # -- data -------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        keys, flat = self._get_data_keys()
        d = entries(next_tensordict) if flat else None
        if d is not None:  # a plain TensorDict and top-level keys: the kept entries, without validation
            return new_td({k: d[k] for k in keys if k in d}, next_tensordict.batch_size, next_tensordict.device)
        return next_tensordict.select(*keys, strict=False)

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Returns a TensorDict with only the selected entries (and rewards/dones unless told otherwise)."""
        return self._call(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    # -- specs ------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        parent = self.parent
        state = parent.input_spec["full_state_spec"] if parent is not None else None
        kept = self._set_kept(output_spec, state)
        for part in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            output_spec[part] = _select_spec(output_spec[part], kept)
        return output_spec

    def __repr__(self) -> str:
        keys = ", ".join(repr(k) for k in self.selected_keys)
        return f"SelectTransform({keys}, keep_rewards={self.keep_rewards}, keep_dones={self.keep_dones})"
