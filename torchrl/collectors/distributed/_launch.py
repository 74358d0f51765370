"""Where collection nodes run: launchers, the node entry point, and the rendezvous of the process group.

A node is one process of rank ``r >= 1`` in a torch.distributed group whose rank 0 is the trainer. The
trainer hosts the group's store; :func:`rendezvous` waits until every node has checked in there, watching
the launcher so that a node that dies before joining (a failed import, a job that never started) raises
at once, naming its rank and cause, instead of hanging. Launchers:

- :class:`ProcessLauncher` (``launcher="mp"``): processes of this machine (``fork`` where it is safe).
- :class:`SubmititLauncher` (``"submitit"``): one submitit job per node (SLURM where ``sbatch`` exists,
  else submitit's local executor: subprocesses of this machine).
- :class:`DelayedLauncher` (``"submitit_delayed"``): nodes started beforehand by
  :func:`~torchrl.collectors.distributed.submitit_delayed_launcher`; they wait for the trainer's address in
  a rendezvous file, then receive what to build.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import time
from datetime import timedelta
from typing import Any, Callable

import torch.distributed as dist

from torchrl.collectors.distributed._wire import TAG_DOWN, TAG_UP, GlooChannel
from torchrl.envs._workers import default_start_method, exit_text, serve
from torchrl.envs._workers.pool import _start_process, stop_processes

__all__ = ["DelayedLauncher", "ProcessLauncher", "SubmititLauncher", "free_port", "host_address", "node_main",
           "check_no_group", "host_store", "rendezvous"]

GROUP_TIMEOUT = timedelta(days=7)  # point-to-point waits are bounded by death detection, not by a timer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def host_address() -> str:
    """This machine's address as other nodes reach it (``MASTER_ADDR`` when set)."""
    return os.environ.get("MASTER_ADDR") or socket.gethostbyname(socket.gethostname())


def node_main(rank: int, world_size: int, addr: str, port: int, backend: str, spec: Any) -> None:
    """A collection node: joins the trainer's group, builds ``spec``'s collector and serves commands over
    point-to-point messages until the trainer closes it (or is gone). ``spec=None``: receive it first
    (delayed launch)."""
    if mp.current_process().name != "MainProcess":
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    store = dist.TCPStore(addr, port, world_size, is_master=False, timeout=GROUP_TIMEOUT)
    store.set(f"torchrl/joined/{rank}", "1")
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=GROUP_TIMEOUT)
    chan = GlooChannel(0, out_tag=TAG_UP, in_tag=TAG_DOWN, blocking=True)
    try:
        if spec is None:
            import cloudpickle

            spec = cloudpickle.loads(chan.recv())
        serve(chan, spec, rank - 1)
        try:
            chan.bye()
        except RuntimeError:
            pass
    finally:
        dist.destroy_process_group()


def check_no_group(owner: str) -> None:
    """Raises ``RuntimeError`` if this process already belongs to a default process group."""
    if dist.is_initialized():
        raise RuntimeError(f"{owner}: this process already has a default torch.distributed process group; the "
                           f"collector's trainer must be rank 0 of a group of its own (call "
                           f"torch.distributed.destroy_process_group() first).")


def host_store(addr: str, port: int, world_size: int) -> "dist.TCPStore":
    """The group's store, hosted by the trainer (``port=0``: a free port the OS picks, read back from
    ``store.port``; no other process can take it between the choice and the bind)."""
    return dist.TCPStore(addr, port, world_size, is_master=True, wait_for_workers=False, timeout=GROUP_TIMEOUT)


def rendezvous(launcher: "Launcher", store: "dist.TCPStore", *, backend: str, world_size: int, owner: str,
               max_wait: float) -> None:
    """Joins the group as rank 0 once every node checked in at ``store``.

    Raises:
        RuntimeError: a node died first (naming its rank and cause), or ``max_wait`` seconds passed.
    """
    keys = [f"torchrl/joined/{r}" for r in range(1, world_size)]
    deadline = time.monotonic() + max_wait
    while not store.check(keys):
        for r in range(1, world_size):
            cause = launcher.dead(r)
            if cause is not None and not store.check([f"torchrl/joined/{r}"]):
                raise RuntimeError(f"{owner}: collection node of rank {r} died before joining ({cause}).")
        if time.monotonic() > deadline:
            missing = [r for r, k in zip(range(1, world_size), keys) if not store.check([k])]
            raise RuntimeError(f"{owner}: collection nodes of ranks {missing} did not join within {max_wait:.0f} s "
                               f"(store on port {store.port}).")
        time.sleep(0.01)
    dist.init_process_group(backend, store=store, rank=0, world_size=world_size, timeout=GROUP_TIMEOUT)


