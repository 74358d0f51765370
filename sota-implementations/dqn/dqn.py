"""Deep Q-learning (Mnih et al., 2015, https://www.nature.com/articles/nature14236) on discrete actions.

Reads top to bottom in data-flow order: env -> model -> collector -> replay buffer -> loss -> loop.
Run it with ``torchrl-train dqn [key=value ...]`` or ``python dqn.py [key=value ...]`` (see config.yaml).
"""
from __future__ import annotations

import torch

from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.objectives import DQNLoss, HardUpdate
from torchrl.train import accelerate_update, fast_adam, Run, set_lr
from utils import make_dqn_agent, make_envs

# What the loss reads: the rest of each collected frame (Q-values, step counts...) is not stored.
STORED_KEYS = ["observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done"),
               ("next", "terminated")]


def main(cfg):
    run = Run("dqn", cfg)  # seeds, threads, run folder, logger, progress bar
    device = run.device

    # 1. Environments: env.num_envs training envs, eval_episodes evaluation envs
    train_env, eval_env = make_envs(cfg, device)

    # 2. Model: the Q-network (greedy policy) and the epsilon-greedy exploration policy around it
    qnet, policy = make_dqn_agent(cfg, train_env, device)
    exploration = policy[-1]

    # 3. Collector: random actions for the first init_random_frames, then epsilon-greedy
    collector = Collector(
        train_env,
        policy,
        frames_per_batch=cfg.collector.frames_per_batch,
        total_frames=cfg.total_frames,
        init_random_frames=cfg.collector.init_random_frames,
        device=device,
    )

    # 4. Replay buffer (allocated on the first write)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer.size, device=device),
        batch_size=cfg.buffer.batch_size,
    )

    # 5. Loss (TD(0) target from a target network copied every target_update_interval updates), optimiser
    loss = DQNLoss(qnet, loss_function=cfg.loss.loss_function, double_dqn=cfg.loss.double_dqn,
                   delay_value=True, action_space=train_env.action_spec_unbatched)
    loss.make_value_estimator(gamma=cfg.loss.gamma)
    target_updater = HardUpdate(loss, value_network_update_interval=cfg.loss.target_update_interval)
    params = list(loss.value_network_params.values(True, True))
    optimizer = fast_adam(params, lr=cfg.optim.lr, capturable=cfg.cudagraphs)

    max_grad_norm = cfg.optim.max_grad_norm  # read once: config lookups are slow in a hot loop

    def update(sample):
        losses = loss(sample)
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        return losses.detach()

    update = accelerate_update(update, compile=cfg.compile, cudagraphs=cfg.cudagraphs, device=device)

    # 6. Training loop (a resumed run continues from its checkpoint's frame count)
    checkpoint = {"collector": collector, "loss": loss, "optimizer": optimizer, "target_updater": target_updater}
    if cfg.buffer.save_in_checkpoint:
        checkpoint["buffer"] = buffer
    frames = run.restore(**checkpoint)
    losses = None
    for batch in collector:
        buffer.extend(batch.select(*STORED_KEYS).reshape(-1))
        frames += batch.numel()
        exploration.step(batch.numel())
        if len(buffer) >= cfg.collector.init_random_frames:
            # linear learning-rate decay over the run (to lr * lr_end_factor)
            decay = 1.0 - (1.0 - cfg.optim.lr_end_factor) * min(frames / cfg.total_frames, 1.0)
            set_lr(optimizer, cfg.optim.lr * decay)
            for _ in range(cfg.optim.updates_per_batch):
                losses = update(buffer.sample())
                target_updater.step()
            collector.update_policy_weights_()
        run.step(frames, batch, losses, epsilon=exploration.eps)
        if run.due(cfg.eval_every):
            run.evaluate(eval_env, qnet, episodes=cfg.eval_episodes, max_steps=cfg.env.max_episode_steps)
        if run.due(cfg.checkpoint_every):
            run.save(**checkpoint)

    collector.shutdown()
    eval_env.close()
    return run.finish()


if __name__ == "__main__":
    import hydra

    hydra.main(config_path=".", config_name="config", version_base=None)(main)()
