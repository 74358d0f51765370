"""World models: ``WorldModelWrapper`` (transition + reward) and the composable ``WorldModel``."""
from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential

__all__ = ["WorldModel", "WorldModelWrapper"]


class WorldModelWrapper(TensorDictSequential):
    """A transition model followed by a reward model.

    Args:
        transition_model (TensorDictModule): predicts the next (latent) state.
        reward_model (TensorDictModule): predicts the reward of that transition.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import WorldModelWrapper
        >>> transition = TensorDictModule(torch.nn.Linear(4, 3), in_keys=["obs"], out_keys=["state"])
        >>> reward = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["state"], out_keys=["reward"])
        >>> model = WorldModelWrapper(transition, reward)
        >>> model(TensorDict(obs=torch.randn(4)))["reward"].shape
        torch.Size([1])
        >>> model.get_reward_operator() is reward
        True
    """

    def __init__(self, transition_model: TensorDictModule, reward_model: TensorDictModule) -> None:
        super().__init__(transition_model, reward_model)

    def get_transition_model_operator(self) -> TensorDictModule:
        """The transition model (observation or state -> next state)."""
        return self.module[0]

    def get_reward_operator(self) -> TensorDictModule:
        """The reward model (state -> reward)."""
        return self.module[1]


class WorldModel(TensorDictModuleBase):
    """Encoder, dynamics and prediction heads of a model-based agent, in one key-driven module.

    Calling it encodes the observation, advances the latent state with the action and predicts the
    reward (and ``done`` / a reconstruction when those heads are given). :meth:`encode`, :meth:`step`
    and :meth:`decode` run the parts alone, e.g. to imagine trajectories from latent states.

    Args:
        encoder (TensorDictModule): observation -> latent.
        dynamics (TensorDictModule): (latent, action) -> next latent.
        reward_head (TensorDictModule): next latent -> reward.

    Keyword Args:
        done_head (TensorDictModule, optional): next latent -> done.
        decoder (TensorDictModule, optional): latent -> reconstructed observation.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, WorldModel
        >>> encoder = TensorDictModule(torch.nn.Linear(3, 8), in_keys=["observation"], out_keys=["latent"])
        >>> dynamics = TensorDictModule(MLP(in_features=9, out_features=8, num_cells=[]),
        ...                             in_keys=["latent", "action"], out_keys=[("next", "latent")])
        >>> reward = TensorDictModule(torch.nn.Linear(8, 1), in_keys=[("next", "latent")], out_keys=[("next", "reward")])
        >>> model = WorldModel(encoder, dynamics, reward)
        >>> td = model(TensorDict(observation=torch.randn(5, 3), action=torch.randn(5, 1), batch_size=[5]))
        >>> td["next", "reward"].shape
        torch.Size([5, 1])
    """

    def __init__(
        self,
        encoder: TensorDictModule,
        dynamics: TensorDictModule,
        reward_head: TensorDictModule,
        *,
        done_head: TensorDictModule | None = None,
        decoder: TensorDictModule | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.dynamics = dynamics
        self.reward_head = reward_head
        self.done_head = done_head
        self.decoder = decoder
        heads = [dynamics, reward_head] + ([done_head] if done_head is not None else [])
        parts = [encoder, *heads] + ([decoder] if decoder is not None else [])
        # kept out of ``_modules``: they only reorder the submodules above (no duplicate state-dict entries)
        object.__setattr__(self, "_step_module", TensorDictSequential(*heads))
        object.__setattr__(self, "_full", TensorDictSequential(*parts))
        self.in_keys = self._full.in_keys
        self.out_keys = self._full.out_keys

    @property
    def step_module(self) -> TensorDictSequential:
        """``dynamics -> reward_head (-> done_head)`` as one module (latent, action -> next latent, reward)."""
        return self._step_module

    def encode(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs the encoder (observation -> latent)."""
        return self.encoder(tensordict)

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Advances the latent state and predicts reward (and done) for the action in ``tensordict``."""
        return self._step_module(tensordict)

    def decode(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs the decoder (latent -> observation).

        Raises:
            RuntimeError: the model was built without a decoder.
        """
        if self.decoder is None:
            raise RuntimeError("WorldModel.decode: this world model has no decoder; pass decoder=... at construction.")
        return self.decoder(tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._full(tensordict)
