"""Indexing a session's history incrementally: only messages the index has not seen.

`HistorySync` remembers, per thread, the message ids it has indexed in session order,
with each message's fingerprint (a digest of its content; loaded once from the index, so
it survives a restart with a durable backend). A call with the history compares the id
and fingerprint at the end of what it knows; when they match, only the messages after it
are split and indexed. When they do not (a branch, an edit that kept the id, a
checkpoint restored to an earlier step) it walks back to the last position that still
matches, removes what the index holds after it and no longer matches, and indexes from
there. The index's unique key on ``(thread, message id)`` makes a repeated or concurrent
indexing of the same message a no-op.

See docs/recall.md, "Indexing".
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxpolicy.recall.units import Unit, UnitSize, split_message

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.recall.index import RecallIndex


def message_key(message: BaseMessage, position: int | None = None) -> str:
    """The id a message is indexed (recall) or recorded (memory) under.

    Its ``id`` when it has one; else a digest of its type, text, tool calls and tool call
    id: ``~<digest>`` without ``position`` (memory: an id-less message with the same
    content is recorded once), ``~<position>:<digest>`` with it (recall: the same text
    at two places of a session is two messages).
    """
    if message.id:
        return str(message.id)  # no digest needed
    return message_version(message, position)[0]


def message_version(
    message: BaseMessage, position: int | None = None, *, fingerprint: str | None = None
) -> tuple[str, str]:
    """``(message_key(message, position), message_fingerprint(message))``, hashed once
    (an id-less message's key holds its fingerprint; ``fingerprint``: already known, e.g.
    from `MessageFingerprints`)."""
    if fingerprint is None:
        fingerprint = message_fingerprint(message)
    if message.id:
        return str(message.id), fingerprint
    key = f"~{fingerprint}" if position is None else f"~{position}:{fingerprint}"
    return key, fingerprint


def message_fingerprint(message: BaseMessage) -> str:
    """A digest of what a message says: its type, text, tool calls and tool call id.

    Two messages with the same fingerprint index to the same units. The index keeps it
    beside the message id, so a message replaced under its id by an edited one (LangGraph
    ``add_messages`` replaces by id) is noticed and indexed again.
    """
    call_id = str(getattr(message, "tool_call_id", "") or "")
    calls = json.dumps(
        [[c.get("name"), c.get("args"), c.get("id")] for c in getattr(message, "tool_calls", [])],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.blake2b(
        f"{message.type}\x00{call_id}\x00{calls}\x00{message.text}".encode(), digest_size=12
    ).hexdigest()


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


def _caller_of(history: Sequence[BaseMessage], at: int) -> dict[str, str]:
    """The tool name of the call that the message at ``at`` answers, if it answers one:
    the nearest earlier AI message that made the call (however many results came
    between)."""
    call_id = getattr(history[at], "tool_call_id", None)
    if not call_id:
        return {}
    for before in range(at - 1, -1, -1):
        names = _tool_names(history[before : before + 1])
        if call_id in names:
            return {call_id: names[call_id]}
    return {}


#: How many message fingerprints a `MessageFingerprints` remembers by message object by
#: default (then it starts over): more than the messages one recall call checks.
MAX_REMEMBERED = 4096


class MessageFingerprints:
    """`message_fingerprint` of messages, remembered per message object while its content
    object stays the same (a content assigned anew is hashed again).

    Recall and memory check the same newest messages call after call: each version of a
    message is hashed once. Holds the messages it remembers; starts over once it
    remembers ``size`` (default `MAX_REMEMBERED`) message objects.
    """

    __slots__ = ("_seen", "_size")

    def __init__(self, size: int | None = None) -> None:
        self._size = MAX_REMEMBERED if size is None else size
        # id(message): (message, its content object, fingerprint)
        self._seen: dict[int, tuple[BaseMessage, object, str]] = {}

    def of(self, message: BaseMessage) -> str:
        """The `message_fingerprint` of ``message``."""
        seen = self._seen.get(id(message))
        if seen is not None and seen[0] is message and seen[1] is message.content:
            return seen[2]
        fingerprint = message_fingerprint(message)
        if len(self._seen) >= self._size:
            self._seen.clear()
        self._seen[id(message)] = (message, message.content, fingerprint)
        return fingerprint

    def __len__(self) -> int:
        return len(self._seen)


@dataclass(frozen=True, slots=True)
class Synced:
    """What one `HistorySync.sync` did.

    Attributes:
        added: Messages newly indexed.
        offset: Session position of the history's first message: 0, or the length of
            the prefix a compaction (a summary replacing the oldest messages) removed.
    """

    added: int
    offset: int


class HistorySync:
    """Keeps one `RecallIndex` up to date with the histories it is shown.

    Args:
        index: The index to feed.
        size: How large units are.

    Positions are positions in the *session*: when a summary replaced the oldest
    messages of the state (the history now starts with a message the index knows at
    position ``p``), the history is read as starting at ``p`` and nothing is forgotten;
    the summarized messages stay searchable. A history that differs after a common
    start is a restore to an earlier step: the messages of the abandoned branch are
    removed from the index. A message replaced under its id by one that says something
    else (an edit) differs too: its old units are removed and the new ones indexed.
    (Compaction is recognised by message id, so id-less messages, which LangGraph never
    produces, are always read from position 0.)

    Thread-safe: one lock per instance (indexing is quick and incremental).
    """

    def __init__(self, index: RecallIndex, *, size: UnitSize | None = None) -> None:
        self.index = index
        self.size = size or UnitSize()
        self._known: dict[str, list[str]] = {}
        self._where: dict[str, dict[str, int]] = {}
        self._prints: dict[str, dict[str, str | None]] = {}
        self._fingerprints = MessageFingerprints()
        self._lock = threading.Lock()

    def _log(self, thread: str) -> tuple[list[str], dict[str, int], dict[str, str | None]]:
        known = self._known.get(thread)
        if known is None:
            rows = self.index.indexed_messages(thread)
            known = [row[1] for row in rows]
            self._known[thread] = known
            self._where[thread] = {mid: i for i, mid in enumerate(known)}
            self._prints[thread] = {row[1]: row[2] for row in rows}
        return known, self._where[thread], self._prints[thread]

    @staticmethod
    def _offset(log: list[str], where: dict[str, int], history: Sequence[BaseMessage]) -> int:
        if not history or not log:
            return 0
        first = message_key(history[0], 0)
        if first == log[0]:
            return 0
        return where.get(first, 0)

    def _start(
        self,
        log: list[str],
        prints: dict[str, str | None],
        history: Sequence[BaseMessage],
        offset: int,
    ) -> int:
        """First session position of ``history`` that the index may not have: the walk
        back stops at the newest position whose message has the logged key and says what
        was indexed (`_says`)."""
        position = min(len(log), offset + len(history)) - 1
        while position >= offset:
            message = history[position - offset]
            key = log[position]
            if message_key(message, position) == key and self._says(prints.get(key), message):
                break
            position -= 1
        return max(position + 1, offset)

    def _says(self, recorded: str | None, message: BaseMessage) -> bool:
        """Whether ``message`` says what the index recorded for its key: always for an
        id-less message (its key is its content's digest) and where no fingerprint was
        recorded (an index written before fingerprints were kept: match by id)."""
        return not message.id or recorded is None or recorded == self._fingerprints.of(message)

    def sync(self, thread: str, history: Sequence[BaseMessage]) -> Synced:
        """Index the messages of ``history`` that ``thread`` has not indexed yet.

        Also removes what the index holds from the first position that no longer matches
        on and that this history does not say: an abandoned branch, or the old version of
        a message edited under its id.
        """
        with self._lock:
            log, where, prints = self._log(thread)
            offset = self._offset(log, where, history)
            start = self._start(log, prints, history, offset)
            if start >= offset + len(history):
                return Synced(0, offset)
            known = set(log[start:])
            for mid in log[start:]:
                where.pop(mid, None)
            del log[start:]
            while len(log) < start:  # a gap cannot happen with an offset from the log
                log.append("")
            fresh = history[start - offset :]
            keys, fingerprints = [], []
            for i, message in enumerate(fresh):
                key, fingerprint = message_version(message, start + i)
                keys.append(key)
                fingerprints.append(fingerprint)
            if known:
                # a restore to an earlier step or an edit: what the index holds from here
                # on and this history does not say is gone
                current = dict(zip(keys, fingerprints, strict=True))
                abandoned = [
                    mid
                    for mid in known
                    if mid not in current or prints.get(mid) not in (None, current[mid])
                ]
                self.index.forget_messages(thread, abandoned)
                known -= set(abandoned)
                for mid in abandoned:
                    prints.pop(mid, None)
            names = _tool_names(fresh)
            for i, message in enumerate(fresh):  # results whose call an earlier sync saw
                call_id = getattr(message, "tool_call_id", None)
                if call_id and str(call_id) not in names:
                    names |= _caller_of(history, start - offset + i)
            entries: list[tuple[int, str, Sequence[Unit], str | None]] = []
            for i, message in enumerate(fresh):
                position, key = start + i, keys[i]
                where[key] = len(log)
                log.append(key)
                if key in known:
                    continue
                prints[key] = fingerprints[i]
                units = split_message(
                    message, message_id=key, position=position, tool_names=names, size=self.size
                )
                entries.append((position, key, units, fingerprints[i]))
            return Synced(self.index.add_messages(thread, entries), offset)

    def is_current(self, thread: str, message_id: str, message: BaseMessage) -> bool:
        """Whether the index holds what ``message`` (indexed as ``message_id``) says now.

        False for a message edited under its id after it was indexed while the messages
        after it stayed the same (`sync` walks back from the end and stops before it);
        see `_says` for when it is True without a comparison.
        """
        with self._lock:
            _, _, prints = self._log(thread)
            return self._says(prints.get(message_id), message)

    def reindex(
        self, thread: str, history: Sequence[BaseMessage], offset: int, position: int
    ) -> None:
        """Index the message at session ``position`` of ``history`` (which starts at
        ``offset``) again, replacing what the index holds for its id (an edit that
        `is_current` found)."""
        at = position - offset
        message = history[at]
        key, fingerprint = message_version(message, position)
        units = split_message(
            message,
            message_id=key,
            position=position,
            tool_names=_caller_of(history, at),
            size=self.size,
        )
        with self._lock:
            _, _, prints = self._log(thread)
            self.index.forget_messages(thread, [key])
            self.index.add_messages(thread, [(position, key, units, fingerprint)])
            prints[key] = fingerprint

    def forget(self, thread: str) -> None:
        """Drop the cached id log of ``thread`` (it is reloaded from the index when needed)."""
        with self._lock:
            self._known.pop(thread, None)
            self._where.pop(thread, None)
            self._prints.pop(thread, None)


__all__ = [
    "MAX_REMEMBERED",
    "HistorySync",
    "MessageFingerprints",
    "Synced",
    "message_fingerprint",
    "message_key",
    "message_version",
    "thread_key",
]
