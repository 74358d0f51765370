"""``torchrl-train`` (also ``python -m torchrl.train``): run a recipe by name with Hydra-style overrides.

::

    torchrl-train                                   # SAC on the native PendulumEnv
    torchrl-train sac env=Pendulum-v1 total_frames=20000
    torchrl-train td3 env=HalfCheetah-v5 device=cuda logger=tensorboard
    torchrl-train sac env=gym env.name=MountainCarContinuous-v0
    torchrl-train sac resume=runs/sac-PendulumEnv-20250101-120000 total_frames=30000
    torchrl-train sac --cfg                         # print the composed config and exit
    torchrl-train --list                            # the recipes found and where

A recipe is a folder ``<name>/`` holding ``config.yaml`` (Hydra, with an ``env`` config group of presets
in ``env/``) and ``<name>.py`` defining ``main(cfg)``. Folders are searched in ``$TORCHRL_RECIPES_DIR``
(one or more directories separated by ``os.pathsep``), then ``sota-implementations/`` next to the
installed ``torchrl`` package (an editable install of the repository), then ``./sota-implementations``.
``env=<id>`` with an id that has no preset in ``env/`` selects the recipe's generic ``gym`` preset with
``env.name=<id>``.

Every option is checked before anything starts (``_validate.py``): a bad one exits with code 2 and one
line per option, ``torchrl-train sac: error: total_frames=abc: expected an integer, got the string 'abc'``,
and no run folder is created.

Hydra (``hydra-core``), tqdm and matplotlib come with the ``utils`` extra; they are imported when a
recipe runs, never by ``import torchrl``.
"""
from __future__ import annotations

import difflib
import importlib.util
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import torchrl
from torchrl.train._validate import check_config, check_overrides, ConfigError

__all__ = ["DEFAULT_RECIPE", "ConfigError", "available_recipes", "compose_config", "find_recipe", "load_recipe",
           "main", "recipe_dirs", "run_recipe", "validated_config"]

#: The recipe ``torchrl-train`` runs without arguments.
DEFAULT_RECIPE = "sac"
ENV_VAR = "TORCHRL_RECIPES_DIR"
_GENERIC_ENV = "gym"

USAGE = """usage: torchrl-train [RECIPE] [KEY=VALUE ...] [--cfg]
       torchrl-train --list | --help

Runs a training recipe (default: sac, on the native PendulumEnv) with Hydra-style overrides, e.g.
  torchrl-train sac env=Pendulum-v1 total_frames=20000 seed=1 logger=tensorboard
Common keys: env, total_frames, seed, device, threads, logger, compile, output_dir, resume, eval_every.
--cfg prints the composed config without training; --list shows the recipes found."""


def recipe_dirs() -> list[Path]:
    """The directories searched for recipe folders, in order (existing or not)."""
    dirs = [Path(p).expanduser() for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    dirs.append(Path(torchrl.__file__).resolve().parent.parent / "sota-implementations")
    dirs.append(Path.cwd() / "sota-implementations")
    seen, out = set(), []
    for d in dirs:
        key = str(d.resolve()) if d.exists() else str(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _is_recipe(folder: Path) -> bool:
    return (folder / "config.yaml").is_file() and (folder / f"{folder.name}.py").is_file()


def available_recipes() -> dict[str, Path]:
    """``{name: folder}`` of every recipe found (the first directory holding a name wins)."""
    found: dict[str, Path] = {}
    for d in recipe_dirs():
        if d.is_dir():
            for folder in sorted(d.iterdir()):
                if folder.name not in found and _is_recipe(folder):
                    found[folder.name] = folder
    return found


def find_recipe(name: str) -> Path:
    """The folder of recipe ``name``.

    Raises:
        FileNotFoundError: no searched directory holds ``<name>/config.yaml`` and ``<name>/<name>.py``; the
            message lists the directories searched and the recipes that exist.
    """
    for d in recipe_dirs():
        if _is_recipe(d / name):
            return d / name
    searched = "\n".join(f"  {d}{'' if d.is_dir() else '  (missing)'}" for d in recipe_dirs())
    known = sorted(available_recipes())
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.6)
    raise FileNotFoundError(
        f"torchrl-train: no recipe {name!r}{'; close matches: ' + ', '.join(close) if close else ''} (a folder "
        f"{name}/ with config.yaml and {name}.py). Searched:\n{searched}\n"
        f"Recipes found: {', '.join(known) if known else 'none'}. Set {ENV_VAR} to the directory holding the recipe "
        "folders (e.g. the repository's sota-implementations/)."
    )


def _env_overrides(folder: Path, overrides: Sequence[str]) -> list[str]:
    """``env=<id>`` without a preset file becomes ``env=gym env.name=<id>`` (when the recipe has ``env/gym.yaml``)."""
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if key == "env" and sep and value and not (folder / "env" / f"{value}.yaml").is_file() \
                and (folder / "env" / f"{_GENERIC_ENV}.yaml").is_file():
            out += [f"env={_GENERIC_ENV}", f"env.name={value}"]
        else:
            out.append(item)
    return out


def _import_hydra():
    try:
        from hydra import compose, initialize_config_dir  # optional dependency (the ``utils`` extra)
    except ImportError as err:
        raise ImportError(
            "torchrl-train needs hydra-core to read recipe configs: pip install hydra-core (or the project's "
            "utils extra: pip install -e '.[utils]')."
        ) from err
    return compose, initialize_config_dir


def compose_config(recipe: str | Path, overrides: Sequence[str] = ()) -> Any:
    """The recipe's ``config.yaml`` composed with Hydra ``overrides`` (an OmegaConf ``DictConfig``).

    Args:
        recipe: a recipe name (looked up with :func:`find_recipe`) or a recipe folder.
        overrides: ``"key=value"`` strings in Hydra's override syntax.
    """
    folder = Path(recipe) if isinstance(recipe, Path) or os.sep in str(recipe) else find_recipe(str(recipe))
    compose, initialize_config_dir = _import_hydra()
    with initialize_config_dir(config_dir=str(folder.resolve()), version_base=None, job_name=folder.name):
        return compose(config_name="config", overrides=_env_overrides(folder, overrides))


@contextmanager
def _sibling_imports(folder: Path):
    """Makes ``import utils`` (and other sibling modules) resolve inside ``folder`` while the recipe loads;
    ``sys.path`` and any previously imported ``utils`` module are restored afterwards."""
    names = [p.stem for p in folder.glob("*.py")]
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)


