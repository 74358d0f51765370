"""``_EnvWrapper``: base of environments that wrap an object from another library (gym, dm_control...).

A wrapper is built either from an existing library env (``GymWrapper(env=gym_env)``) or from a name that
the subclass knows how to construct (``GymEnv("CartPole-v1")``). Subclasses implement:

- ``_check_kwargs(kwargs)``: validate the construction arguments;
- ``_build_env(**kwargs) -> library env`` (builder classes; wrappers receive the env ready-made);
- ``_make_specs(env)``: set the TorchRL specs from the library's spaces;
- ``_init_env()``: optional post-construction hook;
- ``_reset``, ``_step``, ``_set_seed`` as any ``EnvBase``.

Unknown attribute lookups fall through to the wrapped library env (``wrapper.unwrapped`` works).
"""
from __future__ import annotations

from typing import Any

from torchrl.envs.common import EnvBase

__all__ = ["_EnvWrapper"]


class _EnvWrapper(EnvBase):
    """Base class for wrappers of third-party environments (see the module docstring)."""

    git_url: str = ""
    libname: str = ""
    available_envs: Any = ()
    _env: Any = None  # the wrapped library env (set in __init__)

    def __init__(self, *args, device=None, batch_size=None, allow_done_after_reset: bool = False, **kwargs) -> None:
        super().__init__(device=device, batch_size=batch_size, allow_done_after_reset=allow_done_after_reset)
        if args:
            if "env" in kwargs:
                raise TypeError(f"{type(self).__name__}: got the env both positionally and as env=.")
            kwargs["env"] = args[0]
            if len(args) > 1:
                raise TypeError(f"{type(self).__name__}: expected at most one positional argument (the env), got {len(args)}.")
        self._constructor_kwargs = kwargs
        self._check_kwargs(kwargs)
        self._env = self._build_env(**kwargs)
        self._make_specs(self._env)
        self._init_env()

    def _check_kwargs(self, kwargs: dict) -> None:
        """Validates construction keyword arguments (default: nothing)."""

    def _build_env(self, **kwargs) -> Any:
        env = kwargs.get("env")
        if env is None:
            raise TypeError(f"{type(self).__name__}: pass the environment to wrap as env=...")
        return env

    def _make_specs(self, env: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _make_specs(env).")

    def _init_env(self) -> None:
        """Post-construction hook (default: nothing)."""

    def close(self, *, raise_if_closed: bool = True) -> None:
        if self.is_closed:
            if raise_if_closed:
                raise RuntimeError(f"{type(self).__name__} is already closed.")
            return
        env = self._env
        if env is not None and hasattr(env, "close"):
            env.close()
        super().close(raise_if_closed=raise_if_closed)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            env = self._env  # (the class default None until __init__ sets it: no recursion)
            if env is None or name.startswith("__"):
                raise
            return getattr(env, name)
