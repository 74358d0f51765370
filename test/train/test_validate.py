"""Option checks of the recipes (``torchrl/train/_validate.py``), in process; the command itself is run in
``test_cli.py``."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from torchrl.envs import PendulumEnv
from torchrl.data import Bounded
from torchrl.train import ACTIVATIONS, available_recipes, ConfigError, NATIVE_ENVS, validated_config
from torchrl.train import _validate
from torchrl.train._validate import (
    CHOICES,
    NATIVE_ACTION_SPACES,
    RANGES,
    RECIPE_ACTION_SPACES,
    recipe_option_types,
)

RECIPES = Path(__file__).resolve().parents[2] / "sota-implementations"


def _errors(recipe, *overrides):
    with pytest.raises(ConfigError) as info:
        validated_config(recipe, list(overrides))
    return info.value.errors


def _numeric_options():
    """``(recipe, option)`` for every numeric option (or list of numbers) of every recipe file."""
    out = set()
    for folder in RECIPES.iterdir():
        for key, types in recipe_option_types(folder).items():
            if types and types <= {int, float}:
                out.add((folder.name, key))
            elif types == {list}:
                out.add((folder.name, key))
    return sorted(out)


class TestTables:
    def test_every_numeric_option_of_every_recipe_has_a_range(self):
        options = _numeric_options()
        assert len(options) > 60 and ("ppo", "optim.lr") in options and ("sac", "env.max_episode_steps") in options
        assert [o for o in options if o[1] not in RANGES] == []

    def test_every_range_names_an_option(self):
        names = {key for _, key in _numeric_options()}
        assert set(RANGES) <= names

    def test_choices_match_the_code(self):
        assert CHOICES["network.activation"] == tuple(ACTIVATIONS)
        for recipe, kinds in RECIPE_ACTION_SPACES.items():
            assert (RECIPES / recipe).is_dir() and set(kinds) <= {"continuous", "discrete"}
        assert set(RECIPE_ACTION_SPACES) == set(available_recipes())

    def test_native_envs_are_known(self):
        assert set(NATIVE_ACTION_SPACES) == set(NATIVE_ENVS)
        assert isinstance(PendulumEnv().action_spec, Bounded) and NATIVE_ACTION_SPACES["PendulumEnv"] == "continuous"

    def test_option_types_come_from_config_and_presets(self):
        types = recipe_option_types(RECIPES / "ppo")
        assert types["total_frames"] == {int} and types["optim.lr"] == {float} and types["compile"] == {bool}
        assert types["network.hidden_sizes"] == {list} and types["env.name"] == {str}  # gym's ??? adds nothing
        assert types["resume"] == set() and types["collector"] == {dict}
        assert types["optim.max_grad_norm"] == {float}  # 0.5 in config.yaml, 0.0 in a preset


class TestValues:
    def test_valid_config_passes(self):
        cfg = validated_config("ppo", ["total_frames=1000", "optim.lr=1", "network.hidden_sizes=[8]"])
        assert cfg.total_frames == 1000 and cfg.optim.lr == 1  # an int where a float is expected is fine

    @pytest.mark.parametrize("override, message", [
        ("total_frames=abc", "total_frames=abc: expected an integer, got the string 'abc'"),
        ("total_frames=1e5", r"total_frames=1e5: expected an integer, got the number 100000.0 \(write 100000\)"),
        ("threads=", "threads=: expected an integer, got an empty string"),
        ("compile=1", "compile=1: expected true or false, got the number 1"),
        ("optim.lr=fast", "optim.lr=fast: expected a number, got the string 'fast'"),
        ("network.hidden_sizes=64", "network.hidden_sizes=64: expected a list, got the number 64"),
        ("network.hidden_sizes=[64,abc]", r"network.hidden_sizes=\[64,abc\]: expected a list of integers, got the "
                                          r"list \[64, 'abc'\]"),
        ("logger=null", "logger=null: expected a string, got null"),
    ])
    def test_types(self, override, message):
        assert len(errors := _errors("ppo", override)) == 1
        assert re.fullmatch(message, errors[0]), errors[0]

    @pytest.mark.parametrize("recipe, override, message", [
        ("ppo", "total_frames=-5", r"total_frames=-5: must be > 0 \(frames to train on\), got -5"),
        ("ppo", "collector.frames_per_batch=0", "collector.frames_per_batch=0: must be > 0, got 0"),
        ("ppo", "loss.gamma=0", r"loss.gamma=0: must be in \(0, 1\] \(the discount factor\), got 0"),
        ("ppo", "loss.gamma=1.01", r"loss.gamma=1.01: must be in \(0, 1\]"),
        ("ppo", "optim.lr=-1e-3", r"optim.lr=-1e-3: must be > 0 \(the learning rate\), got -0.001"),
        ("ppo", "optim.lr=nan", r"optim.lr=nan: must be > 0"),
        ("ppo", "network.hidden_sizes=[64,0]", r"network.hidden_sizes=\[64,0\]: each entry must be > 0"),
        ("dqn", "exploration.eps_end=1.5", r"exploration.eps_end=1.5: must be in \[0, 1\], got 1.5"),
        ("sac", "buffer.batch_size=0", "buffer.batch_size=0: must be > 0, got 0"),
        ("sac", "loss.tau=2", r"loss.tau=2: must be in \(0, 1\]"),
        ("td3", "optim.policy_update_delay=0", "optim.policy_update_delay=0: must be >= 1, got 0"),
        ("a2c", "env.num_envs=0", "env.num_envs=0: must be >= 1, got 0"),
        ("ddpg", "eval_episodes=0", "eval_episodes=0: must be >= 1, got 0"),
        ("ddpg", "seed=-1", "seed=-1: must be >= 0, got -1"),
    ])
    def test_ranges(self, recipe, override, message):
        errors = _errors(recipe, override)
        assert len(errors) == 1 and re.match(message, errors[0]), errors

    def test_choices(self):
        assert _errors("a2c", "optim.optimizer=sgd") == ["optim.optimizer=sgd: expected one of 'rmsprop', 'adam'"]
        assert _errors("ddpg", "exploration.type=pink") == ["exploration.type=pink: expected one of 'gaussian', 'ou'"]
        assert _errors("dqn", "loss.loss_function=l3") == [
            "loss.loss_function=l3: expected one of 'l2', 'smooth_l1', 'l1'"]

    def test_all_bad_options_are_reported_together(self):
        errors = _errors("ppo", "total_frames=-5", "optim.lr=0", "compile=yes")
        assert [e.split(":")[0] for e in errors] == ["total_frames=-5", "compile=yes", "optim.lr=0"]

    def test_preset_values_are_shown_when_not_typed(self, tmp_path):
        folder = tmp_path / "sac"
        (folder / "env").mkdir(parents=True)
        for f in (RECIPES / "sac").iterdir():
            if f.is_file():
                (folder / f.name).write_text(f.read_text())
        for f in (RECIPES / "sac" / "env").iterdir():
            (folder / "env" / f.name).write_text(f.read_text())
        (folder / "env" / "Broken.yaml").write_text("# @package _global_\nenv:\n  name: PendulumEnv\n"
                                                    "  max_episode_steps: 0\n")
        assert _errors(folder, "env=Broken") == ["env.max_episode_steps=0: must be > 0, got 0"]


class TestRuntime:
    def test_device(self):
        assert _errors("sac", "device=gpu") == [
            "device=gpu: not a device; expected cpu, cuda, cuda:<index> or auto"]
        assert validated_config("sac", ["device=auto"]).device == "auto"

    def test_cuda_unavailable(self, monkeypatch):
        monkeypatch.setattr(_validate.torch.cuda, "is_available", lambda: False)
        assert _errors("sac", "device=cuda") == [
            "device=cuda: CUDA is not available here; use device=cpu or device=auto"]

    def test_missing_logger_package(self, monkeypatch):
        real = importlib.util.find_spec
        monkeypatch.setattr(_validate.importlib.util, "find_spec",
                            lambda name, *a: None if name == "mlflow" else real(name, *a))
        assert _errors("sac", "logger=mlflow") == [
            "logger=mlflow: the mlflow package is not installed (pip install mlflow); logger=csv needs nothing"]

    def test_resume_without_checkpoint(self, tmp_path):
        assert _errors("sac", f"resume={tmp_path}") == [
            f"resume={tmp_path}: no checkpoint there (a run folder holding checkpoint.pt, or the file itself)"]
        (tmp_path / "checkpoint.pt").write_bytes(b"")
        assert validated_config("sac", [f"resume={tmp_path}"]).resume == str(tmp_path)


class TestNames:
    def test_unknown_option_with_close_matches(self):
        assert _errors("sac", "totl_frames=10") == [
            "totl_frames=10: no option 'totl_frames' in the sac config; close matches: total_frames"]
        assert _errors("ppo", "optim.lrr=1") == ["optim.lrr=1: no option 'optim.lrr' in the ppo config; close "
                                                 "matches: optim.lr, optim.anneal_lr"]

    def test_unknown_option_without_match(self):
        assert _errors("sac", "zzz=1") == ["zzz=1: no option 'zzz' in the sac config; see the options with "
                                           "torchrl-train sac --cfg"]

    def test_option_of_another_recipe(self):
        assert _errors("sac", "env.num_envs=4")[0].startswith("env.num_envs=4: no option 'env.num_envs' in the sac")

    def test_not_key_value(self):
        assert _errors("sac", "fast") == ["'fast': expected KEY=VALUE (e.g. total_frames=20000)"]

    def test_hydra_additions_pass(self):
        assert validated_config("sac", ["+extra=1", "hydra.job.chdir=false"]).extra == 1


class TestEnv:
    def test_unknown_env_with_close_matches(self):
        (error,) = _errors("sac", "env=pendulum-v1")
        assert error.startswith("env=pendulum-v1: no such environment; close matches: Pendulum-v1, PendulumEnv")

    def test_unknown_env_without_match(self):
        assert _errors("dqn", "env=NoSuchEnv-v0") == [
            "env=NoSuchEnv-v0: no such environment; close matches: none (the dqn presets: CartPole-v1; or any "
            "gymnasium id: gymnasium.pprint_registry() lists them)"]

    def test_env_name_override_is_quoted(self):
        (error,) = _errors("td3", "env=gym", "env.name=Acrobot-v1")
        assert error.startswith("env.name=Acrobot-v1: td3 needs a continuous action space; Acrobot-v1 has a "
                                "discrete one; recipes that fit: dqn, ppo, a2c")

    def test_missing_env_name(self):
        assert _errors("sac", "env=gym") == ["env.name: missing; give an env: torchrl-train sac env=<gymnasium id>"]

    @pytest.mark.parametrize("recipe", ["sac", "td3", "ddpg"])
    def test_continuous_recipes_reject_discrete_actions(self, recipe):
        assert _errors(recipe, "env=CartPole-v1") == [
            f"env=CartPole-v1: {recipe} needs a continuous action space; CartPole-v1 has a discrete one; recipes "
            "that fit: dqn, ppo, a2c"]

    def test_dqn_rejects_continuous_actions(self):
        assert _errors("dqn", "env=MountainCarContinuous-v0") == [
            "env=MountainCarContinuous-v0: dqn needs a discrete action space; MountainCarContinuous-v0 has a "
            "continuous one; recipes that fit: sac, td3, ddpg, ppo, a2c"]

    def test_observation_must_be_a_flat_vector(self):
        assert _errors("ppo", "env=FrozenLake-v1") == [
            "env=FrozenLake-v1: ppo needs a flat observation vector (a 1-D Box); FrozenLake-v1 has Discrete(16)"]

    @pytest.mark.parametrize("recipe, env", [("ppo", "CartPole-v1"), ("ppo", "Pendulum-v1"), ("a2c", "Acrobot-v1"),
                                             ("sac", "PendulumEnv"), ("dqn", "MountainCar-v0")])
    def test_fitting_envs_pass(self, recipe, env):
        assert validated_config(recipe, [f"env={env}"]).env.name == env

    def test_env_that_cannot_be_built(self, monkeypatch):
        import gymnasium

        def fail(name, **kwargs):
            raise gymnasium.error.DependencyNotInstalled("MuJoCo is not installed, run `pip install gymnasium[mujoco]`")

        monkeypatch.setattr(gymnasium, "make", fail)
        assert _errors("sac", "env=HalfCheetah-v5") == [
            "env=HalfCheetah-v5: gymnasium could not build it: DependencyNotInstalled: MuJoCo is not installed, run "
            "`pip install gymnasium[mujoco]`"]

    def test_user_recipes_skip_the_env_check(self, tmp_path, monkeypatch):
        folder = tmp_path / "mine"
        (folder / "env").mkdir(parents=True)
        (folder / "config.yaml").write_text(yaml.safe_dump({"defaults": ["_self_", {"env": "gym"}], "n": 1}))
        (folder / "env" / "gym.yaml").write_text("# @package _global_\nenv:\n  name: ???\n")
        (folder / "mine.py").write_text("def main(cfg):\n    return cfg.env.name\n")
        monkeypatch.setenv("TORCHRL_RECIPES_DIR", str(tmp_path))
        assert validated_config("mine", ["env=AnythingGoes"]).env.name == "AnythingGoes"
        assert _errors("mine", "n=x") == ["n=x: expected an integer, got the string 'x'"]
