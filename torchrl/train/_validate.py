"""Checks of a recipe's options before anything starts (``torchrl-train``, :func:`~torchrl.train.run_recipe`).

A bad option is reported by name and value, with what was expected, and nothing is created::

    torchrl-train sac: error: total_frames=abc: expected an integer, got the string 'abc'
    torchrl-train sac: error: env=CartPole-v1: sac needs a continuous action space; CartPole-v1 has a discrete
    one; recipes that fit: dqn, ppo, a2c

The checks, in order:

1. :func:`check_overrides` (before Hydra composes anything): every ``KEY=VALUE`` names an option of the
   recipe's ``config.yaml`` or of one of its ``env/`` presets (close matches are suggested otherwise).
2. :func:`check_config` on the composed config: each option has the type of its default value in those
   files (``int``, ``float``, ``bool``, ``str``, ``list``); numeric options are in range (:data:`RANGES`),
   named choices are known (:data:`CHOICES`), the device exists, the logger's package is installed, a
   resumed run has a checkpoint; then, for the bundled recipes (:data:`RECIPE_ACTION_SPACES`), the env:
   a native env or a registered gymnasium id, with a flat observation vector and the action space the
   algorithm needs. A gymnasium env is built once for that (``gymnasium.make``) and closed.

Only light modules are imported here (yaml, and gymnasium for the env check): the checks run before the
recipe's own imports.
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["CHOICES", "ConfigError", "NATIVE_ACTION_SPACES", "RANGES", "RECIPE_ACTION_SPACES", "check_config",
           "check_overrides", "recipe_option_types"]

#: The action spaces each bundled recipe can train on (``"continuous"``: a Box; ``"discrete"``: Discrete).
RECIPE_ACTION_SPACES: dict[str, tuple[str, ...]] = {
    "sac": ("continuous",),
    "td3": ("continuous",),
    "ddpg": ("continuous",),
    "dqn": ("discrete",),
    "ppo": ("discrete", "continuous"),
    "a2c": ("discrete", "continuous"),
}

#: Action spaces of the envs :func:`~torchrl.train.make_env` builds without a simulator (``NATIVE_ENVS``).
NATIVE_ACTION_SPACES: dict[str, str] = {"PendulumEnv": "continuous"}


class _Range:
    """An interval of allowed values; ``integers`` for list entries that must be positive integers."""

    def __init__(self, low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 high_open: bool = False, why: str = "") -> None:
        self.low, self.high, self.low_open, self.high_open, self.why = low, high, low_open, high_open, why

    def __contains__(self, value: float) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return f"{'<' if self.high_open else '<='} {self.high}"


def _positive(why: str = "") -> _Range:
    return _Range(0, low_open=True, why=why)


def _at_least(low: float, why: str = "") -> _Range:
    return _Range(low, why=why)


def _unit(*, low_open: bool = False, why: str = "") -> _Range:
    return _Range(0, 1, low_open=low_open, why=why)


#: Allowed values of every numeric option of the bundled recipes (a list option: of each of its entries).
RANGES: dict[str, _Range] = {
    "total_frames": _positive("frames to train on"),
    "seed": _at_least(0),
    "threads": _at_least(0, "0 keeps torch's default"),
    "log_every": _positive(),
    "eval_every": _at_least(0, "0: never"),
    "eval_episodes": _at_least(1),
    "checkpoint_every": _at_least(0, "0: never"),
    "collector.frames_per_batch": _positive(),
    "collector.init_random_frames": _at_least(0),
    "exploration.eps_init": _unit(),
    "exploration.eps_end": _unit(),
    "exploration.annealing_frames": _positive(),
    "exploration.sigma": _at_least(0),
    "exploration.ou_theta": _at_least(0),
    "buffer.size": _positive(),
    "buffer.batch_size": _positive(),
    "network.hidden_sizes": _positive("layer widths"),
    "network.scale_lb": _positive(),
    "loss.gamma": _unit(low_open=True, why="the discount factor"),
    "loss.gae_lambda": _unit(),
    "loss.clip_epsilon": _positive(),
    "loss.entropy_coeff": _at_least(0),
    "loss.critic_coeff": _at_least(0),
    "loss.tau": _unit(low_open=True, why="the target networks' update weight"),
    "loss.alpha_init": _positive(),
    "loss.num_qvalue_nets": _at_least(1),
    "loss.target_update_interval": _at_least(1),
    "loss.policy_noise": _at_least(0),
    "loss.noise_clip": _at_least(0),
    "optim.lr": _positive("the learning rate"),
    "optim.actor_lr": _positive(),
    "optim.critic_lr": _positive(),
    "optim.alpha_lr": _positive(),
    "optim.alpha": _unit(),
    "optim.eps": _at_least(0),
    "optim.max_grad_norm": _at_least(0, "0: no clipping"),
    "optim.utd_ratio": _positive(),
    "optim.epochs": _at_least(1),
    "optim.minibatch_size": _positive(),
    "optim.updates_per_batch": _at_least(1),
    "optim.lr_end_factor": _unit(),
    "optim.policy_update_delay": _at_least(1),
    "env.max_episode_steps": _positive(),
    "env.num_envs": _at_least(1),
}

_LOSSES = ("l2", "smooth_l1", "l1")
#: Allowed values of the named choices (``network.activation``: the keys of ``torchrl.train.ACTIVATIONS``).
CHOICES: dict[str, tuple[str, ...]] = {
    "logger": ("csv", "tensorboard", "wandb", "mlflow", ""),
    "network.activation": ("relu", "tanh", "elu", "silu"),
    "loss.loss_function": _LOSSES,
    "loss.loss_critic_type": _LOSSES,
    "optim.optimizer": ("rmsprop", "adam"),
    "exploration.type": ("gaussian", "ou"),
}

#: The package each logger needs (checked with ``importlib.util.find_spec``, nothing imported).
_LOGGER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
_GENERIC_ENV = "gym"
_MISSING = "???"


class ConfigError(ValueError):
    """One or more bad options; ``errors`` holds one line per option (``"key=value: what is wrong"``)."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


