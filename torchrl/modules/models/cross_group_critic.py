"""``CrossGroupCritic``: a centralised critic over several agent groups (MAPPO-style, Yu et al., 2022)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn

from torchrl.modules.models._mlp import MLP

__all__ = ["CrossCriticGroupSpec", "CrossGroupCritic"]


@dataclasses.dataclass
class CrossCriticGroupSpec:
    """One agent group of a :class:`CrossGroupCritic`.

    Args:
        obs_dim (int): size of each agent's observation.
        n_agents (int): number of agents in the group.
        obs_key (NestedKey): where the group's observations ``(*B, n_agents, obs_dim)`` are read.
        value_key (NestedKey): where the group's values ``(*B, n_agents, 1)`` are written.
    """

    obs_dim: int
    n_agents: int
    obs_key: NestedKey
    value_key: NestedKey


class _CrossGroupNet(nn.Module):
    def __init__(self, specs: list[CrossCriticGroupSpec], names: list[str], d_model, trunk_depth, trunk_cells,
                 activation_class, share_params, detach, device):
        super().__init__()
        self.specs = specs
        self.detach = [name in detach for name in names]
        self.encoders = nn.ModuleList(nn.Linear(s.obs_dim, d_model, device=device) for s in specs)
        team = sum(s.n_agents for s in specs) * d_model
        self.trunk = MLP(in_features=team, out_features=trunk_cells, depth=max(trunk_depth - 1, 0),
                         num_cells=trunk_cells, activation_class=activation_class, activate_last_layer=True,
                         device=device)
        n_heads = 1 if share_params else len(specs)
        self.heads = nn.ModuleList(nn.Linear(trunk_cells + d_model, 1, device=device) for _ in range(n_heads))

    def forward(self, *observations: torch.Tensor) -> tuple[torch.Tensor, ...]:
        embeddings = []
        for spec, encoder, detach, obs in zip(self.specs, self.encoders, self.detach, observations):
            if obs.shape[-2:] != (spec.n_agents, spec.obs_dim):
                raise ValueError(
                    f"CrossGroupCritic: observations at {spec.obs_key!r} must end with (n_agents={spec.n_agents}, "
                    f"obs_dim={spec.obs_dim}), got shape {tuple(obs.shape)}."
                )
            emb = encoder(obs)
            embeddings.append(emb.detach() if detach else emb)
        team = self.trunk(torch.cat([e.flatten(-2) for e in embeddings], -1))
        values = []
        for i, emb in enumerate(embeddings):
            head = self.heads[0 if len(self.heads) == 1 else i]
            shared = team.unsqueeze(-2).expand(*team.shape[:-1], emb.shape[-2], team.shape[-1])
            values.append(head(torch.cat([shared, emb], -1)))
        return tuple(values)


class CrossGroupCritic(TensorDictModule):
    """A centralised critic that reads the observations of several agent groups and values every agent.

    Each group has its own encoder ``Linear(obs_dim, d_model)`` (groups may have different observation
    sizes). The embeddings of all agents of all groups are concatenated into a team state and passed
    through a shared MLP trunk (``trunk_depth`` layers of ``trunk_cells``). Agent ``i`` of a group gets
    the value ``head(cat(trunk_output, embedding_i))``, written at the group's ``value_key`` with shape
    ``(*B, n_agents, 1)``. Groups named in ``detach_groups`` (e.g. agents with a fixed policy) inform the
    team state, but no gradient flows into their encoder. Being a ``TensorDictModule``, it can be used as
    the critic of a PPO-style loss directly.

    Args:
        group_map (dict[str, CrossCriticGroupSpec]): the groups, in order.

    Keyword Args:
        d_model (int, optional): embedding size per agent. Defaults to ``64``.
        trunk_depth (int, optional): number of trunk layers. Defaults to ``2``.
        trunk_cells (int, optional): trunk width. Defaults to ``256``.
        activation_class (type, optional): trunk activation. Defaults to ``nn.Tanh``.
        share_params (bool, optional): one value head for all groups instead of one per group.
            Defaults to ``False``.
        detach_groups (iterable of str, optional): groups whose embeddings are detached.
        device (torch.device, optional): device of the parameters.

    Raises:
        ValueError: if ``group_map`` is empty or ``detach_groups`` names an unknown group; in ``forward``,
            if a group's observations do not end with ``(n_agents, obs_dim)``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules.models import CrossCriticGroupSpec, CrossGroupCritic
        >>> critic = CrossGroupCritic({
        ...     "red": CrossCriticGroupSpec(4, 2, ("red", "observation"), ("red", "state_value")),
        ...     "blue": CrossCriticGroupSpec(6, 3, ("blue", "observation"), ("blue", "state_value")),
        ... }, d_model=8, trunk_cells=16)
        >>> td = TensorDict({"red": {"observation": torch.randn(5, 2, 4)},
        ...                  "blue": {"observation": torch.randn(5, 3, 6)}}, [5])
        >>> critic(td)["blue", "state_value"].shape
        torch.Size([5, 3, 1])
    """

    def __init__(
        self,
        group_map: dict[str, CrossCriticGroupSpec],
        *,
        d_model: int = 64,
        trunk_depth: int = 2,
        trunk_cells: int = 256,
        activation_class: type[nn.Module] = nn.Tanh,
        share_params: bool = False,
        detach_groups: Iterable[str] | None = None,
        device=None,
    ) -> None:
        if not group_map:
            raise ValueError("CrossGroupCritic: group_map must contain at least one group.")
        names = list(group_map)
        detach = set(detach_groups or ())
        unknown = detach - set(names)
        if unknown:
            raise ValueError(f"CrossGroupCritic: detach_groups {sorted(unknown)} are not in group_map {names}.")
        specs = [group_map[name] for name in names]
        net = _CrossGroupNet(specs, names, d_model, trunk_depth, trunk_cells, activation_class, share_params, detach,
                             device)
        super().__init__(net, in_keys=[s.obs_key for s in specs], out_keys=[s.value_key for s in specs])
        self.group_map = dict(group_map)
