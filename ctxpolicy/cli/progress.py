"""A one-line progress counter on stderr for long runs (``validate`` on many files).

Shown only when stderr is a terminal and there is enough work to wait for: never in a
log, a pipe or CI, and never on stdout (which carries the report). The line is rewritten
in place with a carriage return and blanked at the end, so nothing of it stays on screen.
No colour and no escape sequence: ``NO_COLOR`` and ``TERM=dumb`` need nothing special.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Protocol, Self

#: Fewer files than this finish before a counter would be read.
MIN_ITEMS = 21
#: Seconds between two redraws (the first and the last are always drawn).
REDRAW_S = 0.05


class _Stream(Protocol):
    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


def _is_terminal(stream: _Stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """``with Progress(total, label="validating") as progress: progress.advance()``.

    Args:
        total: How many items the run has.
        label: The word before the counter.
        stream: Where to draw (``sys.stderr`` when None).
        min_items: Draw only for at least this many items.
    """

    def __init__(
        self,
        total: int,
        *,
        label: str,
        stream: _Stream | None = None,
        min_items: int = MIN_ITEMS,
    ) -> None:
        self._stream: _Stream = sys.stderr if stream is None else stream
        self._total = total
        self._label = label
        self._done = 0
        self._width = 0
        self._last = 0.0
        self.enabled = total >= min_items and _is_terminal(self._stream)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self) -> None:
        """Count one item done; redraw when due."""
        self._done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if self._done in (1, self._total) or now - self._last >= REDRAW_S:
            self._last = now
            self._draw(f"{self._label} {self._done}/{self._total} files")

    def close(self) -> None:
        """Blank the line (once); later calls do nothing."""
        if self.enabled and self._width:
            self._draw("")
        self.enabled = False

    def _draw(self, text: str) -> None:
        padding = " " * max(self._width - len(text), 0)
        self._width = max(self._width, len(text))
        try:
            self._stream.write(f"\r{text}{padding}" + ("\r" if not text else ""))
            self._stream.flush()
        except (OSError, ValueError):  # a closed terminal: stop drawing, keep validating
            self.enabled = False


__all__ = ["MIN_ITEMS", "Progress"]
