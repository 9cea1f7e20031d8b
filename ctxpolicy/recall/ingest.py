"""Indexing a session's history incrementally: only messages the index has not seen.

`HistorySync` remembers, per thread, the message ids it has indexed in session order
(loaded once from the index, so it survives a restart with a durable backend). A call
with the history compares the id at the end of what it knows; when that matches, only
the messages after it are split and indexed. When it does not (a branch, an edit, a
checkpoint restored to an earlier step) it walks back to the last position that still
matches and indexes from there. The index's unique key on ``(thread, message id)``
makes a repeated or concurrent indexing of the same message a no-op.

See docs/recall.md, "Indexing".
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxpolicy.recall.units import Unit, UnitSize, message_text, split_message

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.recall.index import RecallIndex


def message_key(message: BaseMessage, position: int) -> str:
    """The id recall uses for ``message``: its ``id``, else a digest of position and text."""
    if message.id:
        return str(message.id)
    digest = hashlib.blake2b(
        f"{message.type}\x00{message_text(message)}".encode(), digest_size=8
    ).hexdigest()
    return f"~{position}:{digest}"


def thread_key(history: Sequence[BaseMessage], explicit: str | None = None) -> str:
    """The thread a history belongs to: ``explicit``, else derived from its first message.

    A conversation's first message does not change from call to call, so a caller that
    passes no thread id (``compose(state={"messages": history})``) still gets one index
    per conversation.
    """
    if explicit:
        return str(explicit)
    if not history:
        return "~empty"
    return f"~first:{message_key(history[0], 0)}"


def _tool_names(messages: Sequence[BaseMessage]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in getattr(message, "tool_calls", None) or ():
            if call.get("id"):
                names[str(call["id"])] = str(call.get("name"))
    return names


class HistorySync:
    """Keeps one `RecallIndex` up to date with the histories it is shown.

    Args:
        index: The index to feed.
        size: How large units are.

    Thread-safe: one lock per instance (indexing is quick and incremental).
    """

    def __init__(self, index: RecallIndex, *, size: UnitSize | None = None) -> None:
        self.index = index
        self.size = size or UnitSize()
        self._known: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def _log(self, thread: str) -> list[str]:
        known = self._known.get(thread)
        if known is None:
            known = [mid for _, mid in self.index.indexed_messages(thread)]
            self._known[thread] = known
        return known

    def _start(self, log: list[str], history: Sequence[BaseMessage]) -> int:
        """First position of ``history`` that the index may not have."""
        end = min(len(log), len(history))
        position = end - 1
        while position >= 0 and message_key(history[position], position) != log[position]:
            position -= 1
        return position + 1

    def sync(self, thread: str, history: Sequence[BaseMessage]) -> int:
        """Index the messages of ``history`` that ``thread`` has not indexed yet.

        Returns:
            How many messages were new to the index.
        """
        with self._lock:
            log = self._log(thread)
            start = self._start(log, history)
            if start >= len(history):
                return 0
            known = set(log[start:])
            del log[start:]
            fresh = history[start:]
            if known:
                # a restore to an earlier step: what the old branch said after it is gone
                current = {message_key(m, start + i) for i, m in enumerate(fresh)}
                abandoned = [mid for mid in known if mid not in current]
                self.index.forget_messages(thread, abandoned)
                known -= set(abandoned)
            names = _tool_names(history[max(0, start - 8) : start]) | _tool_names(fresh)
            entries: list[tuple[int, str, Sequence[Unit]]] = []
            for offset, message in enumerate(fresh):
                position = start + offset
                key = message_key(message, position)
                log.append(key)
                if key in known:
                    continue
                units = split_message(
                    message, message_id=key, position=position, tool_names=names, size=self.size
                )
                entries.append((position, key, units))
            return self.index.add_messages(thread, entries)

    def forget(self, thread: str) -> None:
        """Drop the cached id log of ``thread`` (it is reloaded from the index when needed)."""
        with self._lock:
            self._known.pop(thread, None)


__all__ = ["HistorySync", "message_key", "thread_key"]
