"""Soft actor-critic (Haarnoja et al., 2018, https://arxiv.org/abs/1812.05905) on continuous control.

Reads top to bottom in data-flow order: env -> model -> collector -> replay buffer -> loss -> loop.
Run it with ``torchrl-train sac [key=value ...]`` or ``python sac.py [key=value ...]`` (see config.yaml).
"""
from __future__ import annotations

from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.objectives import SACLoss, SoftUpdate
from torchrl.train import accelerate_update, fast_adam, Run
from utils import make_envs, make_sac_agent

# What the loss reads: the rest of each collected frame (loc, scale, step counts...) is not stored.
STORED_KEYS = ["observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done"),
               ("next", "terminated")]


def main(cfg):
    run = Run("sac", cfg)  # seeds, threads, run folder, logger, progress bar
    device = run.device

    # 1. Environments: training, and evaluation with the deterministic policy
    train_env, eval_env = make_envs(cfg, device)

    # 2. Model: tanh-Gaussian actor, Q-network (the loss makes the ensemble of num_qvalue_nets)
    actor, qvalue = make_sac_agent(cfg, train_env, device)

    # 3. Collector: random actions for the first init_random_frames, then the stochastic actor
    collector = Collector(
        train_env,
        actor,
        frames_per_batch=cfg.collector.frames_per_batch,
        total_frames=cfg.total_frames,
        init_random_frames=cfg.collector.init_random_frames,
        device=device,
    )

    # 4. Replay buffer
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer.size, device=device),
        batch_size=cfg.buffer.batch_size,
    )

    # 5. Loss, target networks, optimiser (one Adam, a parameter group per network)
    loss = SACLoss(
        actor,
        qvalue,
        num_qvalue_nets=cfg.loss.num_qvalue_nets,
        loss_function=cfg.loss.loss_function,
        alpha_init=cfg.loss.alpha_init,
        action_spec=train_env.action_spec,
    )
    loss.make_value_estimator(gamma=cfg.loss.gamma)
    target_updater = SoftUpdate(loss, tau=cfg.loss.tau)
    optimizer = fast_adam([
        {"params": list(loss.actor_network_params.values(True, True)), "lr": cfg.optim.lr},
        {"params": list(loss.qvalue_network_params.values(True, True)), "lr": cfg.optim.lr},
        {"params": [loss.log_alpha], "lr": cfg.optim.alpha_lr},
    ], capturable=cfg.cudagraphs)

    def update(sample):
        losses = loss(sample)
        # the actor term holds the Q-networks fixed and the temperature term the log-probabilities:
        # one backward through the sum trains each part with its own loss
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        target_updater.step()
        return losses.detach()

    update = accelerate_update(update, compile=cfg.compile, cudagraphs=cfg.cudagraphs, device=device)

    # 6. Training loop (a resumed run continues from its checkpoint's frame count)
    checkpoint = {"collector": collector, "loss": loss, "optimizer": optimizer}
    if cfg.buffer.save_in_checkpoint:
        checkpoint["buffer"] = buffer
    frames = run.restore(**checkpoint)
    updates_per_batch = max(1, round(cfg.collector.frames_per_batch * cfg.optim.utd_ratio))
    losses = None
    for batch in collector:
        buffer.extend(batch.select(*STORED_KEYS).reshape(-1))
        frames += batch.numel()
        if len(buffer) >= cfg.collector.init_random_frames:
            for _ in range(updates_per_batch):
                losses = update(buffer.sample())
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
