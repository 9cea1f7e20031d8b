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

A history is read through `MessagesView`, the one read-only view ctxpolicy puts over a
caller's history, never copied nor checked whole:

- the caller's sequence, items converted to messages when read (``argument=`` names
  the argument in the error about an item that is no message; `as_messages`);
- a prefix of it (``stop``): the dropped part `fit_history` returns (``PrefixView``);
- it with one message shown differently (`MessagesView.replaced`): the prompt copy of
  an input whose inline references were expanded.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

if TYPE_CHECKING:
    from ctxpolicy.tokens import Tokenizer

__all__ = [
    "HistoryFit",
    "HistoryWalk",
    "MessagesView",
    "PrefixView",
    "TurnWalk",
    "as_messages",
    "check_history",
    "count_newest",
    "fit_history",
    "latest_walk",
    "repair_history",
]

_NOTHING_SHOWN: Mapping[int, BaseMessage] = MappingProxyType({})


class MessagesView(Sequence[BaseMessage]):
    """A read-only view of the first ``stop`` items of a sequence, as messages (no copy).

    It behaves like the tuple of those messages: indexing, slicing (a slice is a tuple
    of just those messages), iteration, ``len``, equality with tuples and other views
    holding the same messages; it pickles (and deep-copies) as that tuple.

    With ``argument``, an item that is not a ``BaseMessage`` (a dict, a ``(role,
    content)`` pair, ...) is converted with langchain-core's ``convert_to_messages`` when
    it is read (once; the result is kept), and an item that cannot be converted raises
    ``ValueError`` naming ``argument[index]``. Without it, items are returned as they are
    (`ctxpolicy.history.fit_history` names an item that is no message).

    It reads the underlying sequence when used: the caller's list must not change while
    a call runs (ctxpolicy reads it, it never writes it). Take ``tuple(view)`` to keep a
    snapshot.

    Args:
        items: The sequence (a view of a view reads the first one's sequence directly).
        stop: How many leading items the view shows (default: all of them).
        argument: The argument's name for conversion errors; None: no conversion.
    """

    __slots__ = ("_argument", "_converted", "_items", "_shown", "_stop")

    def __init__(
        self, items: Sequence[Any], stop: int | None = None, *, argument: str | None = None
    ) -> None:
        if type(items) is MessagesView:  # not isinstance: the ABC check costs a hot path
            stop = len(items) if stop is None else min(stop, len(items))
            self._items: Sequence[Any] = items._items
            self._argument: str | None = items._argument if argument is None else argument
            self._converted: dict[int, BaseMessage] = items._converted
            self._shown: Mapping[int, BaseMessage] = items._shown
        else:
            self._items = items
            self._argument = argument
            self._converted = {}
            self._shown = _NOTHING_SHOWN
        size = len(self._items)
        self._stop: int = size if stop is None else max(0, min(stop, size))

    @property
    def base(self) -> Sequence[Any]:
        """The sequence this view reads (its first ``len(self)`` items)."""
        return self._items

    def replaced(self, index: int, message: BaseMessage) -> MessagesView:
        """This view with the message at ``index`` shown as ``message`` (no copy).

        Raises:
            IndexError: ``index`` is outside the view.
        """
        position = index + self._stop if index < 0 else index
        if not 0 <= position < self._stop:
            raise IndexError("MessagesView index out of range")
        view = MessagesView(self)
        view._shown = MappingProxyType({**self._shown, position: message})
        return view

    def __len__(self) -> int:
        return self._stop

    @overload
    def __getitem__(self, index: int) -> BaseMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[BaseMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> BaseMessage | tuple[BaseMessage, ...]:
        if isinstance(index, slice):
            return tuple(self._at(i) for i in range(*index.indices(self._stop)))
        # `_at` inlined, positions checked as a tuple does: the history walk's hot path
        stop = self._stop
        if index < 0:
            index += stop
            if index < 0:
                raise IndexError("MessagesView index out of range")
        elif index >= stop:
            raise IndexError("MessagesView index out of range")
        shown = self._shown
        if shown and index in shown:
            return shown[index]
        item = self._items[index]
        if isinstance(item, BaseMessage) or self._argument is None:
            return item  # type: ignore[no-any-return]
        return self._convert(index, item)

    def _at(self, position: int) -> BaseMessage:
        shown = self._shown
        if shown and position in shown:
            return shown[position]
        item = self._items[position]
        if isinstance(item, BaseMessage) or self._argument is None:
            return item  # type: ignore[no-any-return]
        return self._convert(position, item)

    def _convert(self, position: int, item: Any) -> BaseMessage:
        found = self._converted.get(position)
        if found is not None:
            return found
        try:
            (message,) = convert_to_messages([item])
        except Exception as exc:  # langchain raises ValueError/NotImplementedError/KeyError
            raise ValueError(
                f"{self._argument}[{position}]: not a message ({type(item).__name__}): {exc}"
            ) from exc
        self._converted[position] = message
        return message

    def __iter__(self) -> Iterator[BaseMessage]:
        return self._walk(range(self._stop))

    def __reversed__(self) -> Iterator[BaseMessage]:
        return self._walk(range(self._stop - 1, -1, -1))

    def _walk(self, positions: range) -> Iterator[BaseMessage]:
        """The items at ``positions``, as `_at` gives them (inlined: the hot path of
        finding a call's input, the newest HumanMessage)."""
        items, shown, converting = self._items, self._shown, self._argument is not None
        for position in positions:
            if shown and position in shown:
                yield shown[position]
                continue
            item = items[position]
            if converting and not isinstance(item, BaseMessage):
                item = self._convert(position, item)
            yield item

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessagesView | tuple):
            return NotImplemented
        return len(other) == self._stop and all(
            a is b or a == b for a, b in zip(self, other, strict=True)
        )

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MessagesView({len(self)} message(s))"

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (and deep-copies) as a tuple
        return (tuple, (tuple(self),))