def load_recipe(recipe: str | Path) -> ModuleType:
    """Imports a recipe's script (``<folder>/<name>.py``) as module ``torchrl_recipe_<name>``."""
    folder = Path(recipe) if isinstance(recipe, Path) or os.sep in str(recipe) else find_recipe(str(recipe))
    spec = importlib.util.spec_from_file_location(f"torchrl_recipe_{folder.name}", folder / f"{folder.name}.py")
    module = importlib.util.module_from_spec(spec)
    with _sibling_imports(folder):
        spec.loader.exec_module(module)
    if not callable(getattr(module, "main", None)):
        raise AttributeError(f"torchrl-train: {folder / (folder.name + '.py')} defines no main(cfg) function.")
    return module


def validated_config(recipe: str | Path, overrides: Sequence[str] = ()) -> Any:
    """:func:`compose_config` with every option checked first (names before composing; then types, ranges,
    choices, device, logger, resume and the env's spaces: see ``torchrl/train/_validate.py``).

    Raises:
        ConfigError: (a ``ValueError``) one line per bad option, ``"key=value: what is wrong"``.
    """
    folder = Path(recipe) if isinstance(recipe, Path) or os.sep in str(recipe) else find_recipe(str(recipe))
    check_overrides(folder.name, folder, overrides)
    cfg = compose_config(folder, overrides)
    check_config(folder.name, folder, cfg, overrides, recipes=list(available_recipes()))
    return cfg


def run_recipe(recipe: str | Path = DEFAULT_RECIPE, overrides: Sequence[str] = ()) -> Any:
    """Composes and checks the config (:func:`validated_config`), loads the recipe and runs ``main(cfg)``;
    returns what it returns (the run's summary dict for the bundled recipes)."""
    folder = Path(recipe) if isinstance(recipe, Path) or os.sep in str(recipe) else find_recipe(str(recipe))
    cfg = validated_config(folder, overrides)
    return load_recipe(folder).main(cfg)


def _split(argv: list[str]) -> tuple[str, list[str], set[str]]:
    flags = {a for a in argv if a.startswith("--")}
    rest = [a for a in argv if not a.startswith("--")]
    name = DEFAULT_RECIPE
    if rest and "=" not in rest[0]:
        name = rest.pop(0)
    return name, rest, flags


def main(argv: Sequence[str] | None = None) -> int:
    """The ``torchrl-train`` command; returns the process exit code (0 success, 2 usage or config error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        recipes = available_recipes()
        print(f"\nRecipes: {', '.join(recipes) if recipes else 'none found'}")
        return 0
    if "--list" in argv:
        recipes = available_recipes()
        if not recipes:
            print(f"No recipes found; searched: {', '.join(map(str, recipe_dirs()))}", file=sys.stderr)
            return 2
        for name, folder in recipes.items():
            presets = sorted(p.stem for p in (folder / "env").glob("*.yaml"))
            print(f"{name:8s} {folder}   env presets: {', '.join(presets) or '-'}")
        return 0
    name, overrides, flags = _split(argv)
    unknown = flags - {"--cfg"}
    if unknown:
        print(f"torchrl-train: unknown option(s) {sorted(unknown)}.\n\n{USAGE}", file=sys.stderr)
        return 2
    try:  # every option is checked here, before the recipe imports anything or creates its run folder
        folder = find_recipe(name)
        cfg = validated_config(folder, overrides)
    except ConfigError as err:
        for line in err.errors:
            print(f"torchrl-train {name}: error: {line}", file=sys.stderr)
        return 2
    except ImportError as err:
        print(err, file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - hydra's composition errors carry a readable message
        if not isinstance(err, FileNotFoundError) and not type(err).__module__.startswith(("hydra", "omegaconf")):
            raise
        print(f"torchrl-train {name}: error: {str(err).removeprefix('torchrl-train: ')}", file=sys.stderr)
        return 2
    if "--cfg" in flags:
        from omegaconf import OmegaConf  # comes with hydra-core

        print(OmegaConf.to_yaml(cfg), end="")
        return 0
    load_recipe(folder).main(cfg)
    return 0
