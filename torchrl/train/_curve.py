"""Learning curves: ``curve.csv`` rows (frames, wall and CPU seconds, train/eval return) and their PNG plot.

The CSV is written whatever the logger, so a run always leaves a curve behind; the PNG needs matplotlib
(the ``utils`` extra), imported when a plot is drawn and used through its Agg canvas (no pyplot, no global
backend switch).
"""
from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CURVE_COLUMNS", "LearningCurve", "plot_learning_curves", "read_curve"]

#: Columns of ``curve.csv``; an empty cell means "not measured at this row".
CURVE_COLUMNS = ("frames", "seconds", "cpu_seconds", "train_return", "eval_return")


def _cell(value) -> str:
    return "" if value is None else f"{float(value):.6g}"


def read_curve(path: str | Path) -> list[dict[str, float | None]]:
    """Reads a ``curve.csv``: one dict per row, ``None`` for empty cells.

    Raises:
        ValueError: the file's header is not :data:`CURVE_COLUMNS`.
    """
    rows = []
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return rows
        if tuple(header) != CURVE_COLUMNS:
            raise ValueError(f"read_curve: {str(path)!r} has columns {header}, expected {list(CURVE_COLUMNS)}.")
        for line in reader:
            rows.append({k: (float(v) if v != "" else None) for k, v in zip(CURVE_COLUMNS, line)})
    return rows


class LearningCurve:
    """Appends ``(frames, seconds, cpu_seconds, train_return, eval_return)`` rows to a CSV file (kept open,
    line-buffered).

    An existing file is continued (a resumed run), its rows read back into :attr:`rows`.

    Args:
        path: the CSV file.

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "curve.csv"
        >>> curve = LearningCurve(path)
        >>> curve.add(200, 1.5, train_return=-1200.0)
        >>> curve.close()
        >>> read_curve(path)[0]["train_return"]
        -1200.0
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rows = read_curve(self.path) if self.path.is_file() else []
        new = not self.path.is_file() or self.path.stat().st_size == 0
        self._handle = open(self.path, "a", buffering=1, newline="")
        if new:
            self._handle.write(",".join(CURVE_COLUMNS) + "\n")

    def add(self, frames: int, seconds: float, *, cpu_seconds: float | None = None, train_return: float | None = None,
            eval_return: float | None = None) -> None:
        """Appends one row (``None``: an empty cell)."""
        row = {"frames": float(frames), "seconds": float(seconds), "cpu_seconds": cpu_seconds,
               "train_return": train_return, "eval_return": eval_return}
        self.rows.append(row)
        cpu = "" if cpu_seconds is None else f"{float(cpu_seconds):.3f}"
        cells = (str(int(frames)), f"{float(seconds):.3f}", cpu, _cell(train_return), _cell(eval_return))
        self._handle.write(",".join(cells) + "\n")

    def close(self) -> None:
        """Closes the file (rows stay readable in :attr:`rows`)."""
        self._handle.close()


def _points(rows: Sequence[Mapping], key: str) -> tuple[list[float], list[float]]:
    pts = [(r["frames"], r[key]) for r in rows if r.get(key) is not None and math.isfinite(r[key])]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_learning_curves(series: Mapping[str, Sequence[Mapping]], path: str | Path, *, title: str,
                         threshold: float | None = None) -> bool:
    """Draws training returns (lines) and evaluation returns (markers) against frames into a PNG.

    Args:
        series: ``{label: rows}``, rows as in :func:`read_curve` (one series per run or seed).
        path: the PNG file.

    Keyword Args:
        title: the plot's title.
        threshold: a horizontal line (e.g. the return that counts as solved).

    Returns:
        ``True`` if the PNG was written, ``False`` when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # optional dependency (``utils`` extra)
        from matplotlib.figure import Figure
    except ImportError:
        return False
    fig = Figure(figsize=(7, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, rows) in enumerate(series.items()):
        color = f"C{i % 10}"
        x, y = _points(rows, "train_return")
        if x:
            ax.plot(x, y, color=color, alpha=0.55, linewidth=1.2, label=f"{label} (train)")
        x, y = _points(rows, "eval_return")
        if x:
            ax.plot(x, y, color=color, marker="o", markersize=3.5, linewidth=1.8, label=f"{label} (eval)")
    if threshold is not None:
        ax.axhline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    ax.set_xlabel("frames")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return True
