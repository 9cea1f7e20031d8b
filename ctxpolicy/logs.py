"""The ``ctxpolicy`` logger: what went differently in a call, logged once where it happens.

Standard `logging`; the library installs no handler, so the application decides where the
records go (with none configured, Python's last-resort handler prints WARNING and above
to stderr). Each event is also in the call's ``report.warnings`` when there is a report
(docs/design.md, 'What a call reports'):

* a collector skipped with ``on_error: skip`` (WARNING);
* a fallback, e.g. ``overflow: summarize`` without a summary layer (WARNING);
* text cut from a block layer to fit its cap, or the block dropped (INFO: the policy's
  overflow rule at work, but the model sees less than was collected);
* a refused persist (WARNING; `ctxpolicy.errors.PersistenceError` follows).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

#: The package's logger (``logging.getLogger("ctxpolicy")``).
LOGGER = logging.getLogger("ctxpolicy")

#: One event: its level and its text (the text is what ``report.warnings`` holds).
Event = tuple[int, str]


def log_events(events: Iterable[Event]) -> None:
    """Log each event once at its level (cheap when the logger is disabled)."""
    for level, text in events:
        if LOGGER.isEnabledFor(level):
            LOGGER.log(level, "%s", text)


__all__ = ["LOGGER", "Event", "log_events"]
