"""Dreamer (v1) world-model networks: encoder, decoder, RSSM prior/posterior, their rollout, and the actor.

References: Hafner et al., "Learning Latent Dynamics for Planning from Pixels" (RSSM,
https://arxiv.org/abs/1811.04551) and "Dream to Control" (Dreamer, https://arxiv.org/abs/1912.01603).
Image networks take any number of leading batch dimensions (folded into one for the convolutions).
"""
from __future__ import annotations

import torch
from tensordict.nn import dispatch, NormalParamExtractor, TensorDictModuleBase
from torch import nn

from torchrl._utils._deprecation import warn_once
from torchrl.modules.models._mlp import MLP

__all__ = ["DreamerActor", "ObsEncoder", "ObsDecoder", "RSSMPrior", "RSSMPosterior", "RSSMRollout"]


def _channels(channels: int, depth: int | None, owner: str) -> int:
    if depth is not None:
        warn_once(f"{owner}: the depth argument is deprecated; use channels instead.")
        return depth
    return channels


def _linear(in_features: int | None, out_features: int, device) -> nn.Module:
    if in_features is None:
        return nn.LazyLinear(out_features, device=device)
    return nn.Linear(in_features, out_features, device=device)


def _flat_batch(x: torch.Tensor, core: int) -> tuple[torch.Tensor, torch.Size]:
    batch = x.shape[:-core] if core else x.shape
    return x.reshape(-1, *x.shape[x.ndim - core:]), batch


class DreamerActor(nn.Module):
    """Dreamer's actor: an MLP on ``cat(state, belief)`` giving the ``(loc, scale)`` of the action distribution.

    The scale is ``softplus(x + b) `` shifted so that ``x = 0`` maps to ``std_bias``, bounded below by
    ``std_min_val`` (the ``"biased_softplus_{std_bias}_{std_min_val}"`` mapping).

    Args:
        out_features (int): action size.
        depth (int, optional): hidden layers. Defaults to ``4``.
        num_cells (int, optional): hidden units per layer. Defaults to ``200``.
        activation_class (type, optional): activation. Defaults to ``nn.ELU``.
        std_bias (float, optional): scale at a zero network output. Defaults to ``5.0``.
        std_min_val (float, optional): lower bound of the scale. Defaults to ``1e-4``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DreamerActor
        >>> loc, scale = DreamerActor(2)(torch.randn(5, 30), torch.randn(5, 200))
        >>> loc.shape, bool((scale >= 1e-4).all())
        (torch.Size([5, 2]), True)
    """

    def __init__(
        self, out_features, depth=4, num_cells=200, activation_class=nn.ELU, std_bias=5.0, std_min_val=1e-4,
        device=None,
    ):
        super().__init__()
        self.backbone = MLP(out_features=2 * out_features, depth=depth, num_cells=num_cells,
                            activation_class=activation_class, device=device)
        self.backbone.append(NormalParamExtractor(scale_mapping=f"biased_softplus_{std_bias}_{std_min_val}"))

    def forward(self, state, belief):
        return self.backbone(state, belief)


class ObsEncoder(nn.Module):
    """Encodes pixel observations: ``num_layers`` convolutions (kernel 4, stride 2, ReLU), doubling the channels.

    A ``3 x 64 x 64`` image gives ``8 * channels * 2 * 2`` features (1024 with the defaults).

    Args:
        channels (int, optional): channels of the first convolution. Defaults to ``32``.
        num_layers (int, optional): number of convolutions. Defaults to ``4``.
        in_channels (int, optional): input channels; ``None`` infers them. Defaults to ``None``.
        depth (int, optional): deprecated name of ``channels``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import ObsEncoder
        >>> ObsEncoder()(torch.randn(2, 7, 3, 64, 64)).shape
        torch.Size([2, 7, 1024])
    """

    def __init__(self, channels=32, num_layers=4, in_channels=None, depth=None, device=None):
        super().__init__()
        channels = _channels(channels, depth, "ObsEncoder")
        layers: list[nn.Module] = []
        c_in = in_channels
        for i in range(num_layers):
            c_out = channels * 2**i
            conv = nn.LazyConv2d(c_out, 4, stride=2, device=device) if c_in is None else nn.Conv2d(
                c_in, c_out, 4, stride=2, device=device
            )
            layers += [conv, nn.ReLU()]
            c_in = c_out
        self.encoder = nn.Sequential(*layers)

    def forward(self, observation):
        x, batch = _flat_batch(observation, 3)
        return self.encoder(x).flatten(1).reshape(*batch, -1)


