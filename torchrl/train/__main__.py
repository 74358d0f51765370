"""``python -m torchrl.train [RECIPE] [KEY=VALUE ...]``: the same as the ``torchrl-train`` command."""
from __future__ import annotations

import sys

from torchrl.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
