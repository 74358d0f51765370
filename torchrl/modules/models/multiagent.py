"""Multi-agent networks: ``MultiAgentMLP`` and ``MultiAgentConvNet`` (see ``multiagent_base.py``)."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from torchrl._utils._errors import ValueRuntimeError

from torchrl.modules.models._convnet import ConvNet
from torchrl.modules.models._mixers import Mixer, QMixer, VDNMixer  # TorchRL's import path for the mixers
from torchrl.modules.models._mlp import MLP
from torchrl.modules.models._multiagent_base import MultiAgentNetBase

__all__ = ["MultiAgentNetBase", "MultiAgentMLP", "MultiAgentConvNet", "Mixer", "QMixer", "VDNMixer"]



class MultiAgentMLP(MultiAgentNetBase):
    """A multi-agent MLP: inputs ``(*B, n_agents, n_agent_inputs)``, outputs ``(*B, n_agents, n_agent_outputs)``.

    With ``share_params`` all agents use one :class:`MLP` (homogeneous policies); otherwise each has its own
    (the parameters are stacked and evaluated in one batched call). With ``centralized`` each agent reads
    the inputs of all agents (``n_agents * n_agent_inputs`` features); a shared centralised network gives
    every agent the same output.

    Args:
        n_agent_inputs (int or None): inputs per agent; ``None`` infers them on the first call.
        n_agent_outputs (int): outputs per agent.
        n_agents (int): number of agents.

    Keyword Args:
        centralized (bool): see above (``centralised`` is accepted too).
        share_params (bool): see above.
        device (torch.device, optional): device of the parameters.
        depth (int, optional): hidden layers of each :class:`MLP`.
        num_cells (int or sequence of int, optional): hidden sizes of each :class:`MLP`.
        activation_class (type, optional): activation. Defaults to ``nn.Tanh``.
        use_td_params (bool, optional): see :class:`MultiAgentNetBase`. Defaults to ``True``.
        **kwargs: other :class:`MLP` options (``norm_class``, ``dropout``, ``layer_class``, ...).

    Raises:
        ValueError: in ``forward``, if the agent dimension of the input does not have ``n_agents`` entries.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import MultiAgentMLP
        >>> net = MultiAgentMLP(4, 2, n_agents=3, centralized=False, share_params=False, num_cells=[32, 32])
        >>> net(torch.randn(10, 3, 4)).shape
        torch.Size([10, 3, 2])
    """

    def __init__(
        self,
        n_agent_inputs: int | None,
        n_agent_outputs: int,
        n_agents: int,
        *,
        centralized: bool | None = None,
        share_params: bool | None = None,
        device=None,
        depth: int | None = None,
        num_cells: Sequence | int | None = None,
        activation_class: type[nn.Module] | None = nn.Tanh,
        use_td_params: bool = True,
        **kwargs,
    ) -> None:
        self.n_agents = n_agents
        self.n_agent_inputs = n_agent_inputs
        self.n_agent_outputs = n_agent_outputs
        self.num_cells = num_cells
        self.depth = depth
        self.activation_class = activation_class
        self.device = device
        centralized = kwargs.pop("centralised", centralized)
        self._centralized_arg = centralized
        super().__init__(
            n_agents=n_agents,
            centralized=centralized,
            share_params=share_params,
            agent_dim=-2,
            use_td_params=use_td_params,
            **kwargs,
        )

    def _build_single_net(self, **kwargs) -> nn.Module:
        n_in = self.n_agent_inputs
        if n_in is not None and self._centralized_arg:
            n_in = n_in * self.n_agents
        return MLP(
            in_features=n_in,
            out_features=self.n_agent_outputs,
            depth=self.depth,
            num_cells=self.num_cells,
            activation_class=self.activation_class,
            device=self.device,
            **kwargs,
        )

    def _pre_forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        if x.ndim < 2 or x.shape[-2] != self.n_agents:
            raise ValueError(
                f"MultiAgentMLP: expected an input of shape (*B, n_agents={self.n_agents}, features), got "
                f"{tuple(x.shape)}."
            )
        if self.n_agent_inputs is not None and x.shape[-1] != self.n_agent_inputs:
            raise ValueRuntimeError(
                f"MultiAgentMLP: expected {self.n_agent_inputs} features per agent, got {x.shape[-1]} "
                f"(input shape {tuple(x.shape)})."
            )
        if self.centralized:
            x = x.flatten(-2, -1)
        return x


class MultiAgentConvNet(MultiAgentNetBase):
    """A multi-agent :class:`ConvNet`: inputs ``(*B, n_agents, C, H, W)``, outputs ``(*B, n_agents, features)``.

    ``centralized`` stacks all agents' channels (``n_agents * C``) as each agent's input; ``share_params``
    as in :class:`MultiAgentMLP`.

    Args:
        n_agents (int): number of agents.
        centralized (bool): every agent sees all agents' images.
        share_params (bool): all agents use one network.

    Keyword Args:
        in_features (int, optional): input channels per agent; ``None`` infers them on the first call.
        device (torch.device, optional): device of the parameters.
        num_cells (sequence of int, optional): channels of each convolution. Defaults to ``[32, 32, 32]``.
        kernel_sizes (int or sequence, optional): kernel sizes. Defaults to ``5``.
        strides (int or sequence, optional): strides. Defaults to ``2``.
        paddings (int or sequence, optional): paddings. Defaults to ``0``.
        activation_class (type, optional): activation. Defaults to ``nn.ELU``.
        use_td_params (bool, optional): see :class:`MultiAgentNetBase`. Defaults to ``True``.
        **kwargs: other :class:`ConvNet` options.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import MultiAgentConvNet
        >>> net = MultiAgentConvNet(2, centralized=False, share_params=True, num_cells=[8, 8], in_features=3)
        >>> net(torch.randn(5, 2, 3, 16, 16)).shape
        torch.Size([5, 2, 8])
    """

    def __init__(
        self,
        n_agents: int,
        centralized: bool | None = None,
        share_params: bool | None = None,
        *,
        in_features: int | None = None,
        device=None,
        num_cells: Sequence[int] | None = None,
        kernel_sizes: Sequence[int | Sequence[int]] | int = 5,
        strides: Sequence | int = 2,
        paddings: Sequence | int = 0,
        activation_class: type[nn.Module] = nn.ELU,
        use_td_params: bool = True,
        **kwargs,
    ) -> None:
        centralized = kwargs.pop("centralised", centralized)
        self.in_features = in_features
        self.num_cells = num_cells
        self.kernel_sizes = kernel_sizes
        self.strides = strides
        self.paddings = paddings
        self.activation_class = activation_class
        self.device = device
        self._centralized_arg = centralized
        super().__init__(
            n_agents=n_agents,
            centralized=centralized,
            share_params=share_params,
            agent_dim=-4,
            use_td_params=use_td_params,
            **kwargs,
        )

    def _build_single_net(self, **kwargs) -> nn.Module:
        in_features = self.in_features
        if in_features is not None and self._centralized_arg:
            in_features = in_features * self.n_agents
        return ConvNet(
            in_features=in_features,
            num_cells=self.num_cells,
            kernel_sizes=self.kernel_sizes,
            strides=self.strides,
            paddings=self.paddings,
            activation_class=self.activation_class,
            device=self.device,
            **kwargs,
        )

    def _pre_forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if len(inputs) != 1:
            raise ValueError(f"MultiAgentConvNet: expected one input tensor, got {len(inputs)}.")
        x = inputs[0]
        if x.ndim < 4 or x.shape[-4] != self.n_agents:
            raise ValueError(
                f"MultiAgentConvNet: expected an input of shape (*B, n_agents={self.n_agents}, C, H, W), got "
                f"{tuple(x.shape)}."
            )
        if self.centralized:
            x = x.flatten(-4, -3)
        return x
