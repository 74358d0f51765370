"""The collector backend contract (``backend_contract.py``) run on the registered backends."""
from __future__ import annotations

from test.collectors.backend_contract import BackendContract


class TestDirectBackendContract(BackendContract):
    backend = "direct"


class TestProcessBackendContract(BackendContract):
    backend = "process"
    num_collectors = 2
