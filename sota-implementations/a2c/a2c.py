"""Advantage actor-critic, synchronous (A2C; Mnih et al., 2016, https://arxiv.org/abs/1602.01783).

Reads top to bottom in data-flow order: env -> model -> collector -> loss -> loop (no buffer: each fresh
batch gives one gradient step). Run it with ``torchrl-train a2c [key=value ...]`` or
``python a2c.py [key=value ...]`` (see config.yaml).
"""
from __future__ import annotations

import torch

from torchrl.collectors import Collector
from torchrl.objectives import A2CLoss
from torchrl.objectives.value import GAE
from torchrl.train import accelerate_update, fast_adam, Run, set_lr
from utils import make_a2c_models, make_envs


def main(cfg):
    run = Run("a2c", cfg)  # seeds, threads, run folder, logger, progress bar
    device = run.device

    # 1. Environments: env.num_envs training envs, eval_episodes evaluation envs
    train_env, eval_env = make_envs(cfg, device)

    # 2. Model: stochastic actor (writes the action's log-probability) and state-value critic
    actor, critic = make_a2c_models(cfg, train_env, device)

    # 3. Collector: the current policy, frames_per_batch frames per batch (all envs together)
    collector = Collector(train_env, actor, frames_per_batch=cfg.collector.frames_per_batch,
                          total_frames=cfg.total_frames, device=device)

    # 4. Advantages (GAE; lambda 1 gives n-step returns), A2C loss, optimiser
    advantage = GAE(gamma=cfg.loss.gamma, lmbda=cfg.loss.gae_lambda, value_network=critic)
    loss = A2CLoss(
        actor,
        critic,
        entropy_bonus=cfg.loss.entropy_coeff > 0,
        entropy_coeff=cfg.loss.entropy_coeff,
        critic_coeff=cfg.loss.critic_coeff,
        loss_critic_type=cfg.loss.loss_critic_type,
    )
    params = list(loss.parameters())
    if cfg.optim.optimizer == "rmsprop":
        graphed = cfg.cudagraphs and device.type == "cuda"  # a captured step reads lr from a device tensor
        lr = torch.tensor(cfg.optim.lr, device=device) if graphed else cfg.optim.lr
        optimizer = torch.optim.RMSprop(params, lr=lr, alpha=cfg.optim.alpha, eps=cfg.optim.eps, foreach=True,
                                        capturable=graphed)
    elif cfg.optim.optimizer == "adam":
        optimizer = fast_adam(params, lr=cfg.optim.lr, eps=cfg.optim.eps, capturable=cfg.cudagraphs)
    else:
        raise ValueError(f"a2c: optim.optimizer={cfg.optim.optimizer!r}; expected 'rmsprop' or 'adam'.")

    max_grad_norm = cfg.optim.max_grad_norm  # read once: config lookups are slow in a hot loop

    def update(batch):
        losses = loss(batch)
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

    # 5. Training loop (a resumed run continues from its checkpoint's frame count)
    checkpoint = {"collector": collector, "loss": loss, "optimizer": optimizer}
    frames = run.restore(**checkpoint)
    losses = None
    for batch in collector:
        frames += batch.numel()
        if cfg.optim.anneal_lr:  # linear decay to 0 at total_frames
            set_lr(optimizer, cfg.optim.lr * max(1.0 - (frames - batch.numel()) / cfg.total_frames, 0.0))
        with torch.no_grad():
            advantage(batch)  # writes "advantage" and "value_target" ([num_envs, steps], time last)
        losses = update(batch.reshape(-1))
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
