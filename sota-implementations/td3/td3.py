"""TD3: twin delayed deep deterministic policy gradient (Fujimoto et al., 2018, https://arxiv.org/abs/1802.09477).

Reads top to bottom in data-flow order: env -> model -> collector -> replay buffer -> loss -> loop.
Run it with ``torchrl-train td3 [key=value ...]`` or ``python td3.py [key=value ...]`` (see config.yaml).
"""
from __future__ import annotations

from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.objectives import SoftUpdate, TD3Loss
from torchrl.train import accelerate_update, fast_adam, Run
from utils import half_width, make_envs, make_td3_agent

# What the loss reads: the rest of each collected frame is not stored.
STORED_KEYS = ["observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done"),
               ("next", "terminated")]


def main(cfg):
    run = Run("td3", cfg)  # seeds, threads, run folder, logger, progress bar
    device = run.device

    # 1. Environments: training, and evaluation with the deterministic policy
    train_env, eval_env = make_envs(cfg, device)

    # 2. Model: deterministic actor, Q-network (the loss makes the twin ensemble), actor + Gaussian noise
    actor, qvalue, exploration_policy = make_td3_agent(cfg, train_env, device)

    # 3. Collector: random actions for the first init_random_frames, then the noisy actor
    collector = Collector(
        train_env,
        exploration_policy,
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

    # 5. Loss (clipped double-Q with target-policy smoothing), target networks, one optimiser per part
    scale = half_width(train_env.action_spec)
    loss = TD3Loss(
        actor,
        qvalue,
        action_spec=train_env.action_spec,
        num_qvalue_nets=cfg.loss.num_qvalue_nets,
        policy_noise=cfg.loss.policy_noise * scale,
        noise_clip=cfg.loss.noise_clip * scale,
        loss_function=cfg.loss.loss_function,
    )
    loss.make_value_estimator(gamma=cfg.loss.gamma)
    target_updater = SoftUpdate(loss, tau=cfg.loss.tau)
    critic_optimizer = fast_adam(loss.qvalue_network_params.values(True, True), lr=cfg.optim.lr,
                                 capturable=cfg.cudagraphs)
    actor_optimizer = fast_adam(loss.actor_network_params.values(True, True), lr=cfg.optim.lr,
                                capturable=cfg.cudagraphs)

    def update_critic(sample):
        loss_qvalue, _ = loss.value_loss(sample)
        critic_optimizer.zero_grad(set_to_none=True)
        loss_qvalue.backward()
        critic_optimizer.step()
        return loss_qvalue.detach()

    def update_actor(sample):
        loss_actor, _ = loss.actor_loss(sample)  # -Q_0(s, actor(s)), Q held fixed
        actor_optimizer.zero_grad(set_to_none=True)
        loss_actor.backward()
        actor_optimizer.step()
        target_updater.step()
        return loss_actor.detach()

    update_critic = accelerate_update(update_critic, compile=cfg.compile, cudagraphs=cfg.cudagraphs, device=device)
    update_actor = accelerate_update(update_actor, compile=cfg.compile, cudagraphs=cfg.cudagraphs, device=device)

    # 6. Training loop (a resumed run continues from its checkpoint's frame count)
    checkpoint = {"collector": collector, "loss": loss, "critic_optimizer": critic_optimizer,
                  "actor_optimizer": actor_optimizer}
    if cfg.buffer.save_in_checkpoint:
        checkpoint["buffer"] = buffer
    frames = run.restore(**checkpoint)
    updates_per_batch = max(1, round(cfg.collector.frames_per_batch * cfg.optim.utd_ratio))
    losses, num_updates = {}, 0
    for batch in collector:
        buffer.extend(batch.select(*STORED_KEYS).reshape(-1))
        frames += batch.numel()
        if len(buffer) >= cfg.collector.init_random_frames:
            for _ in range(updates_per_batch):
                sample = buffer.sample()
                losses["loss_qvalue"] = update_critic(sample)
                num_updates += 1
                if num_updates % cfg.optim.policy_update_delay == 0:
                    losses["loss_actor"] = update_actor(sample)
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
