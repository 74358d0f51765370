"""The ``torchrl`` logger.

The level is read once from the ``RL_LOGGING_LEVEL`` environment variable (default ``INFO``).
"""
from __future__ import annotations

import logging
import os
import sys

__all__ = ["logger", "torchrl_logger"]


def _make_logger() -> logging.Logger:
    log = logging.getLogger("torchrl")
    if not log.handlers:
        handler = logging.StreamHandler(stream=sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(os.environ.get("RL_LOGGING_LEVEL", "INFO").upper())
    return log


logger = _make_logger()
torchrl_logger = logger