# ------------------------------------------------------------------------------------------- defaults
def _flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": leaf}`` for every leaf (lists are leaves) and ``{"a": tree}`` for every inner node."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        out[path] = value
        if isinstance(value, Mapping):
            out.update(_flatten(value, path + "."))
    return out


def _read_yaml(path: Path, *, group: str | None = None) -> dict:
    import yaml  # optional: comes with hydra-core / omegaconf (the ``utils`` extra)

    text = path.read_text()
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        return {}
    if group is not None and "@package _global_" not in text.split("\n", 1)[0]:
        data = {group: data}  # a group file without the header is placed under its group
    return data


def _recipe_files(folder: Path) -> list[dict]:
    base = _read_yaml(folder / "config.yaml")
    base.pop("defaults", None)
    base.pop("hydra", None)
    return [base] + [_read_yaml(p, group="env") for p in sorted((folder / "env").glob("*.yaml"))]


def env_presets(folder: Path) -> list[str]:
    """The recipe's env presets (``env/<name>.yaml``), the generic ``gym`` one aside."""
    return [p.stem for p in sorted((folder / "env").glob("*.yaml")) if p.stem != _GENERIC_ENV]


def recipe_option_types(folder: Path) -> dict[str, set[type]]:
    """``{dotted option: types of its values}`` over the recipe's ``config.yaml`` and ``env/`` presets (inner
    nodes map to ``{dict}``; a ``null`` or ``???`` value adds no type)."""
    types: dict[str, set[type]] = {"env": {dict}}
    for tree in _recipe_files(folder):
        for key, value in _flatten(tree).items():
            entry = types.setdefault(key, set())
            if value is not None and value != _MISSING:
                entry.add(dict if isinstance(value, Mapping) else type(value))
    return types


# ------------------------------------------------------------------------------------------- overrides
def _close(word: str, candidates: Sequence[str], n: int = 5) -> list[str]:
    """Up to ``n`` of ``candidates`` close to ``word`` (case-insensitive), best first."""
    lower = {c.lower(): c for c in candidates}
    return [lower[m] for m in difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.6)]


def _split_override(item: str) -> tuple[str, str, str]:
    """``(prefix, key, value)`` of a Hydra override such as ``++optim.lr=1e-3`` (prefix ``"++"``)."""
    key, _, value = item.partition("=")
    prefix = key[: len(key) - len(key.lstrip("+~"))]
    return prefix, key[len(prefix):], value


def check_overrides(recipe: str, folder: Path, overrides: Sequence[str]) -> None:
    """Raises :class:`ConfigError` for an override that is not ``KEY=VALUE`` or names no option of the recipe.

    ``+key=value`` (Hydra's "add a key") and ``hydra.*`` / ``hydra/*`` overrides are passed through.
    """
    known = recipe_option_types(folder)
    errors = []
    for item in overrides:
        prefix, key, value = _split_override(item)
        if "=" not in item and prefix != "~":
            errors.append(f"{item!r}: expected KEY=VALUE (e.g. total_frames=20000)")
        elif key.startswith("hydra") or prefix in ("+", "++") or key in known:
            continue
        else:
            options = sorted(k for k, t in known.items() if t != {dict} or k == "env")
            close = _close(key, options)
            hint = f"close matches: {', '.join(close)}" if close else f"see the options with torchrl-train {recipe} --cfg"
            errors.append(f"{item}: no option {key!r} in the {recipe} config; {hint}")
    if errors:
        raise ConfigError(errors)


