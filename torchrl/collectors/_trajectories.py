"""Complete-trajectory batches (``Collector(trajs_per_batch=...)``).

The collector still steps ``frames_per_batch`` frames at a time; :class:`TrajectoryAssembler` cuts each
batch into runs of one trajectory id (``("collector", "traj_ids")``), appends each run to the trajectory it
continues, and sets a trajectory aside once its last step is done. Batches are built from the finished
trajectories only: ``"padded"`` stacks them as ``(trajs_per_batch, longest)`` with zeros after each
trajectory's end and a ``("collector", "mask")`` entry marking the real steps; ``"cat"`` concatenates them
along time into one flat batch. Unfinished trajectories never leave the collector.
"""
from __future__ import annotations

from typing import Literal

import torch
from tensordict import TensorDictBase, pad

__all__ = ["TrajectoryAssembler"]

TRAJ_IDS = ("collector", "traj_ids")
MASK = ("collector", "mask")


class TrajectoryAssembler:
    """Reassembles fixed-size collector batches into complete trajectories.

    Args:
        done_keys: the root done entries (read under ``"next"``) that end a trajectory.
        env_batch_dims: how many leading dims of a collected batch are the env's batch dims.

    Keyword Args:
        traj_format: ``"padded"`` or ``"cat"`` (see the module docstring).
    """

    def __init__(self, done_keys: list, env_batch_dims: int, *, traj_format: Literal["padded", "cat"] = "padded") -> None:
        if traj_format not in ("padded", "cat"):
            raise ValueError(f"traj_format must be 'padded' or 'cat', got {traj_format!r}.")
        self.done_keys = [("next", k) if isinstance(k, str) else ("next", *k) for k in done_keys]
        self.env_batch_dims = env_batch_dims
        self.traj_format = traj_format
        self._open: dict[int, list[TensorDictBase]] = {}  # traj id -> its runs so far
        self.finished: list[TensorDictBase] = []  # complete trajectories (1-D along time), oldest first

    def push(self, batch: TensorDictBase) -> int:
        """Takes one collected batch (``(*env_batch, T)``); returns how many trajectories it completed."""
        rows = batch.reshape(-1, batch.shape[-1]) if self.env_batch_dims else batch.unsqueeze(0)
        ids = rows.get(TRAJ_IDS)
        ends = self._ends(rows)
        completed = []
        for r in range(rows.shape[0]):
            row_ids = ids[r]
            starts = [0, *(torch.nonzero(row_ids[1:] != row_ids[:-1]).squeeze(-1) + 1).tolist(), row_ids.numel()]
            for start, stop in zip(starts[:-1], starts[1:]):
                tid = int(row_ids[start])
                runs = self._open.setdefault(tid, [])
                runs.append(rows[r, start:stop])
                if bool(ends[r, stop - 1]):
                    completed.append((tid, self._open.pop(tid)))
        completed.sort(key=lambda item: item[0])
        for _, runs in completed:
            self.finished.append(runs[0] if len(runs) == 1 else torch.cat(runs, 0))
        return len(completed)

    def _ends(self, rows: TensorDictBase) -> torch.Tensor:
        end = None
        for key in self.done_keys:
            value = rows.get(key, None)
            if value is None:
                continue
            value = value.reshape(*rows.shape, -1).any(-1)
            end = value if end is None else end | value
        if end is None:
            raise KeyError(f"trajs_per_batch: the collected data has none of the done entries {self.done_keys}.")
        return end

    def pop(self, count: int) -> TensorDictBase:
        """The ``count`` oldest finished trajectories as one batch in ``traj_format``."""
        trajs, self.finished = self.finished[:count], self.finished[count:]
        if self.traj_format == "cat":
            return torch.cat(trajs, 0)
        longest = max(t.shape[0] for t in trajs)
        padded = [pad(t, [0, longest - t.shape[0]]) if t.shape[0] < longest else t for t in trajs]
        out = torch.stack(padded, 0)
        if any(t.shape[0] < longest for t in trajs):
            out.names = None  # (as TorchRL: padded rows lose the "time" name; equal-length ones keep it)
        lengths = torch.tensor([t.shape[0] for t in trajs], device=out.device)
        out.set(MASK, torch.arange(longest, device=out.device).expand(len(trajs), longest) < lengths.unsqueeze(-1))
        return out

    # -- state -------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"open": {k: list(v) for k, v in self._open.items()}, "finished": list(self.finished)}

    def load_state_dict(self, state: dict) -> None:
        self._open = {int(k): list(v) for k, v in state.get("open", {}).items()}
        self.finished = list(state.get("finished", []))
