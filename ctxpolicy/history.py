"""Conversation history: structural validity, repair, and fitting into a token budget.

A history is *structurally valid* when it is empty or:

- it starts on a ``HumanMessage``;
- every ``ToolMessage`` answers a tool call of the ``AIMessage`` before it, in the same
  unit (only ToolMessages between them), and no tool call is answered twice;
- every tool call of an ``AIMessage`` has its ``ToolMessage``;
- it holds no ``SystemMessage`` (the system prompt is the composer's business) and only
  Human, AI and Tool messages.

A history is read as *units*: a ``HumanMessage``; an ``AIMessage`` without tool calls;
or an ``AIMessage`` with tool calls together with the ToolMessages answering them.
Trimming works on whole units, so a tool call is never separated from its result.

Units are parsed from the newest message backwards. `fit_history` parses (and repairs)
only the part it walks, so its cost grows with what is kept, not with the length of the
history; `repair_history` walks everything. Both parse identically, so what
`fit_history` keeps is always a suffix of what `repair_history` returns.

Invalid tool-call units are removed whole (the AIMessage and any answers), never edited:
ctxpolicy does not invent or rewrite messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

__all__ = ["HistoryFit", "PrefixView", "check_history", "fit_history", "repair_history"]


class PrefixView(Sequence[BaseMessage]):
    """A read-only view of the first ``stop`` messages of a sequence (no copy).

    `fit_history` returns the dropped prefix this way, so trimming a long history costs
    what is kept, not a copy of what is dropped. It behaves like a tuple: indexing,
    slicing (a slice is a tuple of just those messages), iteration, ``len``, and
    equality with tuples and other views holding the same messages.

    It reads the underlying sequence when used: mutating the input afterwards changes
    what the view shows. Take ``tuple(view)`` to keep a snapshot.
    """

    __slots__ = ("_messages", "_stop")

    def __init__(self, messages: Sequence[BaseMessage], stop: int) -> None:
        base: Sequence[BaseMessage] = messages
        if isinstance(messages, PrefixView):  # a view of a view reads the base directly
            stop = min(stop, len(messages))
            base = messages.base
        self._messages: Sequence[BaseMessage] = base
        self._stop: int = max(0, min(stop, len(base)))

    @property
    def base(self) -> Sequence[BaseMessage]:
        """The sequence this view reads (its first ``len(self)`` items)."""
        return self._messages

    def __len__(self) -> int:
        return self._stop

    @overload
    def __getitem__(self, index: int) -> BaseMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[BaseMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> BaseMessage | tuple[BaseMessage, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._stop)
            return tuple(self._messages[i] for i in range(start, stop, step))
        i = index.__index__()
        if i < 0:
            i += self._stop
        if not 0 <= i < self._stop:
            raise IndexError("PrefixView index out of range")
        return self._messages[i]

    def __iter__(self) -> Iterator[BaseMessage]:
        messages = self._messages
        for i in range(self._stop):
            yield messages[i]

    def __reversed__(self) -> Iterator[BaseMessage]:
        messages = self._messages
        for i in range(self._stop - 1, -1, -1):
            yield messages[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PrefixView):
            if len(other) != self._stop:
                return False
            return all(a is b or a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, tuple):
            return len(other) == self._stop and all(
                a is b or a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"PrefixView({len(self)} message(s))"

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (and deep-copies) as a tuple
        return (tuple, (tuple(self),))


@dataclass(frozen=True, slots=True)
class HistoryFit:
    """What `fit_history` kept of a history.

    Attributes:
        kept: The newest whole units that fit, structurally valid, starting on a
            ``HumanMessage`` (or empty).
        dropped: The older prefix of the input before ``kept`` (oldest first), as given
            (unrepaired): what a summarizer would fold. A read-only `PrefixView` of the
            input (no copy), so its cost does not grow with the history.
        tokens: Tokens of ``kept`` (the sum of ``count`` over it).
        repairs: Human-readable notes, oldest first, of messages removed for structural
            validity from inside the kept window or from its start.
    """

    kept: tuple[BaseMessage, ...]
    dropped: Sequence[BaseMessage]
    tokens: int
    repairs: tuple[str, ...]


def _describe(message: BaseMessage) -> str:
    return type(message).__name__


def _require_message(messages: Sequence[BaseMessage], index: int) -> BaseMessage:
    message = messages[index]
    if not isinstance(message, BaseMessage):
        raise TypeError(
            f"messages[{index}] must be a langchain-core BaseMessage, got {type(message).__name__}"
        )
    return message


def _unit_before(
    messages: Sequence[BaseMessage], end: int
) -> tuple[int, list[BaseMessage] | None, list[str]]:
    """Parse the unit that ends just before index ``end``.

    Returns:
        ``(start, unit, notes)``: ``start`` is the index of the unit's first message (the
        parse resumes before it); ``unit`` is its messages in order, or ``None`` when all
        of ``messages[start:end]`` are removed as invalid; ``notes`` says what was removed.
    """
    last = end - 1
    message = _require_message(messages, last)
    if isinstance(message, HumanMessage):
        return last, [message], []
    if isinstance(message, ToolMessage):
        first = last
        while first > 0 and isinstance(messages[first - 1], ToolMessage):
            first -= 1
        return _tool_unit(messages, first, end)
    if isinstance(message, AIMessage):
        if not message.tool_calls:
            return last, [message], []
        ids = ", ".join(repr(call.get("id")) for call in message.tool_calls)
        return (
            last,
            None,
            [f"removed AIMessage at index {last}: its tool call(s) {ids} have no ToolMessage"],
        )
    if isinstance(message, SystemMessage):
        return last, None, [f"removed SystemMessage at index {last}: no system messages in history"]
    return (
        last,
        None,
        [
            (
                f"removed {_describe(message)} at index {last}: "
                "history holds only Human, AI and Tool messages"
            )
        ],
    )


def _tool_unit(
    messages: Sequence[BaseMessage], first: int, end: int
) -> tuple[int, list[BaseMessage] | None, list[str]]:
    """Parse ToolMessages ``messages[first:end]`` with the AIMessage before them."""
    tools = messages[first:end]
    caller = _require_message(messages, first - 1) if first > 0 else None
    if not isinstance(caller, AIMessage) or not caller.tool_calls:
        return (
            first,
            None,
            [
                f"removed ToolMessage at index {first + offset} "
                f"(tool_call_id {tool.tool_call_id!r}): no AIMessage tool call before it"  # type: ignore[attr-defined]
                for offset, tool in enumerate(tools)
            ],
        )
    start = first - 1
    call_ids = [call.get("id") for call in caller.tool_calls]
    if None in call_ids or len(set(call_ids)) != len(call_ids):
        return (
            start,
            None,
            [
                (
                    f"removed AIMessage at index {start} and its {end - first} ToolMessage(s): "
                    "tool call ids missing or repeated, answers cannot be matched"
                )
            ],
        )
    pending = set(call_ids)
    unit: list[BaseMessage] = [caller]
    notes: list[str] = []
    for offset, tool in enumerate(tools):
        call_id: str = tool.tool_call_id  # type: ignore[attr-defined]
        if call_id in pending:
            pending.discard(call_id)
            unit.append(tool)
        else:
            notes.append(
                f"removed ToolMessage at index {first + offset} (tool_call_id {call_id!r}): "
                f"it answers no open tool call of the AIMessage at index {start}"
            )
    if pending:
        missing = ", ".join(repr(i) for i in call_ids if i in pending)
        return (
            start,
            None,
            [
                (
                    f"removed AIMessage at index {start} and its {end - first} ToolMessage(s): "
                    f"tool call(s) {missing} have no ToolMessage"
                )
            ],
        )
    return start, unit, notes


def check_history(messages: Sequence[BaseMessage]) -> list[str]:
    """List the structural problems of a history (see the module docstring).

    Args:
        messages: The history, oldest first.

    Returns:
        One message per problem, naming the index; ``[]`` iff the history is valid.
    """
    problems: list[str] = []
    if messages and not isinstance(messages[0], HumanMessage):
        problems.append(
            f"messages[0]: history must start on a HumanMessage, got {_describe(messages[0])}"
        )
    open_at = -1  # index of the AIMessage whose tool calls the following ToolMessages answer
    open_ids: set[str] = set()

    def close() -> None:
        if open_ids:
            ids = ", ".join(repr(i) for i in sorted(open_ids))
            problems.append(f"messages[{open_at}]: tool call(s) {ids} have no ToolMessage")

    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if open_at >= 0 and message.tool_call_id in open_ids:
                open_ids.discard(message.tool_call_id)
            else:
                problems.append(
                    f"messages[{index}]: ToolMessage (tool_call_id {message.tool_call_id!r}) "
                    "answers no open tool call of the AIMessage before it"
                )
            continue
        close()
        open_at, open_ids = -1, set()
        if isinstance(message, AIMessage):
            if message.tool_calls:
                open_at = index
                ids = [call.get("id") for call in message.tool_calls]
                if None in ids or len(set(ids)) != len(ids):
                    problems.append(f"messages[{index}]: tool call ids missing or repeated")
                open_ids = {i for i in ids if i is not None}
        elif isinstance(message, SystemMessage):
            problems.append(f"messages[{index}]: SystemMessage inside the history")
        elif not isinstance(message, HumanMessage):
            problems.append(
                f"messages[{index}]: {_describe(message)} is not a Human, AI or Tool message"
            )
    close()
    return problems


_NO_NOTES: list[str] = []  # shared, never mutated
_Unit = tuple[int, list[BaseMessage], list[str], int]
"""A parsed unit: (index of its first message, its messages, notes oldest first, tokens)."""


def _drop_leading_non_human(units: list[_Unit]) -> tuple[list[_Unit], str | None]:
    """Pop the oldest units (at the END of newest-first ``units``) until one is Human.

    Returns:
        The popped units, newest first like ``units``, and a note (``None`` if none).
    """
    popped: list[_Unit] = []
    while units and not isinstance(units[-1][1][0], HumanMessage):
        popped.insert(0, units.pop())
    if not popped:
        return popped, None
    removed = [m for unit in reversed(popped) for m in unit[1]]
    kinds = ", ".join(_describe(m) for m in removed[:4]) + (", ..." if len(removed) > 4 else "")
    return popped, (
        f"removed {len(removed)} message(s) from index {popped[-1][0]} ({kinds}): "
        "the history must start on a HumanMessage"
    )


def _walk_units(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int | None = None,
    count: Callable[[BaseMessage], int] | None = None,
) -> tuple[list[_Unit], list[str], int]:
    """Parse units newest first, until the start or the first unit over ``max_tokens``.

    Returns:
        ``(units, older_notes, total)``: the kept units newest first (each with the notes
        of removals between it and the next newer unit), the notes of removals older
        than the oldest kept unit (oldest first), and the tokens of the kept units.
    """
    units: list[_Unit] = []
    pending: list[str] = []  # removals newer than the next unit to keep, newest first
    total = 0
    end = len(messages)
    unit: list[BaseMessage] | None
    while end > 0:
        message = messages[end - 1]
        kind = type(message)
        if kind is HumanMessage or (kind is AIMessage and not message.tool_calls):  # type: ignore[attr-defined]
            # fast path for the common single-message unit (exact types only)
            cost = 0 if count is None else count(message)
            if max_tokens is not None and total + cost > max_tokens:
                pending = []
                break
            total += cost
            end -= 1
            if pending:
                units.append((end, [message], list(reversed(pending)), cost))
                pending = []
            else:
                units.append((end, [message], _NO_NOTES, cost))
            continue
        start, unit, notes = _unit_before(messages, end)
        if unit is None:
            pending.extend(reversed(notes))
            end = start
            continue
        cost = 0
        if count is not None:
            for message in unit:
                cost += count(message)
            if max_tokens is not None and total + cost > max_tokens:
                pending = []  # removals next to a unit that does not fit: in the dropped part
                break
        total += cost
        if pending:
            units.append((start, unit, [*notes, *reversed(pending)], cost))
            pending = []
        else:
            units.append((start, unit, notes, cost))
        end = start
    return units, list(reversed(pending)), total


def _flatten(units: list[_Unit]) -> tuple[BaseMessage, ...]:
    kept: list[BaseMessage] = []
    for unit in reversed(units):
        kept.extend(unit[1])
    return tuple(kept)


def _notes(units: list[_Unit]) -> list[str]:
    return [note for unit in reversed(units) for note in unit[2]]


def repair_history(
    messages: Sequence[BaseMessage],
) -> tuple[tuple[BaseMessage, ...], tuple[str, ...]]:
    """Make a broken history structurally valid by removing (never editing) messages.

    Removes orphan ToolMessages, AIMessages whose tool calls lack results (with the
    partial results), SystemMessages and other message types, then the leading units
    until the history starts on a HumanMessage. A valid history comes back unchanged.

    Args:
        messages: The history, oldest first.

    Returns:
        ``(repaired, notes)``: the valid history and one note per removal, oldest first.

    Raises:
        TypeError: When an element is not a ``BaseMessage`` (naming its index).
    """
    units, older_notes, _ = _walk_units(messages)
    popped, lead_note = _drop_leading_non_human(units)
    notes = [*older_notes, *_notes(popped)]
    if lead_note:
        notes.append(lead_note)
    notes.extend(_notes(units))
    return _flatten(units), tuple(notes)


def fit_history(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
) -> HistoryFit:
    """Keep the newest whole units of a history that fit in ``max_tokens``.

    Walks units from the newest and stops at the first one that does not fit: an older,
    smaller unit is never taken past it, because a gap in the middle of a conversation
    breaks its coherence. The kept part is then made to start on a HumanMessage, which
    may drop leading AI units that did fit (noted in ``repairs``).

    Only the walked part is parsed and repaired, and only it (plus the one unit that did
    not fit) is counted: cost grows with what is kept, not with ``len(messages)``. The
    result is the suffix of ``repair_history(messages)`` that
    ``trim_messages(strategy="last", start_on="human", allow_partial=False)`` keeps
    from the repaired history with the same counter.

    Args:
        messages: The history, oldest first.
        max_tokens: Token budget of the kept part.
        count: Tokens of one message (e.g. ``Tokenizer.count_message``).

    Returns:
        The `HistoryFit`.

    Raises:
        ValueError: When ``max_tokens`` is negative.
        TypeError: When a walked element is not a ``BaseMessage`` (naming its index).
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    units, _, total = _walk_units(messages, max_tokens=max_tokens, count=count)
    popped, lead_note = _drop_leading_non_human(units)
    total -= sum(unit[3] for unit in popped)
    repairs = _notes(units)
    if lead_note:
        repairs.insert(0, lead_note)
    cut = units[-1][0] if units else len(messages)
    return HistoryFit(
        kept=_flatten(units),
        dropped=PrefixView(messages, cut),
        tokens=total,
        repairs=tuple(repairs),
    )
