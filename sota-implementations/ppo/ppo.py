"""Proximal policy optimisation, clipped objective (Schulman et al., 2017, https://arxiv.org/abs/1707.06347).

Reads top to bottom in data-flow order: env -> model -> collector -> buffer -> loss -> loop.
Run it with ``torchrl-train ppo [key=value ...]`` or ``python ppo.py [key=value ...]`` (see config.yaml).
"""
from __future__ import annotations

import torch

from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE
from torchrl.train import accelerate_update, fast_adam, Run, set_lr
from utils import make_envs, make_ppo_models


def main(cfg):
    run = Run("ppo", cfg)  # seeds, threads, run folder, logger, progress bar
    device = run.device

    # 1. Environments: env.num_envs training envs, eval_episodes evaluation envs
    train_env, eval_env = make_envs(cfg, device)

    # 2. Model: stochastic actor (writes the action's log-probability) and state-value critic
    actor, critic = make_ppo_models(cfg, train_env, device)

    # 3. Collector: the current policy, frames_per_batch frames per batch (all envs together)
    frames_per_batch = cfg.collector.frames_per_batch
    collector = Collector(train_env, actor, frames_per_batch=frames_per_batch, total_frames=cfg.total_frames,
                          device=device)

    # 4. Buffer: holds one batch; each epoch visits it once in shuffled minibatches
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(frames_per_batch, device=device),
        sampler=SamplerWithoutReplacement(),
        batch_size=cfg.optim.minibatch_size,
    )

    # 5. Advantages (GAE), clipped PPO loss, optimiser
    advantage = GAE(gamma=cfg.loss.gamma, lmbda=cfg.loss.gae_lambda, value_network=critic)
    loss = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=cfg.loss.clip_epsilon,
        entropy_bonus=cfg.loss.entropy_coeff > 0,
        entropy_coeff=cfg.loss.entropy_coeff,
        critic_coeff=cfg.loss.critic_coeff,
        loss_critic_type=cfg.loss.loss_critic_type,
        normalize_advantage=cfg.loss.normalize_advantage,
    )
    params = list(loss.parameters())
    optimizer = fast_adam(params, lr=cfg.optim.lr, eps=1e-5, capturable=cfg.cudagraphs)

    max_grad_norm = cfg.optim.max_grad_norm  # read once: config lookups are slow in a hot loop

    def update(minibatch):
        losses = loss(minibatch)
        total = losses["loss_objective"] + losses["loss_critic"]
        if "loss_entropy" in losses.keys():
            total = total + losses["loss_entropy"]
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        return losses.detach()

    update = accelerate_update(update, compile=cfg.compile, cudagraphs=cfg.cudagraphs, device=device)

    # 6. Training loop (a resumed run continues from its checkpoint's frame count)
    checkpoint = {"collector": collector, "loss": loss, "optimizer": optimizer}
    frames = run.restore(**checkpoint)
    losses = None
    for batch in collector:
        frames += batch.numel()
        if cfg.optim.anneal_lr:  # linear decay to 0 at total_frames
            set_lr(optimizer, cfg.optim.lr * max(1.0 - (frames - batch.numel()) / cfg.total_frames, 0.0))
        with torch.no_grad():
            advantage(batch)  # writes "advantage" and "value_target" ([num_envs, steps], time last)
        buffer.extend(batch.reshape(-1))
        for _ in range(cfg.optim.epochs):
            for minibatch in buffer:
                losses = update(minibatch)
        collector.update_policy_weights_()
        run.step(frames, batch, losses)
        if run.due(cfg.eval_every):
            run.evaluate(eval_env, actor, episodes=cfg.eval_episodes, max_steps=cfg.env.max_episode_steps)
        if run.due(cfg.checkpoint_every):
            run.save(**checkpoint)

    collector.shutdown()
    eval_env.close()
    return run.finish()


if __name__ == "__main__":
    import hydra

    hydra.main(config_path=".", config_name="config", version_base=None)(main)()
