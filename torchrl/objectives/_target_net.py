"""Target-network updaters: :class:`SoftUpdate` (Polyak averaging) and :class:`HardUpdate` (periodic copy).

A loss built with a target network (``delay_value=True``, ``delay_actor=True``, ...) exposes, for each
network ``<name>``, ``loss.<name>_params`` and ``loss.target_<name>_params`` (TensorDicts). An updater
writes the source values into the target leaves *in place*, so the loss (which runs its target networks on
exactly those tensors) sees the update at once.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["TargetNetUpdater", "SoftUpdate", "HardUpdate"]


class TargetNetUpdater:
    """Base class of the target-network updaters.

    Args:
        loss_module: a loss with target parameters (built with ``delay_*=True``).

    Raises:
        RuntimeError: if the loss has no target parameters.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives import DQNLoss, HardUpdate
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> loss = DQNLoss(net, action_space="one-hot")
        >>> updater = HardUpdate(loss, value_network_update_interval=2)
        >>> with torch.no_grad():
        ...     _ = net.module.weight.add_(1.0)
        >>> updater.step(); updater.step()
        >>> torch.equal(loss.target_value_network_params["module", "weight"], net.module.weight)
        True
    """

    def __init__(self, loss_module) -> None:
        pairs = loss_module._target_pairs() if hasattr(loss_module, "_target_pairs") else []
        if not pairs:
            raise RuntimeError(
                f"{type(self).__name__}: {type(loss_module).__name__} has no target parameters to update. Build "
                "the loss with a target network (e.g. delay_value=True, delay_actor=True or delay_qvalue=True)."
            )
        self.loss_module = loss_module
        self._names = [name for name, _, _ in pairs]
        # parameter names per network (read on first use for lazy networks, whose parameters come later)
        self._keys = {name: list(src.keys(True, True)) for name, src, _ in pairs if src is not None}
        for name in self._names:
            loss_module._has_update_associated[name] = True
        self.initialized = False

    def _leaves(self) -> tuple[list, list, list, list]:
        """(float sources, float targets, other sources, other targets), read afresh (survives ``.to()``)."""
        fs, ft, os_, ot = [], [], [], []
        pending = self.loss_module._pending_networks
        for name in self._names:
            if pending is not None and name in pending.entries:
                continue  # a lazy network not called yet: nothing to update
            src = getattr(self.loss_module, f"{name}_params")
            tgt = getattr(self.loss_module, f"target_{name}_params")
            keys = self._keys.get(name)
            if keys is None:
                keys = self._keys[name] = list(src.keys(True, True))
            for key in keys:
                s, t = src.get(key).detach(), tgt.get(key)
                if t.is_floating_point():
                    fs.append(s)
                    ft.append(t)
                else:
                    os_.append(s)
                    ot.append(t)
        return fs, ft, os_, ot

    @torch.no_grad()
    def init_(self) -> None:
        """Copies the current parameters into the targets (a hard update)."""
        fs, ft, os_, ot = self._leaves()
        if ft:
            torch._foreach_copy_(ft, fs)
        for s, t in zip(os_, ot):
            t.copy_(s)
        self.initialized = True

    def step(self) -> None:
        """Updates the targets (called once per optimisation step)."""
        raise NotImplementedError(f"{type(self).__name__} must implement step().")

    def state_dict(self) -> dict[str, Any]:
        """The updater's own state (not the parameters, which live in the loss's state dict)."""
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(networks={self._names})"


class SoftUpdate(TargetNetUpdater):
    """Polyak averaging of the target parameters (Lillicrap et al., 2016, https://arxiv.org/abs/1509.02971).

    .. math:: \\theta' \\leftarrow \\epsilon\\,\\theta' + (1 - \\epsilon)\\,\\theta, \\qquad \\tau = 1 - \\epsilon

    Args:
        loss_module: a loss with target parameters.

    Keyword Args:
        eps: weight kept by the target, in ``[0, 1]``. Exclusive with ``tau``.
        tau: weight given to the online parameters, ``1 - eps``. Exclusive with ``eps``.

    Raises:
        ValueError: if both ``eps`` and ``tau`` are given, or the value is outside ``[0, 1]``.
        RuntimeError: if neither is given (as TorchRL).

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives import DQNLoss, SoftUpdate
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> loss = DQNLoss(net, action_space="one-hot")
        >>> updater = SoftUpdate(loss, tau=0.5)
        >>> target = loss.target_value_network_params["module", "bias"].clone()
        >>> with torch.no_grad():
        ...     _ = net.module.bias.add_(2.0)
        >>> updater.step()
        >>> torch.allclose(loss.target_value_network_params["module", "bias"], target + 1.0)
        True
    """

    def __init__(self, loss_module, *, eps: float | None = None, tau: float | None = None) -> None:
        if eps is not None and tau is not None:
            raise ValueError(f"SoftUpdate: pass only one of eps ({eps}) and tau ({tau}); tau = 1 - eps.")
        if eps is None and tau is None:
            raise RuntimeError(  # TorchRL's type
                "SoftUpdate: neither eps nor tau was provided; pass one of eps (weight kept by the target) or "
                "tau (= 1 - eps)."
            )
        eps = 1.0 - tau if eps is None else eps
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"SoftUpdate: eps must be in [0, 1], got {eps} (tau = {1.0 - eps}).")
        super().__init__(loss_module)
        self.eps = float(eps)

    @torch.no_grad()
    def step(self) -> None:
        fs, ft, os_, ot = self._leaves()
        if ft:
            torch._foreach_lerp_(ft, fs, 1.0 - self.eps)
        for s, t in zip(os_, ot):
            t.copy_(s)

    def state_dict(self) -> dict[str, Any]:
        return {"eps": self.eps}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.eps = float(state_dict.get("eps", self.eps))


class HardUpdate(TargetNetUpdater):
    """Copies the parameters into the targets every ``value_network_update_interval`` steps.

    Van Hasselt et al., *Deep Reinforcement Learning with Double Q-learning*, 2016
    (https://arxiv.org/abs/1509.06461).

    Args:
        loss_module: a loss with target parameters.

    Keyword Args:
        value_network_update_interval: number of :meth:`step` calls between two copies. Defaults to 1000.

    Raises:
        ValueError: if the interval is not positive.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives import DQNLoss, HardUpdate
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> updater = HardUpdate(DQNLoss(net, action_space="one-hot"), value_network_update_interval=10)
        >>> updater.state_dict()
        {'_steps': 0}
    """

    def __init__(self, loss_module, *, value_network_update_interval: float = 1000) -> None:
        if value_network_update_interval <= 0:
            raise ValueError(
                f"HardUpdate: value_network_update_interval must be > 0, got {value_network_update_interval}."
            )
        super().__init__(loss_module)
        self.value_network_update_interval = value_network_update_interval
        self._steps = 0

    def step(self) -> None:
        self._steps += 1
        if self._steps % self.value_network_update_interval == 0:
            self.init_()

    def state_dict(self) -> dict[str, Any]:
        return {"_steps": self._steps}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self._steps = int(state_dict["_steps"])