def as_messages(value: Any, *, argument: str) -> Sequence[BaseMessage]:
    """A history argument as a sequence of messages, without copying or walking it.

    Returns:
        ``()`` for None; an empty sequence or a `MessagesView` as given; else a
        converting `MessagesView` of ``value``.

    Raises:
        TypeError: ``value`` is not a sequence (or is a string).
    """
    if value is None:
        return ()
    if type(value) is list:  # the common case, without the abstract Sequence check
        return MessagesView(value, argument=argument) if value else value
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{argument} must be a sequence of messages, got {type(value).__name__}")
    if type(value) is MessagesView or not value:
        return value
    return MessagesView(value, argument=argument)


#: The dropped prefix `fit_history` returns is a `MessagesView` (the name predates the
#: one view; ``PrefixView(messages, stop)`` builds one).
PrefixView = MessagesView


@dataclass(frozen=True, slots=True)
class HistoryFit:
    """What `fit_history` kept of a history.

    Attributes:
        kept: The newest whole units that fit, structurally valid, starting on a
            ``HumanMessage`` (or empty).
        dropped: The older prefix of the input before ``kept`` (oldest first), as given
            (unrepaired): what a summarizer would fold. A read-only `MessagesView` of
            the input (no copy), so its cost does not grow with the history.
        tokens: Tokens of ``kept`` (the sum of ``count`` over it).
        repairs: Human-readable notes, oldest first, of messages removed for structural
            validity from inside the kept window or from its start.
        walk: What this fit walked, for the next call on the same history grown at its
            end (``previous=`` of `fit_history`); None when it cannot be reused (a
            repaired window, items converted from dicts, a message shown replaced).
            Not part of equality.
        dropped_counts: ``count`` of the newest messages of ``dropped``, newest first, as
            far as the walk counted them one by one (the units dropped so that ``kept``
            starts on a HumanMessage, then the unit that did not fit, each while it is a
            single message); ``counted=`` of `count_newest`. Not part of equality.
    """

    kept: tuple[BaseMessage, ...]
    dropped: Sequence[BaseMessage]
    tokens: int
    repairs: tuple[str, ...]
    walk: HistoryWalk | None = field(default=None, compare=False, repr=False)
    dropped_counts: tuple[int, ...] = field(default=(), compare=False, repr=False)


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


def _orphans(tools: Sequence[BaseMessage], first: int) -> list[str]:
    """Notes removing ToolMessages ``tools`` (from index ``first``) that answer nothing."""
    return [
        f"removed ToolMessage at index {first + offset} "
        f"(tool_call_id {tool.tool_call_id!r}): no AIMessage tool call before it"  # type: ignore[attr-defined]
        for offset, tool in enumerate(tools)
    ]


