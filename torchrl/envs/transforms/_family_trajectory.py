"""Re-exports of the trajectory transforms (n-step, reward-to-go, burn-in, truncation, crops) (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""

__all__: list[str] = []
