"""``Progress``: a tqdm bar over frames (frames/s, latest return), or periodic plain lines without tqdm."""
from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


class Progress:
    """Shows training progress in frames.

    With ``tqdm`` installed (the ``utils`` extra) and ``bar=True``, a progress bar whose rate is frames/s and
    whose postfix holds the latest training and evaluation returns. Otherwise one line every
    ``line_every`` frames (and at the end), ``"<name> <frames>/<total> frames | <fps> f/s | return <r>"``, and
    one per evaluation, ``"<name> <frames>/<total> frames | eval <r>"``.

    Args:
        total: frames the run will reach.
        name: label of the bar and of the lines.

    Keyword Args:
        initial: frames already done (a resumed run).
        bar: use a tqdm bar when tqdm is importable. Defaults to ``True``.
        line_every: frames between two plain lines. Defaults to ``total // 10``.
        stream: where lines (or the bar) go. Defaults to ``sys.stderr``.

    Examples:
        >>> import io
        >>> out = io.StringIO()
        >>> progress = Progress(100, "sac", bar=False, line_every=50, stream=out)
        >>> progress.update(50, train_return=-1200.0)
        >>> progress.close()
        >>> out.getvalue().splitlines()[0].startswith("sac 50/100 frames")
        True
    """

    def __init__(self, total: int, name: str, *, initial: int = 0, bar: bool = True, line_every: int | None = None,
                 stream: TextIO | None = None) -> None:
        self.total = int(total)
        self.name = name
        self.frames = int(initial)
        self.stream = stream if stream is not None else sys.stderr
        self.line_every = max(1, int(line_every or max(1, self.total // 10)))
        self._next_line = (self.frames // self.line_every + 1) * self.line_every
        self._printed = self.frames
        self._t0 = time.perf_counter()
        self._f0 = self.frames
        self.train_return: float | None = None
        self.eval_return: float | None = None
        self._bar = None
        if bar:
            try:
                from tqdm.auto import tqdm  # optional dependency (the ``utils`` extra)
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=self.total, initial=self.frames, desc=name, unit="f", unit_scale=True,
                                 dynamic_ncols=True, mininterval=0.5, file=self.stream)

    @property
    def uses_bar(self) -> bool:
        """``True`` when a tqdm bar is shown (``False``: plain lines)."""
        return self._bar is not None

    @property
    def fps(self) -> float:
        """Frames per second since this object was built."""
        elapsed = time.perf_counter() - self._t0
        return (self.frames - self._f0) / elapsed if elapsed > 0 else 0.0

    def update(self, frames: int, *, train_return: float | None = None, eval_return: float | None = None) -> None:
        """Moves to ``frames`` (absolute count); the returns given replace the shown ones. Without a bar, a
        line is printed every ``line_every`` frames, and one for each evaluation result."""
        advance = int(frames) - self.frames
        self.frames = int(frames)
        if train_return is not None:
            self.train_return = float(train_return)
        if eval_return is not None:
            self.eval_return = float(eval_return)
        if self._bar is not None:
            if train_return is not None or eval_return is not None:
                self._bar.set_postfix_str(f"return {_fmt(self.train_return)} | eval {_fmt(self.eval_return)}",
                                          refresh=False)
            self._bar.update(advance)
        elif eval_return is not None:
            self._print(f"{self.name} {self.frames}/{self.total} frames | eval {_fmt(self.eval_return)}")
        elif self.frames >= self._next_line:
            self._line()
            self._next_line = (self.frames // self.line_every + 1) * self.line_every

    def _line(self) -> None:
        self._printed = self.frames
        self._print(f"{self.name} {self.frames}/{self.total} frames | {self.fps:.0f} f/s | "
                    f"return {_fmt(self.train_return)}")

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def write(self, message: str) -> None:
        """Prints a message without breaking the bar."""
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        """Closes the bar (or prints the last line if it was not printed yet)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._printed != self.frames:
            self._line()
