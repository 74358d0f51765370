"""Re-exports of the statistics and model transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""

__all__: list[str] = []
