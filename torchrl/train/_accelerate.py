"""``accelerate_update`` and ``set_lr``: the recipes' ``compile`` and ``cudagraphs`` options in one place.

An update step (loss, backward, optimiser step, target update) launches a few hundred small kernels; on a GPU
at the batch sizes of control tasks its time is mostly the CPU launching them. ``torch.compile`` fuses them, and a
CUDA graph (``tensordict.nn.CudaGraphModule``) replays the whole recorded step with one CPU call.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from torchrl._utils._compile import compile_with_warmup

__all__ = ["accelerate_update", "set_lr"]


def accelerate_update(
    update: Callable[..., Any],
    *,
    compile: bool = False,
    cudagraphs: bool = False,
    device: torch.device | str | None = None,
    compile_mode: str | None = None,
    warmup: int = 3,
) -> Callable[..., Any]:
    """Wraps a recipe's update step with ``torch.compile`` and/or a CUDA graph.

    The update must meet ``CudaGraphModule``'s rules when ``cudagraphs`` is on: inputs of a fixed shape (a
    replay buffer's fixed ``batch_size``), no host-side branch on tensor values, outputs detached, the optimiser
    built with ``capturable=True`` (:func:`~torchrl.train.fast_adam` does it when asked) and learning-rate
    changes made with :func:`set_lr` (a captured graph reads the learning rate from its tensor).

    Args:
        update: the step, called with the sampled batch.

    Keyword Args:
        compile: ``torch.compile`` the step (the first call runs eagerly: lazy modules and first-call checks).
        cudagraphs: record the (compiled) step as a CUDA graph after ``warmup`` calls and replay it. Needs a
            CUDA ``device``; elsewhere it warns and the step runs without a graph.
        device: where the step's tensors live.
        compile_mode: ``torch.compile``'s ``mode``.
        warmup: the call that records the graph.

    Returns:
        the callable to use in place of ``update``.

    Examples:
        >>> import torch
        >>> from torchrl.train import accelerate_update
        >>> net = torch.nn.Linear(3, 1)
        >>> def update(x):
        ...     return net(x).sum().detach()
        >>> fast = accelerate_update(update, compile=False, cudagraphs=False)
        >>> fast(torch.ones(2, 3)).shape
        torch.Size([])
    """
    device = torch.device(device) if device is not None else None
    if cudagraphs and (device is None or device.type != "cuda" or not torch.cuda.is_available()):
        warnings.warn(
            f"cudagraphs=true needs a CUDA device (device={device}); the update runs without a CUDA graph.",
            UserWarning,
            stacklevel=2,
        )
        cudagraphs = False
    if cudagraphs:
        from tensordict.nn import CudaGraphModule

        step = torch.compile(update, mode=compile_mode) if compile else update
        return CudaGraphModule(step, warmup=max(warmup, 2), in_keys=[], out_keys=[], device=device)
    if compile:
        return compile_with_warmup(update, warmup=1, mode=compile_mode)
    return update


def set_lr(optimizer: torch.optim.Optimizer, lr: float, *, group: int | None = None) -> None:
    """Sets the learning rate of every parameter group (or of ``group``), in place where it is a tensor.

    A CUDA graph captured around ``optimizer.step()`` reads a tensor learning rate from its storage: writing a new
    float into ``param_group["lr"]`` would be ignored by the replays, copying into the tensor is not.

    Examples:
        >>> import torch
        >>> from torchrl.train import set_lr
        >>> opt = torch.optim.Adam(torch.nn.Linear(2, 1).parameters(), lr=torch.tensor(0.1))
        >>> lr = opt.param_groups[0]["lr"]
        >>> set_lr(opt, 0.05)
        >>> opt.param_groups[0]["lr"] is lr, round(float(lr), 4)
        (True, 0.05)
    """
    groups = optimizer.param_groups if group is None else [optimizer.param_groups[group]]
    for param_group in groups:
        current = param_group["lr"]
        if isinstance(current, torch.Tensor):
            current.fill_(lr)
        else:
            param_group["lr"] = lr
