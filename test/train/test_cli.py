"""``torchrl-train``: argument handling, recipe lookup, Hydra composition with presets and overrides."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from torchrl.train import cli
from torchrl.train.cli import available_recipes, compose_config, find_recipe, load_recipe, main, recipe_dirs, run_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "sota-implementations"


def _toy_recipe(root: Path, name: str, value: int) -> Path:
    """A recipe whose main returns ``(cfg.x, utils.VALUE)``; its utils module is private to it."""
    folder = root / name
    (folder / "env").mkdir(parents=True)
    (folder / "config.yaml").write_text("defaults:\n  - _self_\n  - env: A\nx: 1\n")
    (folder / "env" / "A.yaml").write_text("# @package _global_\nenv:\n  name: A\nx: 2\n")
    (folder / "env" / "gym.yaml").write_text("# @package _global_\nenv:\n  name: ???\n")
    (folder / "utils.py").write_text(f"VALUE = {value}\n")
    (folder / f"{name}.py").write_text("from utils import VALUE\n\ndef main(cfg):\n    return cfg.x, VALUE, cfg.env.name\n")
    return folder


@pytest.fixture
def toy_dir(tmp_path, monkeypatch):
    _toy_recipe(tmp_path, "toy", 10)
    _toy_recipe(tmp_path, "other", 20)
    monkeypatch.setenv("TORCHRL_RECIPES_DIR", str(tmp_path))
    return tmp_path


class TestLookup:
    def test_repository_recipes_are_found(self):
        found = available_recipes()
        for name in ("sac", "td3", "ddpg"):
            assert found[name] == RECIPES / name
        assert find_recipe("sac") == RECIPES / "sac"

    def test_env_var_comes_first(self, toy_dir, monkeypatch):
        extra = toy_dir.parent / "second"
        extra.mkdir()
        monkeypatch.setenv("TORCHRL_RECIPES_DIR", os.pathsep.join([str(toy_dir), str(extra)]))
        dirs = recipe_dirs()
        assert dirs[:3] == [toy_dir, extra, RECIPES]
        assert find_recipe("toy") == toy_dir / "toy"

    def test_env_var_recipe_shadows_repository_one(self, tmp_path, monkeypatch):
        _toy_recipe(tmp_path, "sac", 1)
        monkeypatch.setenv("TORCHRL_RECIPES_DIR", str(tmp_path))
        assert find_recipe("sac") == tmp_path / "sac"

    def test_unknown_recipe_lists_searched_places_and_recipes(self, toy_dir):
        with pytest.raises(FileNotFoundError, match=r"no recipe 'nope'") as info:
            find_recipe("nope")
        message = str(info.value)
        assert str(toy_dir) in message and str(RECIPES) in message
        listed = re.search(r"Recipes found: (.*?)\. Set", message).group(1).split(", ")
        assert listed == sorted(listed) and {"ddpg", "other", "sac", "td3", "toy"} <= set(listed)
        assert "TORCHRL_RECIPES_DIR" in message

    def test_missing_search_directory_is_flagged(self, tmp_path, monkeypatch):
        monkeypatch.setenv("TORCHRL_RECIPES_DIR", str(tmp_path / "absent"))
        with pytest.raises(FileNotFoundError, match=r"absent  \(missing\)"):
            find_recipe("nope")

    def test_folder_without_script_is_not_a_recipe(self, tmp_path, monkeypatch):
        (tmp_path / "half").mkdir()
        (tmp_path / "half" / "config.yaml").write_text("x: 1\n")
        monkeypatch.setenv("TORCHRL_RECIPES_DIR", str(tmp_path))
        assert "half" not in available_recipes()
        with pytest.raises(FileNotFoundError, match="no recipe 'half'"):
            find_recipe("half")


class TestCompose:
    def test_default_sac_config_is_native_pendulum(self):
        cfg = compose_config("sac")
        assert cfg.env.name == "PendulumEnv" and cfg.env.max_episode_steps == 200
        assert cfg.total_frames > 0 and cfg.logger == "csv" and cfg.compile is False

    def test_overrides_and_preset(self):
        cfg = compose_config("sac", ["env=Pendulum-v1", "total_frames=20000", "seed=3", "device=cpu", "logger=",
                                     "compile=true"])
        assert (cfg.env.name, cfg.total_frames, cfg.seed, cfg.logger, cfg.compile) == ("Pendulum-v1", 20000, 3, "",
                                                                                      True)

    @pytest.mark.parametrize("algo", ["sac", "td3", "ddpg"])
    def test_halfcheetah_preset_sets_budget_and_time_limit(self, algo):
        cfg = compose_config(algo, ["env=HalfCheetah-v5"])
        assert cfg.env.name == "HalfCheetah-v5" and cfg.env.max_episode_steps == 1000
        assert cfg.total_frames == 1_000_000 and cfg.collector.frames_per_batch == 1000
        # a command-line override beats the preset
        assert compose_config(algo, ["env=HalfCheetah-v5", "total_frames=5"]).total_frames == 5

    def test_unknown_env_id_uses_the_generic_gym_preset(self):
        cfg = compose_config("td3", ["env=MountainCarContinuous-v0"])
        assert cfg.env.name == "MountainCarContinuous-v0" and cfg.env.max_episode_steps == 1000

    def test_recipe_folder_path_is_accepted(self, toy_dir):
        assert compose_config(toy_dir / "toy", ["x=5"]).x == 5

    def test_unknown_key_is_a_hydra_error(self):
        from hydra.errors import ConfigCompositionException

        with pytest.raises(ConfigCompositionException, match="no_such_key"):
            compose_config("sac", ["no_such_key=1"])

    def test_missing_hydra_says_how_to_install(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "hydra", None)
        with pytest.raises(ImportError, match=r"hydra-core .*\.\[utils\]"):
            compose_config("sac")


class TestLoad:
    def test_run_recipe_with_preset_and_override(self, toy_dir):
        assert run_recipe("toy") == (2, 10, "A")  # the preset beats the base value
        assert run_recipe("toy", ["x=7"]) == (7, 10, "A")
        assert run_recipe("toy", ["env=Some-v0"]) == (1, 10, "Some-v0")  # generic preset: base x

    def test_sibling_utils_are_private_to_each_recipe(self, toy_dir):
        sentinel = type(sys)("utils")
        sys.modules["utils"] = sentinel
        try:
            assert run_recipe("toy")[1] == 10
            assert run_recipe("other")[1] == 20
            assert sys.modules["utils"] is sentinel  # restored
        finally:
            sys.modules.pop("utils", None)
        assert str(toy_dir / "toy") not in sys.path

    def test_recipe_without_main_is_rejected(self, toy_dir):
        (toy_dir / "toy" / "toy.py").write_text("x = 1\n")
        with pytest.raises(AttributeError, match=r"toy\.py defines no main\(cfg\)"):
            load_recipe("toy")


class TestMain:
    def test_list(self, capsys):
        assert main(["--list"]) == 0
        out = capsys.readouterr().out
        for name in ("sac", "td3", "ddpg"):
            assert name in out
        assert "HalfCheetah-v5" in out and "PendulumEnv" in out

    def test_help(self, capsys):
        assert main(["--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: torchrl-train") and "Recipes: " in out

    def test_cfg_prints_composed_config(self, capsys):
        assert main(["td3", "seed=7", "env=PendulumEnv", "--cfg"]) == 0
        out = capsys.readouterr().out
        assert "seed: 7" in out and "name: PendulumEnv" in out

    def test_default_recipe_when_first_argument_is_an_override(self, capsys):
        assert main(["seed=4", "--cfg"]) == 0
        out = capsys.readouterr().out
        assert "seed: 4" in out and "alpha_init" in out  # SAC's config

    def test_unknown_recipe_exit_code(self, capsys):
        assert main(["nope"]) == 2
        assert "no recipe 'nope'" in capsys.readouterr().err

    def test_bad_override_exit_code(self, capsys):
        assert main(["sac", "no_such_key=1", "--cfg"]) == 2
        assert "no_such_key" in capsys.readouterr().err

    def test_unknown_flag(self, capsys):
        assert main(["sac", "--frobnicate"]) == 2
        assert "--frobnicate" in capsys.readouterr().err

    def test_runs_recipe(self, toy_dir, monkeypatch):
        seen = {}
        module = load_recipe("toy")
        monkeypatch.setattr(cli, "load_recipe", lambda folder: module)
        monkeypatch.setattr(module, "main", lambda cfg: seen.setdefault("x", cfg.x))
        assert main(["toy", "x=9"]) == 0
        assert seen == {"x": 9}


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "torchrl.train", "--list"], capture_output=True, text=True, timeout=300,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "sac" in out.stdout and "ddpg" in out.stdout


def test_console_script():
    script = Path(sys.executable).parent / "torchrl-train"  # installed by pip from [project.scripts]
    out = subprocess.run([str(script), "td3", "seed=11", "--cfg"], capture_output=True, text=True, timeout=300,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "seed: 11" in out.stdout and "policy_update_delay" in out.stdout


def test_import_stays_light():
    code = ("import sys, torchrl.train; "
            "print(sorted(m for m in ('hydra', 'omegaconf', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- bad options: the real command, in an empty working directory (one process per case: each imports torch, so
# they run four at a time; more cases are checked in process below and in test_validate.py) ------------------
BAD_RUNS = {
    "unknown_env": (["sac", "env=NoSuchEnv-v0"],
                    "torchrl-train sac: error: env=NoSuchEnv-v0: no such environment; close matches: none (the sac "
                    "presets: HalfCheetah-v5, Pendulum-v1, PendulumEnv;"),
    "type": (["sac", "total_frames=abc"], "torchrl-train sac: error: total_frames=abc: expected an integer, got the "
                                          "string 'abc'"),
    "discrete_for_sac": (["sac", "env=CartPole-v1"],
                         "error: env=CartPole-v1: sac needs a continuous action space; CartPole-v1 has a discrete one; "
                         "recipes that fit: dqn, ppo, a2c"),
    "range": (["ppo", "total_frames=-5"], "torchrl-train ppo: error: total_frames=-5: must be > 0 (frames to train "
                                          "on), got -5"),
    "unknown_option": (["sac", "totl_frames=10"], "torchrl-train sac: error: totl_frames=10: no option 'totl_frames' "
                                                  "in the sac config; close matches: total_frames"),
    "unknown_recipe": (["sacc"], "torchrl-train sacc: error: no recipe 'sacc'; close matches: sac"),
}
# the options are checked before the envs, models, losses and loggers are imported
LIGHT = ("import sys\nfrom torchrl.train.cli import main\nrc = main(['dqn', 'env=Pendulum-v1'])\n"
         "print(rc, sorted(m for m in ('torchrl.envs', 'torchrl.modules', 'torchrl.objectives', 'torchrl.record', "
         "'torchrl.collectors') if m in sys.modules))\n")


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Every case of BAD_RUNS (and LIGHT) run at once, each in its own empty directory: ``{name: (result, cwd)}``."""
    env = {k: v for k, v in os.environ.items() if k != "TORCHRL_RECIPES_DIR"}
    jobs = {name: [sys.executable, "-m", "torchrl.train", *args] for name, (args, _) in BAD_RUNS.items()}
    jobs["light"] = [sys.executable, "-c", LIGHT]
    dirs = {name: tmp_path_factory.mktemp(name) for name in jobs}

    def run(name):
        return name, subprocess.run(jobs[name], capture_output=True, text=True, timeout=600, cwd=dirs[name], env=env)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return {name: (out, dirs[name]) for name, out in pool.map(run, jobs)}


