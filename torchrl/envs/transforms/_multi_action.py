"""``MultiAction``: the policy emits several actions per step; the env executes them one after the other."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._transform import Transform

__all__ = ["MultiAction"]


def _transforms_after(transform: Transform) -> list[Transform]:
    """The transforms that run after ``transform`` in its env's chain (through nested ``Compose``)."""
    container = transform.container
    if not isinstance(container, Transform):
        return []
    siblings = list(container.transforms)
    index = next(i for i, t in enumerate(siblings) if t is transform)
    return siblings[index + 1 :] + _transforms_after(container)


def _path(root: str, key: NestedKey) -> tuple:
    return (root, *((key,) if isinstance(key, str) else key))


def _rows(value: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """``value`` reduced to its batch dims with ``any`` (a row is done when any of its entries is)."""
    return value.reshape(*value.shape[:batch_dims], -1).any(-1)


def _like(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim)))


class MultiAction(Transform):
    """Executes a stack of actions, one env step each, as one (macro) step of the transformed env.

    The policy writes the actions stacked along a new dim (by default the first dim after the batch dims:
    ``(*batch, n, *action_shape)``); the env is stepped with each of them in order, feeding each step's
    outputs (observations, state) back as the next step's input. The macro step returns the last step's
    outputs, with the rewards stacked along the same dim (``stack_rewards=True``, the reward spec gains a
    dynamic ``-1`` dim) or the last reward only, and the observations stacked likewise when
    ``stack_observations=True``.

    When a done entry is set, the remaining actions are skipped: with every sub-env done, the stepping stops
    and the stacks end with one padding slot (reward zero, observations repeated), so their length is the
    number of executed steps plus one, as TorchRL; in a batched env where only some sub-envs are done,
    the base env keeps being stepped but the outputs of those sub-envs are frozen (their later rewards are
    zero and their observations and done flags stay those of the final step). With ``stack_rewards=False``
    the reward is that of each sub-env's last executed step.

    Transforms placed before this one in a ``Compose`` run on every inner step; those after it run once per
    macro step. Entries the policy writes next to the actions stay on the root of the macro step.

    Keyword Args:
        dim: where the actions are stacked, counted from the tensordict's batch dims (``1``: the first dim
            after them; must be ``> 0``).
        stack_rewards: stack the rewards of the inner steps (``True``) or keep the last one.
        stack_observations: stack the observations of the inner steps (``False``: keep the last one).
        action_key: the one-step action the base env reads (default: every action key of the parent env).
        chunk_key: where the policy writes the stacked actions (default: ``action_key``).

    Raises:
        ValueError: ``dim < 1``, or ``chunk_key`` given without ``action_key``.
        KeyError: (when the env's specs are built) ``action_key`` is not an action of the env.

    Examples:
        >>> import torch
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms._multi_action import MultiAction
        >>> env = TransformedEnv(PendulumEnv(seed=0), StepCounter())
        >>> env = env.append_transform(MultiAction())
        >>> td = env.reset().set("action", torch.zeros(4, 1))  # four actions in one step
        >>> out = env.step(td)
        >>> out["next", "step_count"].item(), out["next", "reward"].shape
        (4, torch.Size([4, 1]))
    """

    def __init__(
        self,
        *,
        dim: int = 1,
        stack_rewards: bool = True,
        stack_observations: bool = False,
        action_key: NestedKey | None = None,
        chunk_key: NestedKey | None = None,
    ):
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"MultiAction: dim must be an integer greater than 0 (counted after the batch dims), got {dim!r}.")
        if chunk_key is not None and action_key is None:
            raise ValueError("MultiAction: chunk_key needs an action_key (the one-step action the base env reads).")
        in_inv = [action_key] if action_key is not None else []
        out_inv = [chunk_key if chunk_key is not None else action_key] if action_key is not None else []
        super().__init__(in_keys_inv=in_inv, out_keys_inv=out_inv)
        self.dim = dim
        self.stack_rewards = bool(stack_rewards)
        self.stack_observations = bool(stack_observations)
        self._plan: tuple | None = None

    @classmethod
    def from_vla(cls, *, action_key: NestedKey = "action", **kwargs) -> MultiAction:
        """A ``MultiAction`` reading a VLA policy's action chunk at ``("vla_action", "chunk")``.

        Args are ``MultiAction``'s keyword arguments; ``action_key`` (default ``"action"``) is the base env's
        one-step action.
        """
        kwargs.setdefault("chunk_key", ("vla_action", "chunk"))
        return cls(action_key=action_key, **kwargs)

    def reset_parent(self) -> None:  # the chain changed: recompute the keys and the later inverses
        super().reset_parent()
        self._plan = None

    # -- keys ----------------------------------------------------------------------------------------------
    def _key_pairs_for(self, action_keys) -> list[tuple[NestedKey, NestedKey]]:
        """``(one-step action key, chunk key)`` pairs."""
        if self.in_keys_inv:
            return list(zip(self.in_keys_inv, self.out_keys_inv))
        return [(k, k) for k in action_keys]

    def _get_plan(self, parent) -> tuple:
        """``(key pairs, reward keys, done keys, observation keys, keys not fed back, later inverses)``."""
        plan = self._plan
        if plan is None:
            pairs = self._key_pairs_for(parent.action_keys)
            reward_keys = list(parent.reward_keys)
            done_keys = list(parent.done_keys)
            obs_keys = list(parent.full_observation_spec.keys(True, True))
            later = [t for t in _transforms_after(self) if t._has_inverse]
            plan = self._plan = (pairs, reward_keys, done_keys, obs_keys, reward_keys + done_keys, later)
        return plan

    def _stack_dim(self, batch_dims: int) -> int:
        return batch_dims + self.dim - 1

    # -- inverse: the first action goes through the normal step -------------------------------------------
    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        if self.in_keys_inv:
            pairs = self._key_pairs_for(())
        elif parent is not None:
            pairs = self._get_plan(parent)[0]
        else:
            return tensordict  # no env and no explicit key: nothing to unstack
        d = self._stack_dim(tensordict.batch_dims)
        for action_key, chunk_key in pairs:
            chunk = tensordict.get(chunk_key, None)
            if chunk is None:
                raise KeyError(
                    f"MultiAction: stacked actions {chunk_key!r} not found; available keys: "
                    f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            if chunk.ndim <= d:
                raise ValueError(
                    f"MultiAction: stacked actions {chunk_key!r} have shape {tuple(chunk.shape)}; expected the actions "
                    f"stacked along dim {d} (dim={self.dim} after {tensordict.batch_dims} batch dims)."
                )
            tensordict.set(action_key, chunk.select(d, 0))
        if self.stack_observations and parent is not None:  # the env reads the last of the stacked observations
            for key in self._get_plan(parent)[3]:
                value = tensordict.get(key, None)
                if value is not None and value.ndim > d:
                    tensordict.set(key, value.select(d, -1))
        return tensordict

    # -- step: the other actions, one parent step each ----------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        if parent is None:
            raise RuntimeError("MultiAction must be used inside a TransformedEnv.")
        pairs, reward_keys, done_keys, obs_keys, drop, later = self._get_plan(parent)
        source = tensordict
        if later:  # the step input as the parent sees it (inverses of the later transforms)
            source = tensordict.copy()
            for t in reversed(later):
                source = t._inv_call(source)
        bdims = next_tensordict.batch_dims
        d = self._stack_dim(bdims)
        chunks = [(key, source.get(chunk_key)) for key, chunk_key in pairs]
        n = chunks[0][1].shape[d] if chunks else 1
        root = source.exclude("next", *[c for _, c in pairs])

        rewards = {k: [next_tensordict.get(k)] for k in reward_keys}
        last_reward = {k: next_tensordict.get(k) for k in reward_keys}
        observations = {k: [next_tensordict.get(k)] for k in obs_keys} if self.stack_observations else {}
        done = self._done_rows(next_tensordict, done_keys, bdims)
        current = next_tensordict
        for i in range(1, n):
            if bool(done.all()):
                self._pad(rewards, observations, current)
                break
            step_input = root.copy().update(current.exclude(*drop))
            for key, chunk in chunks:
                step_input.set(key, chunk.select(d, i))
            new = parent._step_output(step_input)
            if bool(done.any()):  # sub-envs done earlier keep their final outputs; their rewards are zero
                for key in list(new.keys(True, True)):
                    old = current.get(key, None)
                    if old is not None and key not in reward_keys:
                        value = new.get(key)
                        new.set(key, torch.where(_like(done, value), old, value))
                for key in reward_keys:
                    value = new.get(key)
                    new.set(key, value.masked_fill(_like(done, value), 0))
            for key in reward_keys:
                value = new.get(key)
                rewards[key].append(value)
                last_reward[key] = torch.where(_like(done, value), last_reward[key], value)
            for key, values in observations.items():
                values.append(new.get(key))
            done = done | self._done_rows(new, done_keys, bdims)
            current = new
        for key in reward_keys:
            current.set(key, torch.stack(rewards[key], d) if self.stack_rewards else last_reward[key])
        for key, values in observations.items():
            current.set(key, torch.stack(values, d))
        return current

    @staticmethod
    def _done_rows(next_tensordict: TensorDictBase, done_keys: list, batch_dims: int) -> torch.Tensor:
        done = torch.zeros(next_tensordict.batch_size, dtype=torch.bool, device=next_tensordict.device)
        for key in done_keys:
            value = next_tensordict.get(key, None)
            if value is not None:
                done = done | _rows(value, batch_dims)
        return done

    @staticmethod
    def _pad(rewards: dict, observations: dict, current: TensorDictBase) -> None:
        """One slot for the skipped rest of the chunk: zero rewards, the last observations."""
        for values in rewards.values():
            values.append(torch.zeros_like(values[-1]))
        for key, values in observations.items():
            values.append(current.get(key))

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if not self.stack_observations:
            return tensordict_reset
        # the reset observations are stacked too (one slot), so the root entries match the spec
        parent = self.parent
        obs_keys = self._get_plan(parent)[3] if parent is not None else []
        d = self._stack_dim(tensordict_reset.batch_dims)
        for key in obs_keys:
            value = tensordict_reset.get(key, None)
            if value is not None:
                tensordict_reset.set(key, value.unsqueeze(d))
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "MultiAction steps the environment once per action; it cannot be applied to stored data. Use it "
            "inside a TransformedEnv."
        )

    # -- specs ---------------------------------------------------------------------------------------------
    @staticmethod
    def _refuse_group(root: Composite, key: NestedKey, what: str, batch_dims: int, remedy: str) -> None:
        """Refuses an entry inside a group (a sub-Composite with more batch dims than the env, e.g. agents):
        the stacking dim would have to sit inside the group's own batch dims."""
        key = (key,) if isinstance(key, str) else tuple(key)
        for i in range(1, len(key)):
            group = root.get(key[:i], None)
            if isinstance(group, Composite) and len(group.shape) > batch_dims:
                raise ValueError(
                    f"MultiAction: {what} {key!r} lies in the group {key[:i]!r} of batch shape "
                    f"{tuple(group.shape)} (the env's batch shape has {batch_dims} dims): the stacking dim would "
                    f"split the group's batch dims. MultiAction stacks only entries at the env's batch level; "
                    f"{remedy}"
                )

    def _stacked(self, spec: TensorSpec, batch_dims: int) -> TensorSpec:
        d = self._stack_dim(batch_dims)
        new = spec.unsqueeze(d)
        new.make_neg_dim(d)
        return new

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        bdims = len(input_spec.shape)
        actions = input_spec["full_action_spec"]
        if self.in_keys_inv:
            pairs = self._key_pairs_for(())
        else:
            pairs = [(k, k) for k in actions.keys(True, True)]
        for action_key, chunk_key in pairs:
            spec = actions.get(action_key, None)
            if spec is None:
                raise KeyError(
                    f"MultiAction: action key {action_key!r} not in the env's action spec "
                    f"{list(actions.keys(True, True))}."
                )
            for key in (action_key, chunk_key):
                self._refuse_group(actions, key, "action", bdims, "group actions are not supported.")
            if chunk_key != action_key:
                del input_spec[_path("full_action_spec", action_key)]
            input_spec[_path("full_action_spec", chunk_key)] = self._stacked(spec, bdims)
        return input_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        bdims = len(output_spec.shape)
        if self.stack_rewards:
            rewards = output_spec["full_reward_spec"]
            for key in list(rewards.keys(True, True)):
                self._refuse_group(rewards, key, "reward", bdims, "build it with stack_rewards=False.")
                rewards[key] = self._stacked(rewards[key], bdims)
        if self.stack_observations:
            observations = output_spec["full_observation_spec"]
            for key in list(observations.keys(True, True)):
                self._refuse_group(observations, key, "observation", bdims, "build it with stack_observations=False.")
                observations[key] = self._stacked(observations[key], bdims)
        return output_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(dim={self.dim}, stack_rewards={self.stack_rewards}, "
            f"stack_observations={self.stack_observations})"
        )