def _answers(
    call_ids: list[str], tools: Sequence[BaseMessage], first: int
) -> tuple[list[BaseMessage], list[str], set[str]]:
    """Match ToolMessages ``tools`` to the tool calls ``call_ids`` of the AIMessage before.

    Returns:
        ``(answers, notes, unanswered)``: the ToolMessages that answer an open call, a
        note per one that answers none, and the calls left without an answer.
    """
    pending = set(call_ids)
    answers: list[BaseMessage] = []
    notes: list[str] = []
    for offset, tool in enumerate(tools):
        call_id: str = tool.tool_call_id  # type: ignore[attr-defined]
        if call_id in pending:
            pending.discard(call_id)
            answers.append(tool)
        else:
            notes.append(
                f"removed ToolMessage at index {first + offset} (tool_call_id {call_id!r}): "
                f"it answers no open tool call of the AIMessage at index {first - 1}"
            )
    return answers, notes, pending


def _tool_unit(
    messages: Sequence[BaseMessage], first: int, end: int
) -> tuple[int, list[BaseMessage] | None, list[str]]:
    """Parse ToolMessages ``messages[first:end]`` with the AIMessage before them."""
    tools = messages[first:end]
    caller = _require_message(messages, first - 1) if first > 0 else None
    if not isinstance(caller, AIMessage) or not caller.tool_calls:
        return first, None, _orphans(tools, first)
    start = first - 1
    removed = f"removed AIMessage at index {start} and its {end - first} ToolMessage(s): "
    call_ids = [call.get("id") for call in caller.tool_calls]
    if None in call_ids or len(set(call_ids)) != len(call_ids):
        return (
            start,
            None,
            [f"{removed}tool call ids missing or repeated, answers cannot be matched"],
        )
    answers, notes, pending = _answers(call_ids, tools, first)  # type: ignore[arg-type]
    if pending:
        missing = ", ".join(repr(i) for i in call_ids if i in pending)
        return start, None, [f"{removed}tool call(s) {missing} have no ToolMessage"]
    return start, [caller, *answers], notes


def _call_ids(message: AIMessage, index: int, problems: list[str]) -> set[str]:
    """The ids of ``message``'s tool calls (a problem noted when missing or repeated)."""
    ids = [call.get("id") for call in message.tool_calls]
    if None in ids or len(set(ids)) != len(ids):
        problems.append(f"messages[{index}]: tool call ids missing or repeated")
    return {i for i in ids if i is not None}


def _kind_problems(index: int, message: BaseMessage) -> list[str]:
    """What is wrong with a message that is no ToolMessage nor AIMessage (if anything)."""
    if isinstance(message, SystemMessage):
        return [f"messages[{index}]: SystemMessage inside the history"]
    if not isinstance(message, HumanMessage):
        return [f"messages[{index}]: {_describe(message)} is not a Human, AI or Tool message"]
    return []


def _unanswered(index: int, open_ids: set[str]) -> list[str]:
    """The problem of the AIMessage at ``index`` whose calls ``open_ids`` got no answer."""
    if not open_ids:
        return []
    ids = ", ".join(repr(i) for i in sorted(open_ids))
    return [f"messages[{index}]: tool call(s) {ids} have no ToolMessage"]


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
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id in open_ids:
                open_ids.discard(message.tool_call_id)
            else:
                problems.append(
                    f"messages[{index}]: ToolMessage (tool_call_id {message.tool_call_id!r}) "
                    "answers no open tool call of the AIMessage before it"
                )
            continue
        problems.extend(_unanswered(open_at, open_ids))
        open_at, open_ids = index, set()
        if isinstance(message, AIMessage):
            open_ids = _call_ids(message, index, problems)
        else:
            problems.extend(_kind_problems(index, message))
    problems.extend(_unanswered(open_at, open_ids))
    return problems


_NO_NOTES: list[str] = []  # shared, never mutated
_Unit = tuple[int, list[BaseMessage], list[str], int]
"""A parsed unit: (index of its first message, its messages, notes oldest first, tokens)."""


