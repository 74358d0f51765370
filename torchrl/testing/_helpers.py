"""Helpers for test suites: device lists, a default-dtype fixture, a retry decorator, random reset masks."""
from __future__ import annotations

import functools
import time
from typing import Callable

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

__all__ = ["dtype_fixture", "get_available_devices", "get_default_devices", "rand_reset", "retry"]


def get_available_devices() -> list[torch.device]:
    """Every device tests may run on: the CPU, then each visible CUDA device.

    Examples:
        >>> get_available_devices()[0]
        device(type='cpu')
    """
    devices = [torch.device("cpu")]
    devices += [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]
    return devices


def get_default_devices() -> list[torch.device]:
    """The device tests should prefer: the first CUDA device when there is one, else the CPU.

    Examples:
        >>> get_default_devices() in ([torch.device("cpu")], [torch.device("cuda:0")])
        True
    """
    if torch.cuda.is_available():
        return [torch.device("cuda:0")]
    return [torch.device("cpu")]


@pytest.fixture
def dtype_fixture():
    """Runs the test with ``torch.float64`` as default dtype and restores the previous default afterwards.

    Yields the previous default dtype.
    """
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield previous
    finally:
        torch.set_default_dtype(previous)


def retry(
    ExceptionToCheck: type[Exception],
    tries: int = 3,
    delay: int = 3,
    skip_after_retries: bool = False,
) -> Callable[[Callable], Callable]:
    """Decorator: call the function again (up to ``tries`` times in all) when it raises ``ExceptionToCheck``.

    Args:
        ExceptionToCheck: the exception type (or tuple of types) that triggers a new attempt.
        tries: total number of attempts.
        delay: seconds to wait between attempts.
        skip_after_retries: after the last failed attempt, ``pytest.skip`` instead of re-raising.

    Examples:
        >>> calls = []
        >>> @retry(ValueError, tries=3, delay=0)
        ... def flaky():
        ...     calls.append(1)
        ...     if len(calls) < 3:
        ...         raise ValueError("not yet")
        ...     return len(calls)
        >>> flaky()
        3
    """
    if tries < 1:
        raise ValueError(f"retry: tries must be >= 1, got {tries}.")

    def decorator(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for attempt in range(1, tries + 1):
                try:
                    return fn(*args, **kwargs)
                except ExceptionToCheck as err:
                    if attempt == tries:
                        if skip_after_retries:
                            pytest.skip(f"{fn.__name__} failed {tries} times with {type(err).__name__}: {err}")
                        raise
                    if delay:
                        time.sleep(delay)

        return wrapper

    return decorator


def rand_reset(env) -> TensorDictBase:
    """A TensorDict of random ``"_reset"`` masks, one per done group of ``env``, each with at least one True.

    Each mask has the shape of its group's done entries (e.g. ``(*env.batch_size, 1)`` at the root,
    ``(*env.batch_size, n_agents, 1)`` for an agent group), so it can be passed to ``env.reset``.

    Examples:
        >>> from torchrl.testing import CountingEnv
        >>> env = CountingEnv(batch_size=[4])
        >>> masks = rand_reset(env)
        >>> masks["_reset"].shape, bool(masks["_reset"].any())
        (torch.Size([4, 1]), True)
    """
    masks = TensorDict(batch_size=env.batch_size, device=env.device)
    full_done_spec = env.full_done_spec
    for reset_key, group in zip(env.reset_keys, env.done_keys_groups):
        shape = full_done_spec[group[0]].shape
        mask = torch.rand(shape, device=env.device) < 0.5
        if not mask.any():
            mask.view(-1)[torch.randint(mask.numel(), ())] = True
        masks.set(reset_key, mask)
    return masks
