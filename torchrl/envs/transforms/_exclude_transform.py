"""``ExcludeTransform``: drops entries from an environment's outputs (or, with ``inverse=True``, inputs)."""
from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["ExcludeTransform"]

_OUTPUT_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")


class _KeyArgumentError(TypeError, RuntimeError):
    """A key argument that is not a key (TorchRL raises RuntimeError for a list passed as one key)."""


def _unpack_keys(owner: str, keys: tuple) -> list[NestedKey]:
    """``("a", "b")`` (separate arguments) and ``(("a", "b"),)`` (a nested key) are accepted; a list is not a
    key (as in TorchRL)."""
    for key in keys:
        if isinstance(key, list):
            raise _KeyArgumentError(
                f"{owner}: got the list {key!r} as a key; pass the keys as separate arguments, e.g. "
                f"{owner}({', '.join(repr(k) for k in key)})."
            )
        if not isinstance(key, (str, tuple)) or (isinstance(key, tuple) and not all(isinstance(k, str) for k in key)):
            raise _KeyArgumentError(f"{owner}: keys must be strings or tuples of strings, got {key!r}.")
    return _key_list(list(keys))


class ExcludeTransform(Transform):
    """Removes entries from the data an environment returns (step and reset) and from its specs.

    Keys that the env does not produce raise ``KeyError`` when the specs are built. Excluding a state entry that the base env reads back on the next step
    (e.g. ``"th"`` of :class:`~torchrl.envs.PendulumEnv`) makes that next step fail: exclude observations.

    Args:
        *excluded_keys: the entries to remove (strings or nested keys, as separate arguments).

    Keyword Args:
        inverse: exclude the entries from the *inputs* instead: the base env does not see them in ``step``
            or ``reset`` (useful for entries written by a policy that the env does not accept); outputs and
            specs are left unchanged.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._exclude_transform import ExcludeTransform
        >>> env = TransformedEnv(PendulumEnv(), ExcludeTransform("observation"))
        >>> "observation" in env.rollout(2)["next"].keys()
        False
    """

    def __init__(self, *excluded_keys: NestedKey, inverse: bool = False) -> None:
        super().__init__()
        self.excluded_keys = _unpack_keys("ExcludeTransform", excluded_keys)
        self.inverse = bool(inverse)

    # -- data -------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return next_tensordict
        return next_tensordict.exclude(*self.excluded_keys)

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Returns ``next_tensordict`` without the excluded entries (a new TensorDict; the input is kept).

        With ``inverse=True`` the data is returned unchanged (the exclusion happens in :meth:`inv`, e.g. when
        a replay buffer writes data).
        """
        return self._call(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    @property
    def _has_inverse(self) -> bool:
        return self.inverse

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.inverse:
            return tensordict
        return tensordict.exclude(*self.excluded_keys)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._inv_call(tensordict)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if tensordict is None or not self.inverse:
            return tensordict
        return tensordict.exclude(*self.excluded_keys)

    # -- specs ------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self.inverse:
            return output_spec
        known = set()
        for part in _OUTPUT_PARTS:
            known |= set(output_spec[part].keys(include_nested=True))
        for key in self.excluded_keys:
            if key not in known:
                raise KeyError(
                    f"ExcludeTransform: key {key!r} not found in the environment outputs (available: "
                    f"{', '.join(sorted(map(str, known)))})."
                )
        for part in _OUTPUT_PARTS:
            output_spec[part] = output_spec[part].exclude(*self.excluded_keys)
        return output_spec

    def __repr__(self) -> str:
        keys = ", ".join(repr(k) for k in self.excluded_keys)
        return f"ExcludeTransform({keys}{', inverse=True' if self.inverse else ''})"