class _Walk(NamedTuple):
    """What `_walk_units` walked."""

    units: list[_Unit]  # newest first
    older_notes: list[str]  # removals older than the oldest unit, oldest first
    total: int  # tokens of ``units``
    end: int  # where the walk stopped: the start of its oldest unit (or of removals)
    stopped: bool  # a unit did not fit (``end`` is where that unit ends)
    over: _Unit | None = None  # that unit


def _uncounted(_message: BaseMessage) -> int:
    return 0


def _walk_units(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int | None = None,
    count: Callable[[BaseMessage], int] = _uncounted,
    end: int | None = None,
    floor: int = 0,
) -> _Walk:
    """Parse units newest first from ``end``, until ``floor`` or the first unit over ``max_tokens``.

    A unit that starts below ``floor`` is still parsed whole (the walk then ends below
    ``floor``: the caller sees it in ``end``).
    """
    limit = sys.maxsize if max_tokens is None else max_tokens
    units: list[_Unit] = []
    pending: list[str] = []  # removals newer than the next unit to keep, newest first
    total = 0
    end = len(messages) if end is None else end
    unit: list[BaseMessage] | None
    while end > floor:
        message = messages[end - 1]
        kind = type(message)
        if kind is HumanMessage or (kind is AIMessage and not message.tool_calls):  # type: ignore[attr-defined]
            # fast path for the common single-message unit (exact types only)
            start, unit, notes = end - 1, [message], _NO_NOTES
            cost = count(message)
        else:
            start, unit, notes = _unit_before(messages, end)
            if unit is None:
                pending.extend(reversed(notes))
                end = start
                continue
            cost = sum(map(count, unit))
        if total + cost > limit:
            # removals next to a unit that does not fit: in the dropped part
            return _Walk(units, [], total, end, stopped=True, over=(start, unit, notes, cost))
        total += cost
        if pending:
            units.append((start, unit, [*notes, *reversed(pending)], cost))
            pending = []
        else:
            units.append((start, unit, notes, cost))
        end = start
    return _Walk(units, list(reversed(pending)), total, end, stopped=False)


def _leading_non_human(units: Sequence[_Unit]) -> int:
    """How many of the oldest units of oldest-first ``units`` come before a Human one."""
    lead = 0
    for unit in units:
        if isinstance(unit[1][0], HumanMessage):
            break
        lead += 1
    return lead


def _lead_note(popped: Sequence[_Unit]) -> str | None:
    """The note of removing oldest-first units ``popped`` from the start (None: none)."""
    if not popped:
        return None
    if len(popped) == 1 and len(popped[0][1]) == 1:  # one AI answer: most next turns
        return (
            f"removed 1 message(s) from index {popped[0][0]} ({type(popped[0][1][0]).__name__}): "
            "the history must start on a HumanMessage"
        )
    removed = [m for unit in popped for m in unit[1]]
    kinds = ", ".join(_describe(m) for m in removed[:4]) + (", ..." if len(removed) > 4 else "")
    return (
        f"removed {len(removed)} message(s) from index {popped[0][0]} ({kinds}): "
        "the history must start on a HumanMessage"
    )


def _flatten(units: Iterable[_Unit]) -> tuple[BaseMessage, ...]:
    """The messages of oldest-first ``units``, in order."""
    kept: list[BaseMessage] = []
    for unit in units:
        kept.extend(unit[1])
    return tuple(kept)


def _notes(units: Iterable[_Unit]) -> list[str]:
    """The notes of oldest-first ``units``, in order."""
    return [note for unit in units for note in unit[2]]


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
    walk = _walk_units(messages)
    units = walk.units[::-1]
    lead = _leading_non_human(units)
    notes = [*walk.older_notes, *_notes(units[:lead])]
    lead_note = _lead_note(units[:lead])
    if lead_note:
        notes.append(lead_note)
    notes.extend(_notes(units[lead:]))
    return _flatten(units[lead:]), tuple(notes)


# ----------------------------------------------------------------------------- walks