class Launcher:
    """Starts the node processes and tells whether (and why) one is gone."""

    def launch(self, target: Callable, args: dict[int, tuple]) -> None:
        """Starts ``target(*args[rank])`` for each rank."""
        raise NotImplementedError

    def dead(self, rank: int) -> str | None:
        """Why node ``rank`` is not running anymore (``None``: it runs)."""
        raise NotImplementedError

    def shutdown(self, timeout: float) -> None:
        """Waits up to ``timeout`` s for the nodes to exit, then stops them."""
        raise NotImplementedError


class ProcessLauncher(Launcher):
    """Nodes as processes of this machine.

    Args:
        start_method: the multiprocessing start method (default: ``fork`` where safe).
    """

    def __init__(self, start_method: str | None = None) -> None:
        self.method = start_method or default_start_method()
        self.procs: dict[int, Any] = {}

    def launch(self, target: Callable, args: dict[int, tuple]) -> None:
        ctx = mp.get_context(self.method)
        for rank, rank_args in args.items():
            proc = ctx.Process(target=target, args=rank_args, name=f"torchrl-collection-node-{rank}", daemon=False)
            _start_process(proc, self.method)
            self.procs[rank] = proc

    def dead(self, rank: int) -> str | None:
        proc = self.procs.get(rank)
        if proc is None or proc.is_alive():
            return None
        proc.join(0.5)
        return exit_text(proc.exitcode)

    def shutdown(self, timeout: float) -> None:
        stop_processes(list(self.procs.values()), timeout)
        self.procs = {}


def _submitit():
    try:
        import submitit
    except ImportError as err:
        raise ImportError("launcher='submitit' needs the submitit package: pip install submitit") from err
    return submitit


class SubmititLauncher(Launcher):
    """One submitit job per node (SLURM where available, else submitit's local executor).

    Args:
        slurm_kwargs: the executor's parameters (``timeout_min``, ``slurm_partition``, ...); ``folder``: where
            submitit keeps its logs (default ``"log_test"``, as TorchRL).
    """

    def __init__(self, slurm_kwargs: dict | None = None) -> None:
        submitit = _submitit()
        kwargs = dict(slurm_kwargs or {})
        self.folder = kwargs.pop("folder", "log_test")
        self.executor = submitit.AutoExecutor(folder=self.folder, cluster=kwargs.pop("cluster", None))
        if self.executor.cluster != "slurm":
            kwargs = {k: v for k, v in kwargs.items() if not k.startswith("slurm_")}
        self.executor.update_parameters(**kwargs)
        self.jobs: dict[int, Any] = {}

    def launch(self, target: Callable, args: dict[int, tuple]) -> None:
        for rank, rank_args in args.items():
            self.jobs[rank] = self.executor.submit(target, *rank_args)

    def dead(self, rank: int) -> str | None:
        job = self.jobs.get(rank)
        if job is None or not job.done():
            return None
        try:
            err = job.exception()
        except Exception as exc:  # noqa: BLE001 - submitit raises when the job's result is unreadable
            err = exc
        state = getattr(job, "state", "DONE")
        return f"job {job.job_id} {state}" + (f": {str(err).strip().splitlines()[-1]}" if err else "")

    def shutdown(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for job in self.jobs.values():
            while not job.done() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not job.done():
                job.cancel(check=False)
        self.jobs = {}


class DelayedLauncher(Launcher):
    """Nodes already started by :func:`~torchrl.collectors.distributed.submitit_delayed_launcher`: the
    trainer writes its address to their rendezvous file (``TORCHRL_RENDEZVOUS_FILE``), they join, and each
    receives its spec as a first message."""

    def __init__(self) -> None:
        self.path = os.environ.get("TORCHRL_RENDEZVOUS_FILE")
        if not self.path:
            raise RuntimeError("launcher='submitit_delayed' runs inside a function decorated with "
                               "submitit_delayed_launcher(...), which starts the collection nodes; "
                               "TORCHRL_RENDEZVOUS_FILE is not set.")

    def announce(self, addr: str, port: int) -> None:
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{addr}:{port}")
        os.replace(tmp, self.path)

    def launch(self, target: Callable, args: dict[int, tuple]) -> None:
        """The nodes run already; the transport sends their specs after the rendezvous."""

    def dead(self, rank: int) -> str | None:
        return None

    def shutdown(self, timeout: float) -> None:
        try:
            os.remove(self.path)
        except OSError:
            pass
