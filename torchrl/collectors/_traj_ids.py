"""Global trajectory ids for process collectors.

Each worker numbers its trajectories 0, 1, 2, ... on its own. The parent maps them to one global
numbering, unique across workers and consecutive in the order batches arrive: the first time a worker's
batch shows new local ids, they get the next free block of global ids. Only the blocks that may still
appear (trajectories not finished yet) are remembered, so the state stays small however long the run.
"""
from __future__ import annotations

import torch

__all__ = ["TrajIdMapper"]


class TrajIdMapper:
    """Maps per-worker trajectory ids to global ones, in place.

    Examples:
        >>> import torch
        >>> mapper = TrajIdMapper(2)
        >>> a, b = torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1])
        >>> mapper.map_(0, a); mapper.map_(1, b)
        >>> a.tolist(), b.tolist()
        ([0, 0, 1], [2, 3, 3])
        >>> c = torch.tensor([1, 2])  # worker 0: trajectory 1 continues, trajectory 2 is new
        >>> mapper.map_(0, c); c.tolist()
        [1, 4]
    """

    def __init__(self, num_workers: int) -> None:
        self.seen = [-1] * num_workers
        self.segments: list[list[tuple[int, int]]] = [[] for _ in range(num_workers)]
        self.next_id = 0

    def map_(self, worker: int, ids: torch.Tensor) -> None:
        """Rewrites ``ids`` (local ids of ``worker``) as global ids, in place."""
        if ids.numel() == 0:
            return
        segs = self.segments[worker]
        hi = int(ids.max())
        if hi > self.seen[worker]:
            start = self.seen[worker] + 1
            segs.append((start, self.next_id - start))
            self.next_id += hi - self.seen[worker]
            self.seen[worker] = hi
        lo = int(ids.min())
        while len(segs) > 1 and segs[1][0] <= lo:
            segs.pop(0)
        if len(segs) == 1:
            ids.add_(segs[0][1])
            return
        starts = torch.tensor([s for s, _ in segs], device=ids.device)
        deltas = torch.tensor([d for _, d in segs], device=ids.device)
        ids.add_(deltas[torch.searchsorted(starts, ids, right=True) - 1])

    def state_dict(self) -> dict:
        return {"seen": list(self.seen), "segments": [list(s) for s in self.segments], "next_id": self.next_id}

    def load_state_dict(self, state: dict) -> None:
        self.seen = list(state["seen"])
        self.segments = [list(map(tuple, s)) for s in state["segments"]]
        self.next_id = int(state["next_id"])