# ------------------------------------------------------------------------------------------- values
def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}" if value else "an empty string"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return f"the list {value}"
    return f"a {type(value).__name__}"


def _kind(types: set[type]) -> str | None:
    """The option's kind from the types of its default values: bool, int, float, str or list."""
    if not types or dict in types:
        return None
    if types == {bool}:
        return "bool"
    if types == {int}:
        return "int"
    if types <= {int, float}:
        return "float"
    if types == {str}:
        return "str"
    if types == {list}:
        return "list"
    return None


_EXPECTED = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
             "list": "a list"}


def _type_error(kind: str, value: Any, default_items: set[type]) -> str | None:
    if kind == "bool":
        return None if isinstance(value, bool) else ""
    if isinstance(value, bool) or value is None:
        return ""
    if kind == "int":
        if isinstance(value, int):
            return None
        if isinstance(value, float) and value.is_integer():
            return f" (write {int(value)})"
        return ""
    if kind == "float":
        return None if isinstance(value, (int, float)) else ""
    if kind == "str":
        return None if isinstance(value, (str, int, float)) else ""
    if not isinstance(value, list):
        return ""
    if default_items == {int} and not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return " of integers"
    return None


def _list_item_types(folder: Path, key: str) -> set[type]:
    items: set[type] = set()
    for tree in _recipe_files(folder):
        value = _flatten(tree).get(key)
        if isinstance(value, list):
            items.update(type(v) for v in value)
    return items


def _shown(key: str, value: Any, given: Mapping[str, str]) -> str:
    return f"{key}={given[key]}" if key in given else f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"


def _check_values(folder: Path, flat: Mapping[str, Any], given: Mapping[str, str]) -> list[str]:
    errors = []
    for key, types in recipe_option_types(folder).items():
        if key not in flat:
            continue
        value, kind = flat[key], _kind(types)
        if kind is None or value == _MISSING:
            continue
        bad = _type_error(kind, value, _list_item_types(folder, key) if kind == "list" else set())
        if bad is not None:
            expected = _EXPECTED[kind] + (bad if bad.startswith(" of") else "")
            hint = bad if bad.startswith(" (") else ""
            errors.append(f"{_shown(key, value, given)}: expected {expected}, got {_describe(value)}{hint}")
            continue
        rule = RANGES.get(key)
        entries = value if isinstance(value, list) else [value]
        if rule is not None and isinstance(value, (int, float, list)) and not isinstance(value, bool):
            for entry in entries:
                if isinstance(entry, (int, float)) and entry not in rule:
                    what = "each entry " if isinstance(value, list) else ""
                    why = f" ({rule.why})" if rule.why else ""
                    errors.append(f"{_shown(key, value, given)}: {what}must be {rule}{why}, got {entry}")
                    break
        choices = CHOICES.get(key)
        if choices is not None and value not in choices:
            errors.append(f"{_shown(key, value, given)}: expected one of {', '.join(map(repr, choices))}")
    return errors


def _check_runtime(flat: Mapping[str, Any], given: Mapping[str, str]) -> list[str]:
    """The device exists, the logger's package is installed, the resumed run has a checkpoint."""
    errors = []
    device = flat.get("device")
    if isinstance(device, str) and device != "auto":
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError):
            errors.append(f"{_shown('device', device, given)}: not a device; expected cpu, cuda, cuda:<index> or auto")
        else:
            if dev.type == "cuda" and not torch.cuda.is_available():
                errors.append(f"{_shown('device', device, given)}: CUDA is not available here; use device=cpu or "
                              "device=auto")
            elif dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
                errors.append(f"{_shown('device', device, given)}: there are {torch.cuda.device_count()} CUDA devices")
    package = _LOGGER_PACKAGES.get(flat.get("logger"))
    if package is not None and importlib.util.find_spec(package) is None:
        errors.append(f"{_shown('logger', flat['logger'], given)}: the {package} package is not installed "
                      f"(pip install {package}); logger=csv needs nothing")
    resume = flat.get("resume")
    if isinstance(resume, str) and resume:
        path = Path(resume).expanduser()
        if not (path.is_file() or (path / "checkpoint.pt").is_file()):
            errors.append(f"{_shown('resume', resume, given)}: no checkpoint there (a run folder holding "
                          "checkpoint.pt, or the file itself)")
    return errors


