"""EnvPool plumbing for ``MultiThreadedEnvWrapper``: one uniform view of EnvPool's two Python APIs.

EnvPool pools come in two flavours (``envpool.make(..., env_type=...)``):

- ``"gymnasium"`` (also what ``"gym"`` builds): ``step`` returns ``(obs, reward, terminated, truncated,
  info)`` and ``reset`` returns ``(obs, info)``, the sub-env ids being ``info["env_id"]``;
- ``"dm"``: both return a ``dm_env.TimeStep`` whose ``observation`` is a namedtuple merging observation
  and info fields; its discount is 0 at the end of *every* episode, time limits included.

Underneath, both flavours receive the same flat list of state arrays from the C++ pool (keys in
``env._state_keys``: ``"obs"`` or ``"obs:<name>"``, ``"reward"``, ``"done"``, ``"trunc"``,
``"info:env_id"``, ...). :class:`PoolIO` reads that list: ``step``/``reset`` return the raw observation in
*gymnasium form* (an array, or a dict of arrays following ``env.spec.gymnasium_observation_space``),
numpy rewards and flags, and the sub-env ids the rows belong to. Both flavours publish gymnasium spaces
through ``env.spec``, which is what the specs are built from (:func:`pool_spaces`).

Other helpers: :func:`rebuild_with_seed` (EnvPool fixes seeds at construction, so seeding means a new
pool with the same configuration) and :func:`scatter_rows` (partial-reset bookkeeping on raw trees).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["PoolIO", "copy_rows", "fold_seed", "import_envpool", "is_envpool", "pool_spaces", "rebuild_with_seed", "scatter_rows"]

_INT32_SPAN = 2**31


def import_envpool() -> Any:
    """The ``envpool`` module, or an ImportError that says how to get it."""
    try:
        import envpool
    except ImportError as err:  # optional dependency
        raise ImportError(
            "MultiThreadedEnv needs the `envpool` package (Linux/macOS, x86_64/arm64 wheels): "
            "pip install envpool (or pip install 'torchrl[envpool]')."
        ) from err
    return envpool


def is_envpool(env: Any) -> bool:
    """Whether ``env`` is an EnvPool pool (of any flavour)."""
    return any(k.__name__ == "EnvPoolMixin" and k.__module__.startswith("envpool.") for k in type(env).__mro__)


# ------------------------------------------------------------------------------------------------- spaces
def _fix_box(space: Any, gymnasium: Any) -> Any:
    """EnvPool's default float bounds are C++'s ``numeric_limits<T>::min()/max()``: the smallest *positive*
    float and the largest float. The former is not a lower bound at all (observations go negative), so
    both are read as "no bound" here."""
    dtype = np.dtype(space.dtype)
    if not np.issubdtype(dtype, np.floating):
        return space
    info = np.finfo(dtype)
    low = np.array(space.low, dtype=dtype, copy=True)
    high = np.array(space.high, dtype=dtype, copy=True)
    fix_low, fix_high = low == info.tiny, high == info.max
    if not (fix_low.any() or fix_high.any()):
        return space
    low[fix_low] = -np.inf
    high[fix_high] = np.inf
    return gymnasium.spaces.Box(low=low, high=high, shape=space.shape, dtype=dtype)


def _fix_space(space: Any, gymnasium: Any) -> Any:
    spaces = gymnasium.spaces
    if isinstance(space, spaces.Dict):
        return spaces.Dict({k: _fix_space(v, gymnasium) for k, v in space.spaces.items()})
    if isinstance(space, spaces.Box):
        return _fix_box(space, gymnasium)
    return space


def pool_spaces(env: Any) -> tuple[Any, Any]:
    """``(observation_space, action_space)`` of one sub-env, as gymnasium spaces with usable bounds."""
    import gymnasium  # envpool depends on it

    spec = env.spec
    return _fix_space(spec.gymnasium_observation_space, gymnasium), spec.gymnasium_action_space


# ------------------------------------------------------------------------------------------------- reading
_REQUIRED_KEYS = ("info:env_id", "reward", "done", "trunc")


def _obs_builder(keys: list[str]) -> Callable[[list], Any]:
    """state list → observation in gymnasium form, from the pool's state keys (``obs``, ``obs:a.b``...).

    Mirrors how EnvPool derives ``gymnasium_observation_space``: ``"obs:"`` dropped, ``":"``/``"."``
    nesting, and a single observation key giving a bare array.
    """
    entries = [(i, k.replace("obs:", "", 1).replace(":", ".").split(".")) for i, k in enumerate(keys) if k.startswith("obs")]
    if not entries:
        raise RuntimeError(f"MultiThreadedEnvWrapper: the pool has no observation entries (state keys {keys}).")
    if len(entries) == 1:
        (index, _), = entries
        return lambda state: state[index]

    def build(state: list) -> dict:
        out: dict = {}
        for index, path in entries:
            node = out
            for p in path[:-1]:
                node = node.setdefault(p, {})
            node[path[-1]] = state[index]
        return out

    return build


def _fast_send_dtype(env: Any) -> np.dtype | None:
    """The action dtype when the pool takes exactly ``[env_id, players.env_id, action]`` (one player, one
    action array), else ``None`` (actions then go through the pool's public ``send``)."""
    keys = list(getattr(env, "_action_keys", ()))
    if len(keys) != 3 or keys[:2] != ["env_id", "players.env_id"] or not hasattr(env, "_send"):
        return None
    if int(env.config.get("max_num_players", 1)) != 1:
        return None
    return np.dtype(env.spec.action_array_spec[keys[2]].dtype)


class PoolIO:
    """Steps and resets an EnvPool pool; returns raw observations in gymnasium form plus numpy arrays.

    Reads EnvPool's flat state list (``send`` then ``_recv``, ``_reset`` then ``_recv``: what the pool's own
    ``step``/``reset`` do before packing) rather than the packed results, for two reasons: it is the same for
    both API flavours, and the ``dm`` flavour's ``TimeStep`` cannot tell truncation from termination (its
    discount is 0 for both) while the state's ``trunc`` entry can.
    """

    def __init__(self, env: Any) -> None:
        keys = list(getattr(env, "_state_keys", ()))
        missing = [k for k in _REQUIRED_KEYS if k not in keys]
        if missing or not all(hasattr(env, name) for name in ("send", "_recv", "_reset")):
            raise RuntimeError(
                f"MultiThreadedEnvWrapper: this EnvPool pool ({type(env).__name__}) does not expose the state entries "
                f"{list(_REQUIRED_KEYS)} and the send/_recv/_reset methods this wrapper reads (missing keys: {missing}). "
                f"Install a supported envpool version (pip install 'envpool>=1.2,<2')."
            )
        self.env = env
        self.recv = env._recv
        self.reset_ids = env._reset
        self.all_ids = np.arange(int(env.config["num_envs"]), dtype=np.int32)
        self.i_env_id, self.i_reward, self.i_done, self.i_trunc = (keys.index(k) for k in _REQUIRED_KEYS)
        self.read_obs = _obs_builder(keys)
        self.send = self._first_send
        self.fast_dtype = _fast_send_dtype(env)

    def _first_send(self, action: Any, env_id: np.ndarray | None) -> None:
        # the public send checks the action's dtype and shape against the pool's spec (once); later calls
        # skip its per-call re-packing when the action is a single array of a single-player pool
        self.env.send(action, env_id)
        if self.fast_dtype is not None:
            self.send = self._fast_send
        else:
            self.send = self.env.send

    def _fast_send(self, action: Any, env_id: np.ndarray | None) -> None:
        if type(action) is not np.ndarray:
            return self.env.send(action, env_id)
        ids = self.all_ids if env_id is None else env_id
        self.env._send([ids, ids, np.ascontiguousarray(action, dtype=self.fast_dtype)])

    def step(self, action: Any, env_id: np.ndarray | None = None) -> tuple:
        """``(obs, reward, terminated, truncated, env_ids)`` after stepping the sub-envs ``env_id`` (all)."""
        self.send(action, env_id)
        state = self.recv()
        truncated = state[self.i_trunc]
        return self.read_obs(state), state[self.i_reward], state[self.i_done] & ~truncated, truncated, state[self.i_env_id]

    def reset(self, env_id: np.ndarray | None = None) -> tuple:
        """``(obs, env_ids)`` after resetting the sub-envs ``env_id`` (all when ``None``)."""
        self.reset_ids(self.all_ids if env_id is None else env_id)
        state = self.recv()
        return self.read_obs(state), state[self.i_env_id]


# ------------------------------------------------------------------------------------------------- seeding
def fold_seed(seed: int, num_envs: int) -> int:
    """``seed`` brought into EnvPool's range: sub-env ``i`` is seeded ``seed + i`` and must fit an int32."""
    return int(seed) % (_INT32_SPAN - num_envs)


def rebuild_with_seed(env: Any, seed: int) -> Any:
    """A new pool with ``env``'s configuration but seeds ``seed, seed + 1, ...`` (``env`` is left open)."""
    spec = env.spec
    config = spec.config._replace(seed=int(seed), env_seed=[])
    new = type(env)(type(spec)(config))
    # envpool.make stores render options as plain attributes of the pool: carry them over
    for key, value in vars(env).items():
        if key.startswith("_render_") and not key.startswith("_render_window"):
            setattr(new, key, value)
    return new


# ------------------------------------------------------------------------------------------------- raw trees
def copy_rows(tree: Any) -> Any:
    """A copy of a raw observation tree (arrays, nested dicts of arrays)."""
    if isinstance(tree, dict):
        return {k: copy_rows(v) for k, v in tree.items()}
    return np.array(tree, copy=True)


def scatter_rows(dst: Any, ids: np.ndarray, src: Any) -> Any:
    """Writes the rows of ``src`` (one per id in ``ids``) into rows ``ids`` of ``dst``, in place."""
    if isinstance(dst, dict):
        for k in dst:
            scatter_rows(dst[k], ids, src[k])
        return dst
    dst[ids] = src
    return dst