@pytest.mark.parametrize("name", list(BAD_RUNS))
def test_bad_option_exits_2_with_one_line_and_no_run_folder(bad_runs, name):
    out, cwd = bad_runs[name]
    assert out.returncode == 2, out.stderr
    assert BAD_RUNS[name][1] in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert list(cwd.iterdir()) == []  # no runs/ folder, nothing else
    if name != "unknown_recipe":
        assert len(out.stderr.strip().splitlines()) == 1
    else:
        assert "Recipes found: a2c, ddpg, dqn, ppo, sac, td3." in out.stderr


def test_options_are_checked_before_the_heavy_imports(bad_runs):
    out, cwd = bad_runs["light"]
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 []"
    assert "dqn needs a discrete action space" in out.stderr


@pytest.mark.parametrize("args, message", [
    (["ppo", "env=cartpole-v1"], "torchrl-train ppo: error: env=cartpole-v1: no such environment; close matches: "
                                 "CartPole-v1, CartPole-v0"),
    (["dqn", "env=Pendulum-v1"], "torchrl-train dqn: error: env=Pendulum-v1: dqn needs a discrete action space; "
                                 "Pendulum-v1 has a continuous one; recipes that fit: sac, td3, ddpg, ppo, a2c\n"),
    (["ppo", "total_frames=0", "optim.lr=-1"], "torchrl-train ppo: error: total_frames=0: must be > 0 (frames to "
                                               "train on), got 0\ntorchrl-train ppo: error: optim.lr=-1: must be > 0 "
                                               "(the learning rate), got -1\n"),
])
def test_bad_options_in_process(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(message) and captured.out == ""
    assert list(tmp_path.iterdir()) == []
