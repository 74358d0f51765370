"""``MultiAgentNetBase``: one network per agent (or one shared), each agent seeing its own input or all of them.

``share_params=False`` keeps the agents' parameters stacked along a leading agent dimension and evaluates
every agent in one batched call: MLPs made of ``nn.Linear`` and parameter-free layers use batched
matrix products; other networks use ``torch.vmap`` over a functional call.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from tensordict import TensorDict
from torch import nn

from torchrl.modules.models.utils import _reset_parameters_recursive

__all__ = ["MultiAgentNetBase"]


def _has_uninitialized(module: nn.Module) -> bool:
    return any(isinstance(p, nn.parameter.UninitializedParameter) for p in module.parameters())


def _linear_plan(net: nn.Module) -> list | None:
    """The layers of ``net`` as ``("linear", name, has_bias)`` / ``("module", module)`` steps, or ``None``.

    ``None`` unless ``net`` is an ``nn.Sequential`` of plain ``nn.Linear`` layers and layers without
    parameters or buffers (activations, dropout), which :meth:`MultiAgentNetBase._batched_linear` evaluates
    with batched matrix products.
    """
    if not isinstance(net, nn.Sequential):
        return None
    plan = []
    for name, module in net.named_children():
        if type(module) is nn.Linear:
            plan.append(("linear", name, module.bias is not None))
        elif next(module.parameters(), None) is None and next(module.buffers(), None) is None:
            plan.append(("module", module))
        else:
            return None
    return plan


class MultiAgentNetBase(nn.Module):
    """Base class of the multi-agent networks.

    Subclasses implement ``_build_single_net(**kwargs)`` (one agent's network) and ``_pre_forward(*inputs)``
    (checks and, if centralised, merges the agent dimension into the features). The output of a network
    has its agent dimension at ``-2``.

    To initialise the parameters with ``torch.nn.init``, get a network holding the stacked parameters
    with :meth:`get_stateful_net`, initialise it, and write it back with :meth:`from_stateful_net`.

    Keyword Args:
        n_agents (int): number of agents.
        centralized (bool): every agent sees the inputs of all agents.
        share_params (bool): all agents use the same network.
        agent_dim (int): the agent dimension of the inputs.
        vmap_randomness (str, optional): ``randomness`` argument of ``torch.vmap`` (for networks that
            draw random numbers, e.g. dropout). Defaults to ``"different"``.
        use_td_params (bool, optional): keep the stacked parameters in a ``TensorDictParams`` (``params``)
            rather than in a stacked copy of the network. Defaults to ``True``.

    Raises:
        TypeError: if ``centralized``, ``share_params`` or ``agent_dim`` is missing.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import MultiAgentMLP
        >>> net = MultiAgentMLP(4, 2, n_agents=3, centralized=False, share_params=False, num_cells=[8])
        >>> stateful = net.get_stateful_net()  # parameters stacked along a leading agent dimension
        >>> for p in stateful.parameters():
        ...     _ = torch.nn.init.zeros_(p)
        >>> _ = net.from_stateful_net(stateful)
        >>> net(torch.randn(5, 3, 4)).abs().sum().item()
        0.0
    """

    def __init__(
        self,
        *,
        n_agents: int,
        centralized: bool | None = None,
        share_params: bool | None = None,
        agent_dim: int | None = None,
        vmap_randomness: str = "different",
        use_td_params: bool = True,
        **kwargs,
    ) -> None:
        super().__init__()
        centralized = kwargs.pop("centralised", centralized)
        name = type(self).__name__
        for arg, value in (("centralized", centralized), ("share_params", share_params), ("agent_dim", agent_dim)):
            if value is None:
                raise TypeError(f"{name}: the {arg} argument must be passed (True/False, or an int for agent_dim).")
        self.n_agents = n_agents
        self.centralized = centralized
        self.share_params = share_params
        self.agent_dim = agent_dim
        self._vmap_randomness = vmap_randomness
        self.use_td_params = use_td_params
        nets = [self._build_single_net(**kwargs) for _ in range(1 if share_params else n_agents)]
        if share_params:
            self._shared_net = nets[0]
        elif any(_has_uninitialized(net) for net in nets):
            self._lazy_nets = nn.ModuleList(nets)
        else:
            self._stack(nets)

    # ------------------------------------------------------------------ to implement
    def _build_single_net(self, **kwargs) -> nn.Module:
        raise NotImplementedError(f"{type(self).__name__} must implement _build_single_net.")

    def _pre_forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement _pre_forward.")

    # ------------------------------------------------------------------ parameter storage
    def _stack(self, nets: Sequence[nn.Module]) -> None:
        """Stacks the agents' parameters (and buffers) along a new leading dimension."""
        stacked = TensorDict.from_modules(*nets, as_module=True)
        template = copy.deepcopy(nets[0]).to("meta")
        template.train(self.training)
        object.__setattr__(self, "_empty_net", template)  # not a submodule (it holds no tensors)
        self._plan = _linear_plan(template)
        if self.use_td_params:
            self._params = stacked
        else:
            holder = copy.deepcopy(template)
            stacked.to_module(holder)
            self._stacked_net = holder
        if "_lazy_nets" in self._modules:
            del self._modules["_lazy_nets"]

    @property
    def params(self) -> TensorDict:
        """The parameters: stacked along a leading agent dimension unless ``share_params``."""
        if self.share_params:
            return TensorDict.from_module(self._shared_net)
        self._check_initialized()
        return self._stacked_params()

    def _stacked_params(self) -> TensorDict:
        if self.use_td_params:
            return self._params
        return TensorDict.from_module(self._stacked_net).auto_batch_size_(batch_dims=1)

    def _check_initialized(self) -> None:
        if "_lazy_nets" in self._modules:
            raise RuntimeError(
                f"{type(self).__name__}: the parameters are lazy (n_agent_inputs / in_features is None); run one "
                "forward pass first."
            )

    @property
    def vmap_randomness(self) -> str:
        """The ``randomness`` argument given to ``torch.vmap``."""
        return self._vmap_randomness

    @staticmethod
    def vmap_func_module(module, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
        """``torch.vmap`` of ``f(params, *inputs)``, which calls ``module`` with the parameters ``params``.

        ``params`` is a ``TensorDict`` of the module's parameters and buffers (e.g. stacked ones).
        """

        def call(params, *inputs):
            with params.to_module(module):
                return module(*inputs)

        return torch.vmap(call, in_dims=in_dims, out_dims=out_dims, randomness=randomness, chunk_size=chunk_size)

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs: tuple[torch.Tensor]) -> torch.Tensor:
        x = self._pre_forward(*inputs)
        if self.share_params:
            out = self._shared_net(x)
            if self.centralized:
                out = out.unsqueeze(-2).expand(*out.shape[:-1], self.n_agents, out.shape[-1])
            return out
        if "_lazy_nets" in self._modules:
            self._initialize_lazy(x)
        params = self._stacked_params()
        if self._plan is not None:
            return self._batched_linear(params, x)
        in_dims = (0, None) if self.centralized else (0, self.agent_dim)
        fn = self.vmap_func_module(self._empty_net, in_dims=in_dims, out_dims=-2, randomness=self._vmap_randomness)
        return fn(params, x)

    def _batched_linear(self, params: TensorDict, x: torch.Tensor) -> torch.Tensor:
        """Evaluates the stacked MLP with batched matrix products: ``(n_agents, M, features)`` throughout."""
        n = self.n_agents
        if self.centralized:
            batch = x.shape[:-1]
            h = x.reshape(1, -1, x.shape[-1]).expand(n, -1, -1)
        else:
            batch = x.shape[:-2]
            h = x.movedim(-2, 0).reshape(n, -1, x.shape[-1])
        for step in self._plan:
            if step[0] == "linear":
                layer = params.get(step[1])
                weight = layer.get("weight").transpose(1, 2)
                if step[2]:
                    h = torch.baddbmm(layer.get("bias").unsqueeze(1), h, weight)
                else:
                    h = torch.bmm(h, weight)
            else:
                h = step[1](h)
        return h.reshape(n, *batch, h.shape[-1]).movedim(0, -2)

    def _initialize_lazy(self, x: torch.Tensor) -> None:
        """Runs each agent's lazy network once on its input so that its sizes are known, then stacks them."""
        nets = list(self._lazy_nets)
        with torch.no_grad():
            for i, net in enumerate(nets):
                net(x if self.centralized else x.select(self.agent_dim, i))
        self._stack(nets)

    def train(self, mode: bool = True):
        super().train(mode)
        template = self._empty_net
        if template is not None:  # not a registered submodule (it holds no tensors)
            template.train(mode)
        return self

    # ------------------------------------------------------------------ initialisation helpers
    def get_stateful_net(self, copy: bool = True):  # noqa: A002 - TorchRL's argument name
        """A network whose parameters are the (stacked) parameters of this one, e.g. for ``nn.init``.

        With ``copy=False`` the returned network shares storage with this one, so in-place initialisation
        applies directly; otherwise write it back with :meth:`from_stateful_net`.
        """
        if self.share_params:
            return _deepcopy(self._shared_net) if copy else self._shared_net
        self._check_initialized()
        net = _deepcopy(self._empty_net)
        params = self.params
        if copy:
            params = params.data.clone()
        params.to_module(net)
        return net

    def from_stateful_net(self, stateful_net: nn.Module):
        """Copies the parameters of ``stateful_net`` (as returned by :meth:`get_stateful_net`) into this one."""
        source = TensorDict.from_module(stateful_net)
        if self.share_params:
            TensorDict.from_module(self._shared_net).data.update_(source.data)
            return self
        self._check_initialized()
        self.params.data.update_(source.data)
        return self

    def reset_parameters(self):
        """Re-initialises every agent's network independently (``reset_parameters`` of each layer)."""
        if self.share_params:
            _reset_parameters_recursive(self._shared_net)
            return
        if "_lazy_nets" in self._modules:
            for net in self._lazy_nets:
                _reset_parameters_recursive(net)
            return
        params = self.params
        device = next(iter(params.values(True, True))).device
        for i in range(self.n_agents):
            net = _deepcopy(self._empty_net).to_empty(device=device)
            _reset_parameters_recursive(net)
            params.data[i].update_(TensorDict.from_module(net).data)

    def __repr__(self) -> str:
        net = self._shared_net if self.share_params else self._empty_net if "_lazy_nets" not in self._modules else \
            self._lazy_nets[0]
        body = repr(net).replace("\n", "\n    ")
        return (
            f"{type(self).__name__}(\n    {body},\n    n_agents={self.n_agents},\n    share_params={self.share_params},"
            f"\n    centralized={self.centralized},\n    agent_dim={self.agent_dim})"
        )


def _deepcopy(module: nn.Module) -> nn.Module:
    return copy.deepcopy(module)