class ObsDecoder(nn.Module):
    """Decodes ``cat(state, rnn_hidden)`` into an image with transposed convolutions (stride 2, ReLU between).

    A linear layer maps the latent to ``channels * 2**(num_layers + 1)`` features seen as a ``1 x 1`` image;
    the transposed convolutions halve the channels down to ``channels``, then ``out_channels``. With the
    defaults the output is ``3 x 64 x 64``.

    Args:
        channels (int, optional): channels of the last hidden layer. Defaults to ``32``.
        num_layers (int, optional): number of transposed convolutions. Defaults to ``4``.
        kernel_sizes (int or list of int, optional): kernel sizes. Defaults to ``[5, 5, 6, 6]`` for 4
            layers, else ``[5] * num_layers``.
        latent_dim (int, optional): size of ``cat(state, rnn_hidden)``; ``None`` infers it.
        out_channels (int, optional): channels of the image. Defaults to ``3``.
        depth (int, optional): deprecated name of ``channels``.
        device (torch.device, optional): device of the parameters.

    Raises:
        ValueError: if ``kernel_sizes`` does not have ``num_layers`` entries.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import ObsDecoder
        >>> ObsDecoder()(torch.randn(2, 5, 30), torch.randn(2, 5, 200)).shape
        torch.Size([2, 5, 3, 64, 64])
    """

    def __init__(self, channels=32, num_layers=4, kernel_sizes=None, latent_dim=None, out_channels=3, depth=None,
                 device=None):
        super().__init__()
        channels = _channels(channels, depth, "ObsDecoder")
        if kernel_sizes is None:
            kernel_sizes = [5, 5, 6, 6] if num_layers == 4 else [5] * num_layers
        elif isinstance(kernel_sizes, int):
            kernel_sizes = [kernel_sizes] * num_layers
        if len(kernel_sizes) != num_layers:
            raise ValueError(f"ObsDecoder: kernel_sizes has {len(kernel_sizes)} entries, expected {num_layers}.")
        latent = channels * 2 ** (num_layers + 1)
        self.state_to_latent = nn.Sequential(_linear(latent_dim, latent, device), nn.ReLU())
        layers: list[nn.Module] = []
        c_in = latent
        for i, kernel in enumerate(kernel_sizes):
            last = i == num_layers - 1
            c_out = out_channels if last else channels * 2 ** (num_layers - 2 - i)
            layers.append(nn.ConvTranspose2d(c_in, c_out, kernel, stride=2, device=device))
            if not last:
                layers.append(nn.ReLU())
            c_in = c_out
        self.decoder = nn.Sequential(*layers)

    def forward(self, state, rnn_hidden):
        latent = self.state_to_latent(torch.cat([state, rnn_hidden], -1))
        x, batch = _flat_batch(latent, 1)
        image = self.decoder(x[..., None, None])
        return image.reshape(*batch, *image.shape[1:])