# ------------------------------------------------------------------------------------------- env
def _space_kind(space: Any) -> str:
    name = type(space).__name__
    if name == "Box":
        return "continuous" if str(space.dtype).startswith("float") else "integer Box"
    return "discrete" if name == "Discrete" else name


def _gym_spaces(name: str) -> tuple[str, Any] | str:
    """``(action kind, observation space)`` of gymnasium env ``name``, or why it cannot be used."""
    try:
        import gymnasium  # optional dependency (the ``gym`` extra)
    except ImportError:
        return "gymnasium is not installed (pip install 'gymnasium[classic-control]')"
    env_id = name
    if ":" in name:  # "module:EnvId": importing the module registers the id
        module, _, env_id = name.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as err:
            return f"cannot import {module!r} to register the env: {err}"
    if env_id not in gymnasium.registry:
        return ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gymnasium.make(name)
    except Exception as err:  # noqa: BLE001 - missing simulators, bad kwargs: the message says what to install
        return f"gymnasium could not build it: {type(err).__name__}: {err}"
    try:
        return _space_kind(env.action_space), env.observation_space
    finally:
        env.close()


def _gym_ids() -> list[str]:
    try:
        import gymnasium  # optional dependency
    except ImportError:
        return []
    return list(gymnasium.registry)


def _check_env(recipe: str, folder: Path, flat: Mapping[str, Any], given: Mapping[str, str],
               recipes: Sequence[str]) -> list[str]:
    name = flat.get("env.name")
    option = "env.name" if "env.name" in given else "env"
    shown = f"{option}={given.get(option, name)}"
    if name == _MISSING or name is None:
        return [f"env.name: missing; give an env: torchrl-train {recipe} env=<gymnasium id>"]
    if not isinstance(name, str):
        return []
    if name in NATIVE_ACTION_SPACES:
        kind, obs_ok, obs = NATIVE_ACTION_SPACES[name], True, None
    else:
        found = _gym_spaces(name)
        if found == "":
            close = _close(name, [*env_presets(folder), *NATIVE_ACTION_SPACES, *_gym_ids()])
            return [f"{shown}: no such environment; close matches: {', '.join(close) or 'none'} (the {recipe} presets: "
                    f"{', '.join(env_presets(folder))}; or any gymnasium id: gymnasium.pprint_registry() lists them)"]
        if isinstance(found, str):
            return [f"{shown}: {found}"]
        kind, obs = found
        obs_ok = type(obs).__name__ == "Box" and len(obs.shape) == 1
    errors = []
    if not obs_ok:
        errors.append(f"{shown}: {recipe} needs a flat observation vector (a 1-D Box); {name} has {obs}")
    needed = RECIPE_ACTION_SPACES[recipe]
    if kind not in needed:
        fits = [r for r, kinds in RECIPE_ACTION_SPACES.items() if kind in kinds and r in recipes]
        article = "an" if kind[0] in "aeiouI" else "a"
        errors.append(f"{shown}: {recipe} needs a {' or '.join(needed)} action space; {name} has {article} {kind} "
                      f"one; recipes that fit: {', '.join(fits) or 'none'}")
    return errors


# ------------------------------------------------------------------------------------------- entry
def _plain(cfg: Any) -> dict:
    try:
        from omegaconf import DictConfig, OmegaConf  # optional: comes with hydra-core
    except ImportError:
        DictConfig = None  # noqa: N806
    if DictConfig is not None and isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    return dict(cfg)


def check_config(recipe: str, folder: Path, cfg: Any, overrides: Sequence[str] = (), *,
                 recipes: Sequence[str] = tuple(RECIPE_ACTION_SPACES)) -> None:
    """Raises :class:`ConfigError` listing every bad option of the composed config ``cfg`` (see the module
    docstring); ``overrides`` (the command line) are quoted as typed, ``recipes`` are the ones that may be
    suggested for an env's action space."""
    given = {}
    for item in overrides:
        _, key, value = _split_override(item)
        given[key] = value
    flat = _flatten(_plain(cfg))
    errors = _check_values(folder, flat, given) + _check_runtime(flat, given)
    if recipe in RECIPE_ACTION_SPACES and not any(e.startswith(("env=", "env.name=")) for e in errors):
        errors += _check_env(recipe, folder, flat, given, recipes)
    if errors:
        raise ConfigError(errors)
