"""Less-travelled ``EnvBase`` methods: compilation, spec inference, parallel construction, gym registration."""
from __future__ import annotations

from typing import Callable

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._utils._compile import compile_with_warmup
from torchrl.data.tensor_specs import Composite
from torchrl.envs.utils import make_composite_from_td

__all__ = ["EnvExtrasMixin", "register_extra_hook"]

# Implementations living further down the import order (batched envs, gym) register themselves here.
_EXTRA_HOOKS: dict[str, Callable] = {}


def register_extra_hook(name: str, fn: Callable) -> None:
    """Registers ``"make_parallel"`` or ``"register_gym"`` implementations."""
    _EXTRA_HOOKS[name] = fn


def _hook(name: str, needs: str) -> Callable:
    fn = _EXTRA_HOOKS.get(name)
    if fn is None:
        raise RuntimeError(f"EnvBase.{name} needs {needs}, which is not loaded; import it first.")
    return fn


def _as_list(keys) -> list:
    if keys is None:
        return []
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


class EnvExtrasMixin:
    """Mixed into ``EnvBase`` only."""

    _eager_step: Callable | None = None  # the uncompiled _step while compile() is in effect
    _parallel_options: dict | None = None  # configure_parallel's options

    def compile(self, *, warmup: int | None = None, **kwargs):
        """Compiles the env's ``_step`` with ``torch.compile`` (after ``warmup`` eager steps); returns the env.

        :meth:`eager` undoes it.
        """
        if self._eager_step is None:
            self._eager_step = self._step
        # an instance attribute: it hides the class's _step until eager()
        self._step = compile_with_warmup(self._eager_step, warmup=1 if warmup is None else warmup, **kwargs)
        return self

    def eager(self):
        """Undoes :meth:`compile`; returns the env."""
        if self._eager_step is not None:
            del self._step  # the class's own _step shows again
            del self._eager_step
        return self

    def configure_parallel(
        self,
        *,
        use_buffers: bool | None = None,
        shared_memory: bool | None = None,
        memmap: bool | None = None,
        mp_start_method: str | None = None,
        num_threads: int | None = None,
        num_sub_threads: int | None = None,
        non_blocking: bool | None = None,
        daemon: bool | None = None,
    ):
        """Records options for a later parallel execution of this env (used by batched envs); returns the env."""
        options = {k: v for k, v in locals().items() if k != "self" and v is not None}
        self._parallel_options = {**(self._parallel_options or {}), **options}
        return self

    @classmethod
    def make_parallel(
        cls,
        create_env_fn,
        *,
        num_envs: int = 1,
        create_env_kwargs: dict | None = None,
        pin_memory: bool = False,
        share_individual_td: bool | None = None,
        shared_memory: bool = True,
        memmap: bool = False,
        policy_proof: Callable | None = None,
        device=None,
        allow_step_when_done: bool = False,
        num_threads: int | None = None,
        num_sub_threads: int = 1,
        serial_for_single: bool = False,
        non_blocking: bool = False,
        mp_start_method: str | None = None,
        use_buffers: bool | None = None,
        consolidate: bool = True,
        daemon: bool = False,
        **parallel_kwargs,
    ):
        """``ParallelEnv(num_envs, create_env_fn, ...)``: runs ``num_envs`` copies in worker processes."""
        options = {k: v for k, v in locals().items() if k not in ("cls", "create_env_fn", "num_envs", "parallel_kwargs")}
        options.update(parallel_kwargs)
        return _hook("make_parallel", "torchrl.envs.batched_envs")(create_env_fn, num_envs=num_envs, **options)

    @classmethod
    def register_gym(
        cls,
        id: str,  # noqa: A002 - TorchRL's name
        *,
        entry_point: Callable | None = None,
        transform=None,
        info_keys: list[NestedKey] | None = None,
        backend: str | None = None,
        to_numpy: bool = False,
        reward_threshold: float | None = None,
        nondeterministic: bool = False,
        max_episode_steps: int | None = None,
        order_enforce: bool = True,
        autoreset: bool | None = None,
        disable_env_checker: bool = False,
        apply_api_compatibility: bool = False,
        **kwargs,
    ):
        """Registers this env class in gymnasium's registry under ``id`` (``gymnasium.make(id)`` then works)."""
        options = {k: v for k, v in locals().items() if k not in ("cls", "id", "kwargs")}
        return _hook("register_gym", "torchrl.envs.libs.gym")(cls, id, **options, **kwargs)

    def auto_specs_(
        self,
        policy: Callable[[TensorDictBase], TensorDictBase],
        *,
        tensordict: TensorDictBase | None = None,
        action_key: NestedKey | list[NestedKey] = "action",
        done_key: NestedKey | list[NestedKey] | None = None,
        observation_key: NestedKey | list[NestedKey] = "observation",
        reward_key: NestedKey | list[NestedKey] = "reward",
    ):
        """Infers the env's specs from a short run with ``policy`` (for envs written without specs).

        Runs reset and two steps with ``policy``, then sets observation/action/reward/done/state specs from
        the data (shapes and dtypes; unbounded values). Returns the env.
        """
        locked = self.is_spec_locked
        if locked:
            self.set_spec_lock_(False)
        td = self._reset(tensordict)
        out = policy(td)
        td = td if out is None else out
        nxt = self._step(td)
        batch = td.batch_size
        obs_keys = [k for k in nxt.keys(True, True) if k in _as_list(observation_key) or k not in
                    set(_as_list(reward_key)) | set(_as_list(done_key) or ["done", "terminated", "truncated"])]
        done_keys = _as_list(done_key) or [k for k in ("done", "terminated", "truncated") if k in nxt.keys()]
        self.full_observation_spec = _spec_of(nxt.select(*obs_keys), batch)
        self.full_action_spec = _spec_of(td.select(*_as_list(action_key)), batch)
        self.full_reward_spec = _spec_of(nxt.select(*_as_list(reward_key)), batch)
        self.full_done_spec = _spec_of(nxt.select(*done_keys), batch)
        state_keys = [k for k in td.keys(True, True) if k not in _as_list(action_key) and k not in obs_keys and k not in done_keys]
        self.full_state_spec = _spec_of(td.select(*state_keys), batch)
        self._complete_specs()
        if locked:
            self.set_spec_lock_(True)
        return self


def _spec_of(td: TensorDictBase, batch: torch.Size) -> Composite:
    spec = make_composite_from_td(td, unsqueeze_null_shapes=False)
    return Composite(dict(spec.items()), shape=batch)
