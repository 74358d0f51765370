"""Checks run when transforms are attached to an env: bad keys fail there, naming the key, not in a step."""
from __future__ import annotations

from tensordict.utils import unravel_key

__all__ = ["check_transform_keys"]

_OUTPUT_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
_INPUT_PARTS = ("full_action_spec", "full_state_spec")


def _spec_keys(output_spec, input_spec) -> set:
    keys = set()
    for root, parts in ((output_spec, _OUTPUT_PARTS), (input_spec, _INPUT_PARTS)):
        for part in parts:
            if part in root.keys():
                keys |= set(root[part].keys(include_nested=True, leaves_only=True))
                keys |= set(root[part].keys(include_nested=True))  # (a transform may read a whole group)
    return keys


def check_transform_keys(env, transforms) -> None:
    """Raises ``KeyError`` when a transform of ``transforms`` reads an ``in_key`` that neither the base env nor
    any transform produces (the key, the transform and the available keys in the message).

    Lenient where TorchRL is: a transform with ``missing_tolerance``, or one whose ``in_keys`` are not env
    entries by design (``_in_keys_are_env_keys = False``), is not checked; neither are ``"next"`` entries
    (meant for replay buffers).
    """
    available = produced = None
    for t in transforms:
        if getattr(t, "_missing_tolerance", False) or not getattr(t, "_in_keys_are_env_keys", True):
            continue
        for key in getattr(t, "in_keys", None) or ():
            key = unravel_key(key)
            if isinstance(key, tuple) and key[0] == "next":
                continue
            if available is None:
                base = env.base_env
                available = _spec_keys(base.output_spec, base.input_spec) | _spec_keys(env.output_spec, env.input_spec)
                produced = {id(o): _written(o) for o in transforms}
            if key in available or any(key in keys for i, keys in produced.items() if i != id(t)):
                continue
            names = sorted(map(str, (k for k in available if not isinstance(k, tuple) or k[-1] != "_reset")))
            raise KeyError(
                f"{type(t).__name__}: in_key {key!r} is not produced by the env {type(env.base_env).__name__} "
                f"nor by another transform; available entries: {', '.join(names)}."
            )


def _written(transform) -> set:
    keys = list(getattr(transform, "out_keys", None) or ()) + list(getattr(transform, "out_keys_inv", None) or ())
    return {unravel_key(k) for k in keys}