class RSSMPrior(nn.Module):
    """RSSM prior: from ``(state, belief, action)`` to the next belief and a prior over the next state.

    ``belief' = GRUCell(ELU(Linear(cat(state, action))), belief)``; an MLP on ``belief'`` gives the prior's
    ``(mean, std)`` (softplus scale, at least ``scale_lb``) and ``state' = mean + std * noise``.

    Args:
        action_spec (TensorSpec): the action spec (its last dimension is the action size, unless
            ``action_dim`` is given).
        hidden_dim (int, optional): width of the projections. Defaults to ``200``.
        rnn_hidden_dim (int, optional): size of the belief. Defaults to ``200``.
        state_dim (int, optional): size of the stochastic state. Defaults to ``30``.
        scale_lb (float, optional): lower bound of the std. Defaults to ``0.1``.
        action_dim (int, optional): action size; with ``state_dim`` it fixes the input size of the first
            layer (otherwise it is inferred).
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import RSSMPrior
        >>> prior = RSSMPrior(None, action_dim=2, hidden_dim=16, rnn_hidden_dim=8, state_dim=4)
        >>> mean, std, state, belief = prior(torch.randn(5, 4), torch.randn(5, 8), torch.randn(5, 2))
        >>> state.shape, belief.shape
        (torch.Size([5, 4]), torch.Size([5, 8]))
    """

    def __init__(self, action_spec, hidden_dim=200, rnn_hidden_dim=200, state_dim=30, scale_lb=0.1, action_dim=None,
                 device=None):
        super().__init__()
        if action_dim is None and action_spec is not None:
            action_dim = action_spec.shape[-1]
        in_features = state_dim + action_dim if action_dim is not None else None
        self.action_shape = (action_dim,) if action_dim is not None else None
        self.state_dim = state_dim
        self.rnn_hidden_dim = rnn_hidden_dim
        self.action_state_projector = nn.Sequential(_linear(in_features, hidden_dim, device), nn.ELU())
        self.rnn = nn.GRUCell(hidden_dim, rnn_hidden_dim, device=device)
        self.rnn_to_prior_projector = nn.Sequential(
            nn.Linear(rnn_hidden_dim, hidden_dim, device=device),
            nn.ELU(),
            nn.Linear(hidden_dim, 2 * state_dim, device=device),
            NormalParamExtractor(scale_lb=scale_lb, scale_mapping="softplus"),
        )

    def forward(self, state, belief, action, noise=None):
        projected = self.action_state_projector(torch.cat([state, action], -1))
        flat, batch = _flat_batch(projected, 1)
        belief = self.rnn(flat, belief.reshape(-1, belief.shape[-1])).reshape(*batch, -1)
        mean, std = self.rnn_to_prior_projector(belief)
        if noise is None:
            noise = torch.randn_like(mean)
        return mean, std, mean + std * noise, belief


class RSSMPosterior(nn.Module):
    """RSSM posterior: ``(mean, std, state)`` of the state given the belief and the encoded observation.

    Args:
        hidden_dim (int, optional): width of the hidden layer. Defaults to ``200``.
        state_dim (int, optional): size of the state. Defaults to ``30``.
        scale_lb (float, optional): lower bound of the std. Defaults to ``0.1``.
        rnn_hidden_dim (int, optional): size of the belief; with ``obs_embed_dim`` it fixes the input size.
        obs_embed_dim (int, optional): size of the encoded observation.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import RSSMPosterior
        >>> mean, std, state = RSSMPosterior(hidden_dim=16, state_dim=4)(torch.randn(3, 8), torch.randn(3, 10))
        >>> state.shape
        torch.Size([3, 4])
    """

    def __init__(self, hidden_dim=200, state_dim=30, scale_lb=0.1, rnn_hidden_dim=None, obs_embed_dim=None,
                 device=None):
        super().__init__()
        in_features = rnn_hidden_dim + obs_embed_dim if rnn_hidden_dim is not None and obs_embed_dim is not None else None
        self.state_dim = state_dim
        self.obs_rnn_to_post_projector = nn.Sequential(
            _linear(in_features, hidden_dim, device),
            nn.ELU(),
            nn.Linear(hidden_dim, 2 * state_dim, device=device),
            NormalParamExtractor(scale_lb=scale_lb, scale_mapping="softplus"),
        )

    def forward(self, belief, obs_embedding, noise=None):
        mean, std = self.obs_rnn_to_post_projector(torch.cat([belief, obs_embedding], -1))
        if noise is None:
            noise = torch.randn_like(mean)
        return mean, std, mean + std * noise


