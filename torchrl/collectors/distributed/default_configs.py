"""Defaults of the distributed collectors: SLURM job parameters, the store's port, the time to connect."""
from __future__ import annotations

__all__ = ["DEFAULT_SLURM_CONF", "DEFAULT_SLURM_CONF_MAIN", "MAX_TIME_TO_CONNECT", "TCP_PORT"]

TCP_PORT = "10003"  # the port the delayed launcher's nodes expect by default
MAX_TIME_TO_CONNECT = 1000  # seconds the nodes have to join the trainer's group
DEFAULT_SLURM_CONF = {"timeout_min": 10, "slurm_partition": "train", "slurm_cpus_per_task": 32, "slurm_gpus_per_node": 0}
DEFAULT_SLURM_CONF_MAIN = {"timeout_min": 10, "slurm_partition": "train", "slurm_cpus_per_task": 32, "slurm_gpus_per_node": 1}