@dataclass(frozen=True, slots=True, eq=False)
class HistoryWalk:
    """The units one `fit_history` call parsed and counted, for the next call to reuse.

    The next turn of a conversation is the same history with a few messages appended;
    `fit_history` given this walk (``previous=``) parses and counts only the new
    messages (and older ones only if the budget grew past what was walked). It is
    reused only while the walked window is unchanged: the same (or equal) messages at
    the same positions, with the same (or equal) contents. Replacing a message by a
    different one (what LangGraph's ``add_messages`` does for an id it already holds) or
    assigning it another ``content`` invalidates it; editing a ``tool_calls`` list in
    place is not seen.

    Made only for a window that needed no repair and whose items are messages as given
    (no dict converted, no message shown replaced). Holds the window's messages.

    Attributes:
        window: The walked items, ``messages[start:end]``, as the caller gave them.
        contents: Their ``content`` values, in order (contents assigned later are seen).
        units: The units that fit, oldest first (with any leading non-Human ones).
        prefix: Running token sums: ``prefix[i + 1] - prefix[i]`` is unit ``i``'s tokens.
        over: The unit that did not fit (where the walk stopped), or None.
        start: Index of the oldest walked item (``over``'s first, else ``cut``).
        cut: Index of the oldest unit that fit (``end`` if none did).
        end: Length of the history that was walked.
        reached_start: The walk reached the first message (nothing older to walk).
    """

    window: tuple[Any, ...]
    contents: tuple[Any, ...]
    units: tuple[_Unit, ...]
    prefix: tuple[int, ...]
    over: _Unit | None
    start: int
    cut: int
    end: int
    reached_start: bool


class TurnWalk(NamedTuple):
    """A composition's walk, kept for its conversation's next turn (`ctxpolicy.next_turn`).

    The fields of a `HistoryWalk`, read the same way (``fit_history`` reuses it like
    one), then what the composition made of the other layers. A named tuple: the next
    turn makes one per call, and a tuple is the cheapest record to make (a frozen
    dataclass of as many fields costs several times as much).
    """

    window: tuple[Any, ...]
    contents: tuple[Any, ...]
    units: tuple[_Unit, ...]
    prefix: tuple[int, ...]
    over: _Unit | None
    start: int
    cut: int
    end: int
    reached_start: bool
    #: the composition frame the call took (the next turn takes the walk only with it)
    frame: object
    #: what the call made of the other layers (the composer's)
    layers: Any


AnyWalk = HistoryWalk | TurnWalk
"""What `fit_history` can reuse: a walk of its own or a composition's."""

#: `AnyWalk`'s types, for ``isinstance`` (a union there is built again on every call)
_WALKS = (HistoryWalk, TurnWalk)


#: the sequences `_items_as_given` reads as they are (a constant: ``list | tuple`` would
#: build a union on every call)
_AS_GIVEN = (list, tuple)


def _items_as_given(messages: Sequence[BaseMessage]) -> Sequence[Any] | None:
    """The caller's list or tuple behind ``messages`` when read as it is, else None.

    Other sequences (lazy, remote) are never sliced: their walks are not remembered.
    """
    if type(messages) is MessagesView:
        if messages._shown:
            return None
        messages = messages._items
    return messages if isinstance(messages, _AS_GIVEN) else None


def _all_messages(items: Sequence[Any]) -> bool:
    return all(map(isinstance, items, repeat(BaseMessage)))


_notes_of = itemgetter(2)


_contents = attrgetter("content")


def _unchanged(walk: AnyWalk, items: Sequence[Any], length: int) -> bool:
    """Whether ``items`` (of ``length`` shown) still hold ``walk``'s window, as walked."""
    if length < walk.end:
        return False
    now = tuple(items[walk.start : walk.end])
    # tuple equality compares identity first: one C pass per check over unchanged items
    return now == walk.window and tuple(map(_contents, now)) == walk.contents


def latest_walk(walks: Iterable[object], messages: Sequence[BaseMessage]) -> AnyWalk | None:
    """The first walk (`HistoryWalk` or `TurnWalk`) of ``walks`` whose window ends where it
    did in ``messages``.

    A cheap check (the window's last message only): `fit_history` checks the whole
    window again before reusing it.
    """
    items = _items_as_given(messages)
    if items is None:
        return None
    length = len(messages)
    for walk in walks:
        if (
            isinstance(walk, _WALKS)
            and walk.window
            and length >= walk.end
            and items[walk.end - 1] is walk.window[-1]
        ):
            return walk
    return None


class _Walked(NamedTuple):
    """Units walked over a history (oldest first), before the start is made Human."""

    units: list[_Unit]
    prefix: list[int]  # running sums over ``units`` (offset arbitrary)
    reached_start: bool
    clean: bool  # no unit carries a note, and the items were messages as given
    over: _Unit | None = None  # the unit that did not fit


