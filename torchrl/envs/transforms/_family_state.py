"""Re-exports of the state and episode-control transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""

__all__: list[str] = []
