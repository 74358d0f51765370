"""``submitit_delayed_launcher``: collection nodes submitted beside the main job, waiting for its address."""
from __future__ import annotations

import functools
import os
import time
import uuid
from typing import Any, Callable

from torchrl.collectors.distributed._launch import _submitit, node_main
from torchrl.collectors.distributed.default_configs import DEFAULT_SLURM_CONF, DEFAULT_SLURM_CONF_MAIN, TCP_PORT

__all__ = ["submitit_delayed_launcher"]

_FRAMEWORKS = ("distributed", "rpc")


def _delayed_node(rank: int, world_size: int, path: str, framework: str, backend: str, max_wait: float) -> None:
    """A pre-started node: waits for the trainer's ``addr:port`` in ``path``, then joins and serves."""
    deadline = time.monotonic() + max_wait
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"collection node {rank}: no trainer announced itself in {path} within {max_wait:.0f} s.")
        time.sleep(0.05)
    with open(path) as f:
        addr, port = f.read().strip().rsplit(":", 1)
    if framework == "rpc":
        from torchrl.collectors.distributed._rpc import rpc_node_main

        rpc_node_main(rank, world_size, addr, int(port), None, None)
    else:
        node_main(rank, world_size, addr, int(port), backend, None)


def _main_with_rendezvous(main_func: Callable, path: str, args: tuple, kwargs: dict) -> Any:
    os.environ["TORCHRL_RENDEZVOUS_FILE"] = path
    return main_func(*args, **kwargs)


def _executor(submitit, conf: dict):
    conf = dict(conf)
    folder = conf.pop("folder", "log_test")
    executor = submitit.AutoExecutor(folder=folder, cluster=conf.pop("cluster", None))
    if executor.cluster != "slurm":
        conf = {k: v for k, v in conf.items() if not k.startswith("slurm_")}
    executor.update_parameters(**conf)
    return executor, folder


class submitit_delayed_launcher:  # noqa: N801 - TorchRL's name
    """Decorates a main function so that calling it submits the main job and ``num_jobs`` collection jobs.

    For clusters where a job cannot submit jobs itself: the collection nodes start beside the main job and
    wait; the main function builds its collector with ``launcher="submitit_delayed"`` (and one env factory
    per node), which writes the trainer's address to the nodes' rendezvous file (in the submitit log folder,
    which must be shared by the nodes). Calling the decorated function returns the main job's result.

    Args:
        num_jobs: the number of collection nodes.
        framework: ``"distributed"`` (for :class:`DistributedCollector`) or ``"rpc"`` (:class:`RPCCollector`).
        backend: the torch.distributed backend (must match the collector's).
        tcpport: kept for TorchRL compatibility: the trainer announces the port it uses.
        submitit_main_conf / submitit_collection_conf: the executors' parameters (``folder``: submitit's log
            folder, default ``"log_test"``).

    Examples:
        >>> from torchrl.collectors.distributed import submitit_delayed_launcher
        >>> launcher = submitit_delayed_launcher(num_jobs=2)
        >>> launcher.num_jobs, launcher.framework
        (2, 'distributed')
    """

    def __init__(self, num_jobs, framework="distributed", backend="gloo", tcpport=TCP_PORT,
                 submitit_main_conf: dict = DEFAULT_SLURM_CONF_MAIN,
                 submitit_collection_conf: dict = DEFAULT_SLURM_CONF) -> None:
        if framework not in _FRAMEWORKS:
            raise ValueError(f"submitit_delayed_launcher: framework must be one of {_FRAMEWORKS}, got {framework!r}.")
        self.num_jobs = int(num_jobs)
        self.framework = framework
        self.backend = backend
        self.tcpport = tcpport
        self.submitit_main_conf = dict(submitit_main_conf)
        self.submitit_collection_conf = dict(submitit_collection_conf)
        self.max_wait = 1000.0

    def __call__(self, main_func):
        @functools.wraps(main_func)
        def launch(*args, **kwargs):
            submitit = _submitit()
            main_executor, folder = _executor(submitit, self.submitit_main_conf)
            node_executor, _ = _executor(submitit, self.submitit_collection_conf)
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(os.path.abspath(folder), f"torchrl-rendezvous-{uuid.uuid4().hex}")
            main_job = main_executor.submit(_main_with_rendezvous, main_func, path, args, kwargs)
            nodes = [node_executor.submit(_delayed_node, rank, self.num_jobs + 1, path, self.framework, self.backend,
                                          self.max_wait) for rank in range(1, self.num_jobs + 1)]
            try:
                return main_job.result()
            finally:
                for job in nodes:
                    if not job.done():
                        job.cancel(check=False)

        return launch
