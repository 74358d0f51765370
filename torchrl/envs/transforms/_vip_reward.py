"""``VIPRewardTransform``: rewards from VIP embeddings, the per-step decrease of the distance to a goal image."""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._vip import VIPTransform

__all__ = ["VIPRewardTransform"]

_GOAL_IMAGE = "goal_image"
_GOAL_EMBEDDING = "goal_embedding"


class VIPRewardTransform(VIPTransform):
    """A ``VIPTransform`` that also replaces the reward by VIP's goal-reaching reward.

    With ``e_t`` the embedding of the observation and ``g`` that of the goal image, the reward of the step
    ``t -> t+1`` is ``||e_t - g|| - ||e_{t+1} - g||`` (how much closer to the goal, in embedding space the
    step went; VIP paper, eq. 7), written under the env's reward key in the shape of its reward spec.

    The goal is embedded at reset from a ``"goal_image"`` entry (raw pixels, like the ``in_keys``), looked
    for in the reset's input (``env.reset(TensorDict(goal_image=...))``) and, if absent there, in the reset's
    output (an env that emits its goal image). The embedding is kept under ``"goal_embedding"`` (an
    observation entry of shape ``(..., 1024)``) and carried from step to step; a reset whose input already
    holds a ``"goal_embedding"`` (and no new goal image) keeps it.

    Same arguments as :class:`VIPTransform`.

    Raises:
        KeyError: (at reset) no ``"goal_image"`` nor ``"goal_embedding"`` in the reset input or output.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import VIPRewardTransform
        >>> from torchrl.envs.transforms._backbones import resnet
        >>> folder = tempfile.mkdtemp()  # a checkpoint in VIP's layout, made here for the example
        >>> net = resnet("resnet50")
        >>> net.fc = torch.nn.Linear(2048, 1024)
        >>> torch.save({"vip": {"module.convnet." + k: v for k, v in net.state_dict().items()}}, folder + "/model.pt")
        >>> t = VIPRewardTransform("resnet50", size=32, download_path=folder)
        >>> img = torch.randint(0, 256, (32, 32, 3), dtype=torch.uint8)
        >>> reset = t._reset(TensorDict(goal_image=img), TensorDict(pixels=img, reward=torch.zeros(1)))
        >>> reset["goal_embedding"].shape
        torch.Size([1024])
        >>> nxt = t._step(reset, TensorDict(pixels=img, reward=torch.zeros(1)))
        >>> nxt["reward"]  # same image as before: no progress
        tensor([0.])
    """

    def _reward_key(self):
        parent = self.parent
        return parent.reward_key if parent is not None else "reward"

    def _embed_goal(self, goal_image: torch.Tensor, batch_size) -> torch.Tensor:
        td = TensorDict({k: goal_image for k in self.in_keys}, batch_size=batch_size)
        return self._sequence[-1]._call(td).get(self.out_keys[0])

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        goal = None
        for source in (tensordict, tensordict_reset):
            if source is not None and source.get(_GOAL_IMAGE, None) is not None:
                goal = self._embed_goal(source.get(_GOAL_IMAGE), source.batch_size)
                break
        if goal is None and tensordict is not None:
            goal = tensordict.get(_GOAL_EMBEDDING, None)
        if goal is None:
            raise KeyError(
                f"VIPRewardTransform: reset needs a {_GOAL_IMAGE!r} entry (the goal's pixels) in the reset input, "
                f"e.g. env.reset(TensorDict({_GOAL_IMAGE}=image, batch_size=env.batch_size)), or in the env's reset "
                f"output; found neither it nor a {_GOAL_EMBEDDING!r}."
            )
        tensordict_reset = super()._reset(tensordict, tensordict_reset)
        tensordict_reset.set(_GOAL_EMBEDDING, goal)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        last = tensordict.get(self.out_keys[0], None)
        goal = tensordict.get(_GOAL_EMBEDDING, None)
        next_tensordict = super()._step(tensordict, next_tensordict)
        if goal is None:
            if next_tensordict.get(_GOAL_IMAGE, None) is None:
                raise KeyError(
                    f"VIPRewardTransform: step input has no {_GOAL_EMBEDDING!r}; reset the env with a "
                    f"{_GOAL_IMAGE!r} entry first."
                )
            goal = self._embed_goal(next_tensordict.get(_GOAL_IMAGE), next_tensordict.batch_size)
        next_tensordict.set(_GOAL_EMBEDDING, goal)
        if last is not None:
            current = next_tensordict.get(self.out_keys[0])
            reward = torch.linalg.vector_norm(last - goal, dim=-1) - torch.linalg.vector_norm(current - goal, dim=-1)
            key = self._reward_key()
            old = next_tensordict.get(key, None)
            if old is not None:
                reward = reward.reshape(old.shape).to(old.dtype)
            next_tensordict.set(key, reward)
        return next_tensordict

    def forward(self, tensordict):
        """Embeds the images of ``tensordict`` (outside an env; no reward is computed there)."""
        return super().forward(tensordict)

    def _add_goal_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if isinstance(observation_spec, Composite) and self.out_keys[0] in observation_spec.keys(True, True):
            emb = observation_spec[self.out_keys[0]]
            observation_spec[_GOAL_EMBEDDING] = Unbounded(shape=emb.shape, device=emb.device, dtype=emb.dtype)
        return observation_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._add_goal_spec(super().transform_observation_spec(observation_spec))

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        output_spec = super().transform_output_spec(output_spec)
        output_spec["full_observation_spec"] = self._add_goal_spec(output_spec["full_observation_spec"])
        return output_spec

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        """The inputs are unchanged: the goal image is read at reset, not declared as a state entry (an env
        would then require it at every step)."""
        return super().transform_input_spec(input_spec)
