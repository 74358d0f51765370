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
- :func:`fast_adam` (``_optim.py``): Adam with the fused kernel when available.
- :func:`main`, :func:`run_recipe`, :func:`compose_config`, :func:`find_recipe`, :func:`load_recipe`,
  :func:`available_recipes`, :func:`recipe_dirs` (``cli.py``).

hydra, tqdm and matplotlib (the ``utils`` extra) are imported inside the functions that need them.
"""
from __future__ import annotations

from torchrl.train._curve import CURVE_COLUMNS, LearningCurve, plot_learning_curves, read_curve
from torchrl.train._env import make_batched_env, make_env, NATIVE_ENVS, normalize_observations
from torchrl.train._eval import evaluate
from torchrl.train._models import ACTIVATIONS, make_actor_critic
from torchrl.train._optim import fast_adam
from torchrl.train._progress import Progress
from torchrl.train._run import CHECKPOINT_NAME, print_summary, Run
from torchrl.train.cli import (
    available_recipes,
    compose_config,
    DEFAULT_RECIPE,
    find_recipe,
    load_recipe,
    main,
    recipe_dirs,
    run_recipe,
)

__all__ = [
    "ACTIVATIONS",
    "CHECKPOINT_NAME",
    "CURVE_COLUMNS",
    "DEFAULT_RECIPE",
    "LearningCurve",
    "NATIVE_ENVS",
    "Progress",
    "Run",
    "available_recipes",
    "compose_config",
    "evaluate",
    "fast_adam",
    "find_recipe",
    "load_recipe",
    "main",
    "make_actor_critic",
    "make_batched_env",
    "make_env",
    "normalize_observations",
    "plot_learning_curves",
    "print_summary",
    "read_curve",
    "recipe_dirs",
    "run_recipe",
]