def _record(
    items: Sequence[Any], walked: _Walked, end: int, reused: AnyWalk | None = None
) -> HistoryWalk:
    """The `HistoryWalk` of ``walked`` over ``items[:end]``.

    ``reused``: the earlier walk ``walked`` continues, whose window this call found
    unchanged; the contents it holds for the part still in the window are taken as they
    are, so only the appended messages' contents are read (the next turn stays O(new)).
    """
    units, over = walked.units, walked.over
    cut = units[0][0] if units else end
    start = over[0] if over is not None else cut
    window = tuple(items[start:end])
    if reused is not None and reused.start <= start <= reused.end <= end:
        contents = reused.contents[start - reused.start :] + tuple(
            map(_contents, window[reused.end - start :])
        )
    else:
        contents = tuple(map(_contents, window))
    # positional: a frozen dataclass sets keyword arguments more slowly (one per call)
    return HistoryWalk(
        window,
        contents,
        tuple(units),
        tuple(walked.prefix),
        over,
        start,
        cut,
        end,
        walked.reached_start,
    )


def _fit(
    messages: Sequence[BaseMessage],
    items: Sequence[Any] | None,
    walked: _Walked,
    reused: AnyWalk | None = None,
) -> HistoryFit:
    """The `HistoryFit` of ``walked``: its oldest non-Human units dropped, then kept
    (``reused``: the unchanged earlier walk it continues, see `_record`)."""
    units, prefix = walked.units, walked.prefix
    lead = _leading_non_human(units)
    kept_units = units[lead:]
    tokens = prefix[-1] - prefix[lead]
    length = len(messages)
    cut = kept_units[0][0] if kept_units else length
    lead_note = _lead_note(units[:lead]) if lead else None
    counted: tuple[int, ...] = ()
    if walked.clean and items is not None:
        kept = tuple(items[cut:length])  # no removal inside: the window as given
        repairs = [lead_note] if lead_note else []
        walk = _record(items, walked, length, reused)
        counted = _counted_before(units, lead, walked.over, length)
    else:
        kept = _flatten(kept_units)
        repairs = _notes(kept_units)
        if lead_note:
            repairs.insert(0, lead_note)
        walk = None
    return HistoryFit(kept, MessagesView(messages, cut), tokens, tuple(repairs), walk, counted)


def _counted_before(
    units: Sequence[_Unit], lead: int, over: _Unit | None, length: int
) -> tuple[int, ...]:
    """The walk's counts of the messages right before the kept units, newest first
    (`HistoryFit.dropped_counts`).

    ``units`` (oldest first, no removal between them: a clean walk) start with ``lead``
    units dropped so that the kept part starts on a HumanMessage; ``over`` is the unit
    that did not fit. A unit's tokens are its message's count when it holds one message;
    the counts stop at the first unit that holds more, and before ``over`` when it does
    not end where the units start (a removal between them).
    """
    counts: list[int] = []
    for unit in reversed(units[:lead]):
        if len(unit[1]) != 1:
            return tuple(counts)
        counts.append(unit[3])
    if over is not None and len(over[1]) == 1:
        after = units[0][0] if units else length
        if over[0] + 1 == after:
            counts.append(over[3])
    return tuple(counts)


def _walked(walk: _Walk, items: Sequence[Any] | None, *, start: int) -> _Walked:
    """``walk``'s units oldest first, with running sums from ``start``."""
    units = walk.units[::-1]
    clean = items is not None and not any(map(_notes_of, units))
    walked = [walk.over, *units] if walk.over is not None else units
    if clean and items is not None and walked:
        clean = _all_messages(items[walked[0][0] : walked[-1][0] + len(walked[-1][1])])
    prefix = list(accumulate((unit[3] for unit in units), initial=start))
    return _Walked(units, prefix, reached_start=not walk.stopped, clean=clean, over=walk.over)


