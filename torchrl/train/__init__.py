"""``torchrl.train``: the ``torchrl-train`` command and the plumbing shared by the recipes in
``sota-implementations/``.

Command line (``cli.py``; also ``python -m torchrl.train``)::

    torchrl-train [RECIPE] [KEY=VALUE ...]        # default: sac on the native PendulumEnv

:func:`run_recipe` / :func:`compose_config` / :func:`find_recipe` / :func:`load_recipe` do the same from
Python. Recipes are found in ``$TORCHRL_RECIPES_DIR``, then ``sota-implementations/`` beside the installed
package, then ``./sota-implementations``.

Writing a recipe (``sota-implementations/<name>/``: ``config.yaml``, ``<name>.py``, ``utils.py``).
The script defines ``main(cfg)`` reading top to bottom in data-flow order, with :class:`Run` doing the rest::

    from torchrl.train import Run, fast_adam

    def main(cfg):
        run = Run("dqn", cfg)              # seeds, threads, run folder, logger, progress bar
        env = make_env(cfg)                # env → model → collector → buffer → loss, all visible here
        ...
        frames = run.restore(collector=collector, loss=loss, optimizer=optimizer, buffer=buffer)
        for batch in collector:
            frames += batch.numel()
            ...                            # the algorithm's updates
            run.step(frames, batch, losses)           # returns, fps, losses every log_every frames
            if run.due(cfg.eval_every):
                run.evaluate(eval_env, actor, episodes=cfg.eval_episodes, max_steps=...)
            if run.due(cfg.checkpoint_every):
                run.save(collector=collector, loss=loss, optimizer=optimizer, buffer=buffer)
        return run.finish()                 # learning_curve.png, summary.json, prints where things are

    if __name__ == "__main__":               # python <name>.py key=value ...
        import hydra
        hydra.main(config_path=".", config_name="config", version_base=None)(main)()

The config's top-level keys read by :class:`Run`: ``total_frames``, ``seed``, ``threads``, ``logger``,
``output_dir``, ``resume``, ``progress``, ``log_every`` and ``env.name``; recipes add ``device``,
``compile``, ``eval_every``, ``eval_episodes``, ``checkpoint_every`` and their own groups. The env
records episode returns with a :class:`~torchrl.envs.RewardSum` (``"episode_reward"``), which
:meth:`Run.step` reads.

Public names:

- :class:`Run` (``_run.py``): run folder, logger (:func:`~torchrl.record.loggers.get_logger`), progress,
  deterministic evaluation, checkpoint/resume, learning curve, summary; :func:`print_summary`.
- :func:`make_env` (``_env.py``): a native env (:data:`NATIVE_ENVS`) or gymnasium id with time limit,
  float32 observations and ``RewardSum``; :func:`make_batched_env` (several of them stepped together) and
  :func:`normalize_observations` (``VecNorm`` on a train env, its frozen copy on the eval env).
- :data:`ACTIVATIONS`, :func:`make_actor_critic` (``_models.py``): activation names of the recipe configs,
  PPO's and A2C's actor (categorical or tanh-Gaussian) and critic.
- :func:`evaluate` (``_eval.py``): episode returns of a policy in deterministic mode.
- :class:`Progress` (``_progress.py``): tqdm bar over frames, or periodic lines without tqdm.
- :class:`LearningCurve`, :func:`read_curve`, :func:`plot_learning_curves` (``_curve.py``): ``curve.csv``
  and its PNG (matplotlib's Agg canvas; no PNG, and ``False`` returned, without matplotlib).
- :func:`fast_adam` (``_optim.py``): Adam with the fused kernel when available (``capturable=True`` for CUDA graphs).
- :func:`accelerate_update`, :func:`set_lr` (``_accelerate.py``): the ``compile`` and ``cudagraphs`` options of
  the recipes around their update step; learning-rate changes that a captured graph sees.
- :func:`main`, :func:`run_recipe`, :func:`compose_config`, :func:`find_recipe`, :func:`load_recipe`,
  :func:`available_recipes`, :func:`recipe_dirs` (``cli.py``).

- :func:`validated_config`, :class:`ConfigError` (``cli.py``, checks in ``_validate.py``): the composed config
  with every option checked (names, types, ranges, choices, device, logger, the env's action space).

hydra, tqdm and matplotlib (the ``utils`` extra) are imported inside the functions that need them; the names
above are imported on first access.
"""
from __future__ import annotations

import importlib

# Names resolve on first access (module ``__getattr__``), so that ``torchrl-train`` checks its options before
# the envs, models and loggers below are imported.
_LAZY = {
    "CURVE_COLUMNS": "_curve",
    "LearningCurve": "_curve",
    "plot_learning_curves": "_curve",
    "read_curve": "_curve",
    "make_batched_env": "_env",
    "make_env": "_env",
    "NATIVE_ENVS": "_env",
    "normalize_observations": "_env",
    "evaluate": "_eval",
    "ACTIVATIONS": "_models",
    "make_actor_critic": "_models",
    "fast_adam": "_optim",
    "accelerate_update": "_accelerate",
    "set_lr": "_accelerate",
    "Progress": "_progress",
    "CHECKPOINT_NAME": "_run",
    "print_summary": "_run",
    "Run": "_run",
    "available_recipes": "cli",
    "compose_config": "cli",
    "ConfigError": "cli",
    "DEFAULT_RECIPE": "cli",
    "find_recipe": "cli",
    "load_recipe": "cli",
    "main": "cli",
    "recipe_dirs": "cli",
    "run_recipe": "cli",
    "validated_config": "cli",
}

__all__ = sorted(_LAZY, key=lambda n: (not n[0].isupper(), n))


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'torchrl.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"torchrl.train.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
