"""``EndOfLifeTransform``: an ``end-of-life`` flag for games with several lives (Atari), read from the env."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, Unbounded
from torchrl.envs.transforms._transform import Transform

__all__ = ["EndOfLifeTransform"]


class EndOfLifeTransform(Transform):
    """Writes an ``end-of-life`` flag: set when the game lost a life or the episode ended.

    DeepMind's DQN treats the loss of a life as the end of an episode for value estimation (no bootstrap
    across a lost life) while the game itself goes on. After each step the transform reads the number of
    lives from the base env (the attribute path ``eol_attribute``, e.g. ``env.unwrapped.ale.lives()`` for
    Atari), compares it with the count of the previous step (``lives_key`` in the step's input) and writes
    ``end-of-life = (lives decreased) | done``. The lives count is written too (an ``int64`` observation of
    the env's batch shape); after a reset the flag is ``False``.

    The flag is an observation, not a done entry: it must not reset the env. Losses and value estimators
    read it in place of ``done``/``terminated`` (``loss.set_keys(done="end-of-life",
    terminated="end-of-life")``, or :meth:`register_keys`).

    Args:
        eol_key: where the end-of-life flag is written (same shape and dtype as ``done_key``).
        lives_key: where the lives count is written.
        done_key: the env's done entry OR-ed into the flag; it must be in the env's done spec.
        eol_attribute: dotted attribute path to the lives count from the base env. The value may be an
            integer, an array-like, a callable returning them, or (for a ``SerialEnv``) one of those per
            sub-env.

    Raises:
        KeyError: ``done_key`` is not a done entry of the env (when the transform is appended).
        AttributeError: the base env has no ``eol_attribute`` (at the first reset or step).
        RuntimeError: called outside an env (on stored data).

    Examples:
        >>> import torch
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl.envs.transforms import EndOfLifeTransform
        >>> from torchrl.testing import CountingEnv
        >>> class LivesEnv(CountingEnv):  # loses a life every second step, 3 lives
        ...     def lives(self):
        ...         return 3 - self.count.squeeze(-1).long() // 2
        >>> env = TransformedEnv(LivesEnv(max_steps=5), EndOfLifeTransform(eol_attribute="lives"))
        >>> data = env.rollout(10, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
        >>> data["next", "lives"].tolist()
        [3, 2, 2, 1, 1, 0]
        >>> data["next", "end-of-life"].squeeze(-1).tolist()
        [False, True, False, True, False, True]
    """

    def __init__(
        self,
        eol_key: NestedKey = "end-of-life",
        lives_key: NestedKey = "lives",
        done_key: NestedKey = "done",
        eol_attribute="unwrapped.ale.lives",
    ) -> None:
        if not isinstance(eol_attribute, str) or not eol_attribute:
            raise TypeError(
                f"EndOfLifeTransform: eol_attribute must be a dotted attribute path such as 'unwrapped.ale.lives', "
                f"got {eol_attribute!r}."
            )
        super().__init__(in_keys=[done_key], out_keys=[eol_key, lives_key])
        self.eol_key = eol_key
        self.lives_key = lives_key
        self.done_key = done_key
        self.eol_attribute = eol_attribute.split(".")

    # -- reading the env -------------------------------------------------------------------------------
    def _parent_or_raise(self):
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "EndOfLifeTransform reads the number of lives from its environment; it cannot be executed "
                "without a parent env. Use it inside a TransformedEnv."
            )
        return parent

    def _get_lives(self, parent) -> torch.Tensor:
        value: Any = parent.base_env
        path = ".".join(self.eol_attribute)
        for i, name in enumerate(self.eol_attribute):
            try:
                if isinstance(value, list):  # a SerialEnv's sub-env attributes, one per sub-env
                    value = [getattr(v, name) for v in value]
                else:
                    value = getattr(value, name)
            except AttributeError:
                reached = ".".join(self.eol_attribute[:i]) or "the base env"
                raise AttributeError(
                    f"EndOfLifeTransform: cannot read eol_attribute {path!r}: {reached} "
                    f"({type(value).__name__}) has no attribute {name!r}."
                ) from None
        if callable(value) and not isinstance(value, torch.Tensor):
            value = value()
        if isinstance(value, list):
            value = torch.stack(
                [torch.as_tensor(v() if callable(v) and not isinstance(v, torch.Tensor) else v) for v in value]
            )
        lives = torch.as_tensor(value, dtype=torch.int64, device=parent.device)
        batch = parent.batch_size
        if lives.numel() != batch.numel():
            raise RuntimeError(
                f"EndOfLifeTransform: eol_attribute {path!r} gave {lives.numel()} lives count(s) (shape "
                f"{tuple(lives.shape)}) for an env of batch size {tuple(batch)}."
            )
        return lives.reshape(batch)

    # -- data ------------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        parent = self._parent_or_raise()
        lives = self._get_lives(parent)
        done = next_tensordict.get(self.done_key, None)
        if done is None:
            raise KeyError(
                f"EndOfLifeTransform: done_key {self.done_key!r} not found in the step output; available keys: "
                f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        previous = tensordict.get(self.lives_key, None)
        if previous is None:  # no count from the previous step (data built by hand): no life lost
            lost = torch.zeros_like(lives, dtype=torch.bool)
        else:
            lost = previous.to(lives.device) > lives
        lost = lost.reshape(*lost.shape, *([1] * (done.ndim - lost.ndim))).expand(done.shape)
        next_tensordict.set(self.eol_key, lost | done)
        next_tensordict.set(self.lives_key, lives)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        parent = self._parent_or_raise()
        lives = self._get_lives(parent)
        shape = parent.output_spec["full_done_spec"][self.done_key].shape
        tensordict_reset.set(self.eol_key, torch.zeros(shape, dtype=torch.bool, device=lives.device))
        tensordict_reset.set(self.lives_key, lives)
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "EndOfLifeTransform reads the number of lives from its environment; it cannot be applied to stored "
            "data. Use it inside a TransformedEnv."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    # -- specs -----------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        full_done = output_spec["full_done_spec"]
        if self.done_key not in full_done.keys(include_nested=True, leaves_only=True):
            raise KeyError(
                f"EndOfLifeTransform: done_key {self.done_key!r} is not a done entry of the env; its done entries "
                f"are {sorted(map(str, full_done.keys(include_nested=True, leaves_only=True)))}."
            )
        obs = output_spec["full_observation_spec"]
        obs[self.eol_key] = full_done[self.done_key].clone()
        batch = output_spec.shape
        obs[self.lives_key] = Unbounded(batch, dtype=torch.int64, device=obs.device)
        return output_spec

    def transform_observation_spec(self, observation_spec):
        """The observation spec with the flag and the count (uses the parent env's done spec)."""
        parent = self._parent_or_raise()
        observation_spec[self.eol_key] = parent.output_spec["full_done_spec"][self.done_key].clone()
        observation_spec[self.lives_key] = Unbounded(parent.batch_size, dtype=torch.int64, device=parent.device)
        return observation_spec

    # -- losses ----------------------------------------------------------------------------------------
    def register_keys(self, loss_or_advantage) -> None:
        """Makes a loss module or a value estimator read ``eol_key`` as its ``done`` and ``terminated``.

        Equivalent to ``loss_or_advantage.set_keys(done=eol_key, terminated=eol_key)`` (a loss forwards
        the keys to its value estimator).
        """
        set_keys = getattr(loss_or_advantage, "set_keys", None)
        if set_keys is None:
            raise TypeError(
                f"EndOfLifeTransform.register_keys expects a LossModule or a value estimator (with set_keys), "
                f"got {type(loss_or_advantage).__name__}."
            )
        set_keys(done=self.eol_key, terminated=self.eol_key)

    def __repr__(self) -> str:
        return (
            f"EndOfLifeTransform(eol_key={self.eol_key!r}, lives_key={self.lives_key!r}, "
            f"done_key={self.done_key!r}, eol_attribute={'.'.join(self.eol_attribute)!r})"
        )