def _walk_after(
    previous: AnyWalk,
    messages: Sequence[BaseMessage],
    items: Sequence[Any],
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
) -> _Walked | None:
    """Walk what follows ``previous``'s window and reuse the window (None: cannot).

    The appended items are read as given (the caller's list, not through the view): they
    are all messages (else the fresh walk reads them, converting what the view converts),
    and so is the window, whose units each start on a Human or AI message, so no unit
    parsed here reads an item older than the window.
    """
    length = len(messages)
    if not _all_messages(items[previous.end : length]):
        return None
    tail = _walk_units(items, max_tokens=max_tokens, count=count, end=length, floor=previous.end)
    if tail.stopped:  # the new messages alone fill the budget
        return _walked(tail, items, start=0)
    new = tail.units[::-1]
    if tail.end != previous.end or tail.older_notes or any(map(_notes_of, new)):
        return None  # a unit spans the old end, or the new part needed a repair
    old = previous.prefix
    room = max_tokens - tail.total
    first = bisect_left(old, old[-1] - room)  # the oldest old unit that still fits
    units = [*previous.units[first:], *new]
    prefix = list(old[first:])
    for unit in new:
        prefix.append(prefix[-1] + unit[3])
    if first:  # an old unit did not fit: the walk stops there
        return _Walked(
            units, prefix, reached_start=False, clean=True, over=previous.units[first - 1]
        )
    walked = _Walked(
        units, prefix, reached_start=previous.reached_start, clean=True, over=previous.over
    )
    left = room - (old[-1] - old[0])
    if previous.reached_start or (previous.over is not None and previous.over[3] > left):
        return walked  # nothing older, or it stops at the same unit as before
    return _walk_older(walked, messages, room=left, count=count, end=previous.cut, items=items)


def _walk_older(
    walked: _Walked,
    messages: Sequence[BaseMessage],
    *,
    room: int,
    count: Callable[[BaseMessage], int],
    end: int,
    items: Sequence[Any],
) -> _Walked:
    """``walked`` extended with the units before index ``end`` that fit in ``room`` tokens."""
    older = _walk_units(messages, max_tokens=room, count=count, end=end)
    extra = _walked(older, items, start=0)
    shift = walked.prefix[0] - extra.prefix[-1]
    prefix = [p + shift for p in extra.prefix[:-1]] + walked.prefix
    return _Walked(
        extra.units + walked.units,
        prefix,
        reached_start=extra.reached_start,
        clean=extra.clean,
        over=extra.over,
    )


def fit_history(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    previous: AnyWalk | None = None,
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

    With ``previous`` (the ``walk`` of an earlier fit of this history, before messages
    were appended), only the appended messages are parsed and counted: the next turn
    costs what is new. The result is the same as without it; a ``previous`` whose window
    changed (see `HistoryWalk`) is ignored. ``count`` must be the one that made it.

    Args:
        messages: The history, oldest first.
        max_tokens: Token budget of the kept part.
        count: Tokens of one message (e.g. ``Tokenizer.count_message``).
        previous: An earlier fit's `HistoryWalk` of this history, or a composition's
            `TurnWalk` (optional).

    Returns:
        The `HistoryFit`.

    Raises:
        ValueError: When ``max_tokens`` is negative.
        TypeError: When a walked element is not a ``BaseMessage`` (naming its index).
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    items = _items_as_given(messages)
    walked: _Walked | None = None
    if previous is not None and items is not None and _unchanged(previous, items, len(messages)):
        walked = _walk_after(previous, messages, items, max_tokens=max_tokens, count=count)
    if walked is None:
        walk = _walk_units(messages, max_tokens=max_tokens, count=count)
        return _fit(messages, items, _walked(walk, items, start=0))
    return _fit(messages, items, walked, previous)


def count_newest(
    tok: Tokenizer,
    messages: Sequence[BaseMessage],
    limit: int,
    *,
    counted: Sequence[int] = (),
) -> tuple[int, bool]:
    """Tokens of ``messages`` counted newest-first, stopping once above ``limit``.

    ``counted``: the counts of the newest messages, newest first, when the caller has them
    (`HistoryFit.dropped_counts`): taken instead of counting those messages again.

    Returns:
        ``(tokens, complete)``: the tokens counted and whether every message was counted.
    """
    total = 0
    left = len(messages)
    for tokens in counted[:left]:
        total += tokens
        left -= 1
        if total > limit and left:
            return total, False
    count_message = tok.count_message
    rest = MessagesView(messages, left) if counted else messages
    for message in reversed(rest):
        total += count_message(message)
        left -= 1
        if total > limit and left:
            return total, False
    return total, True