class RSSMRollout(TensorDictModuleBase):
    """Runs an RSSM prior then posterior (TensorDict modules) over the last (time) dimension of a tensordict.

    At every step ``t > 0`` the entries ``("next", key)`` written at step ``t - 1`` are copied to ``key``
    for every ``key`` the prior reads (typically ``"state"`` and ``"belief"``), as ``step_mdp`` would. The
    per-step outputs are stacked along time and written into the input tensordict.

    Args:
        rssm_prior (TensorDictModule): the prior (e.g. wrapping :class:`RSSMPrior`).
        rssm_posterior (TensorDictModule): the posterior (e.g. wrapping :class:`RSSMPosterior`).
        use_scan (bool, optional): accepted for compatibility; the loop is always unrolled in Python.
            Defaults to ``False``.
        compile_step (bool, optional): ``torch.compile`` the per-step function. Defaults to ``False``.
        compile_backend (str, optional): backend for ``compile_step``. Defaults to ``"inductor"``.
        compile_mode (str, optional): mode for ``compile_step``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules.models import RSSMPosterior, RSSMPrior, RSSMRollout
        >>> prior = TensorDictModule(
        ...     RSSMPrior(None, action_dim=2, hidden_dim=8, rnn_hidden_dim=8, state_dim=4),
        ...     in_keys=["state", "belief", "action"],
        ...     out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")])
        >>> posterior = TensorDictModule(
        ...     RSSMPosterior(hidden_dim=8, state_dim=4),
        ...     in_keys=[("next", "belief"), ("next", "encoded_latents")],
        ...     out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")])
        >>> td = TensorDict({"state": torch.zeros(3, 5, 4), "belief": torch.zeros(3, 5, 8),
        ...                  "action": torch.randn(3, 5, 2),
        ...                  "next": {"encoded_latents": torch.randn(3, 5, 6)}}, [3, 5])
        >>> RSSMRollout(prior, posterior)(td)["next", "state"].shape
        torch.Size([3, 5, 4])
    """

    def __init__(self, rssm_prior, rssm_posterior, use_scan: bool = False, compile_step: bool = False,
                 compile_backend: str = "inductor", compile_mode: str | None = None):
        super().__init__()
        self.rssm_prior = rssm_prior
        self.rssm_posterior = rssm_posterior
        self.use_scan = use_scan
        out_keys = list(rssm_prior.out_keys) + list(rssm_posterior.out_keys)
        self.in_keys = [k for k in list(rssm_prior.in_keys) + list(rssm_posterior.in_keys) if k not in out_keys]
        self.out_keys = out_keys
        self._carried = [k for k in rssm_prior.in_keys if ("next", *((k,) if isinstance(k, str) else k)) in out_keys]
        self._step = self._run_step
        if compile_step:
            self._step = torch.compile(self._run_step, backend=compile_backend, mode=compile_mode)

    def _run_step(self, td):
        return self.rssm_posterior(self.rssm_prior(td))

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict):
        steps = tensordict.shape[-1]
        outputs = []
        for t in range(steps):
            td_t = tensordict[..., t].clone(False)
            if outputs:
                prev = outputs[-1]
                for key in self._carried:
                    td_t.set(key, prev.get(("next", *((key,) if isinstance(key, str) else key))))
            outputs.append(self._step(td_t))
        stacked = torch.stack(outputs, tensordict.ndim - 1)
        tensordict.update(stacked.select(*self.out_keys, *self._carried, strict=False))
        return tensordict
