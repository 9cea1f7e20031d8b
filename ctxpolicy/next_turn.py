"""The next turn of a conversation: the last composition's walk advanced over the new messages.

A conversation's next call is its last call's history with a few messages appended, and
usually everything else equal. `ctxpolicy.compose.compose_call` then does not compose
again through the general pipeline: it takes the last call's walk (a
`ctxpolicy.history.TurnWalk`: the walk plus what that call made of its other layers),
advances it over the appended messages here (`advance_walk`), and puts the new history
between the other layers' messages it already had. What this module decides is only
whether that step gives what a fresh fit gives; every case it does not take (a window
that changed, a new part that needs a repair, a budget grown past the unit the last walk
stopped at) returns None, and the caller composes the general way. docs/design.md,
'Budget and overflow', explains the next turn; `tests/engine/test_next_turn_path.py`
checks that both ways give the same result.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxpolicy.history import (
    _NO_NOTES,
    TurnWalk,
    _all_messages,
    _counted_before,
    _lead_note,
    _leading_non_human,
    _unchanged,
    _Unit,
    _walk_units,
)

__all__ = ["KeptPart", "advance_walk"]

_contents = attrgetter("content")
_tokens = itemgetter(3)  # of a unit


def _new_units(
    items: Sequence[Any], end: int, length: int, *, max_tokens: int, count: Callable[..., int]
) -> tuple[list[_Unit], int] | None:
    """The units of ``items[end:length]``, oldest first, and their tokens (None: they do
    not parse into units without a repair, or alone exceed ``max_tokens``).

    Messages that are each a unit of their own (a HumanMessage, an AIMessage without tool
    calls) are read here; anything else is parsed by the walk's own parser.
    """
    units: list[_Unit] = []
    total = 0
    for index in range(end, length):
        message = items[index]
        kind = type(message)
        if not (kind is HumanMessage or (kind is AIMessage and not message.tool_calls)):
            return _parsed_units(items, end, length, max_tokens=max_tokens, count=count)
        cost = count(message)
        total += cost
        units.append((index, [message], _NO_NOTES, cost))
    return None if total > max_tokens else (units, total)


def _parsed_units(
    items: Sequence[Any], end: int, length: int, *, max_tokens: int, count: Callable[..., int]
) -> tuple[list[_Unit], int] | None:
    """`_new_units` of a part holding other messages (tool calls, their results): None
    unless all are messages (the walk reads them as given)."""
    if not _all_messages(items[end:length]):
        return None
    tail = _walk_units(items, max_tokens=max_tokens, count=count, end=length, floor=end)
    if tail.stopped or tail.end != end or tail.older_notes:
        return None  # it fills the budget, a unit spans the old end, or a repair
    units = tail.units[::-1]
    if any(unit[2] for unit in units):
        return None
    return units, tail.total


class KeptPart(NamedTuple):
    """What an advanced walk keeps, once its kept part starts on a HumanMessage.

    Its `note` and `dropped_counts` are worked out when read: only the history's report
    reads them (`ctxpolicy.compose`), and most calls read no report.
    """

    #: where the kept part starts (past the leading units that are not a HumanMessage)
    cut: int
    tokens: int
    #: the walk's units, oldest first
    units: tuple[_Unit, ...]
    #: how many of the oldest ``units`` are dropped so that the kept part starts on a
    #: HumanMessage
    lead: int
    #: the unit the walk stopped at (None: none)
    over: _Unit | None
    #: the length of the history walked
    end: int

    @property
    def note(self) -> str | None:
        """The note of dropping the ``lead`` units (None: none were)."""
        return _lead_note(self.units[: self.lead]) if self.lead else None

    @property
    def dropped_counts(self) -> tuple[int, ...]:
        """``HistoryFit.dropped_counts``: the walk's counts of the messages right before
        the kept part, newest first."""
        return _counted_before(self.units, self.lead, self.over, self.end)


def advance_walk(
    previous: TurnWalk,
    items: Sequence[Any],
    length: int,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    layers: Any,
) -> tuple[TurnWalk, KeptPart] | None:
    """``previous`` advanced over ``items[previous.end:length]`` (the appended messages),
    and what the new walk keeps.

    The walk ``fit_history(previous=previous)`` makes of the same history when its window
    is unchanged, the appended part parses into units without a repair and does not alone
    exceed ``max_tokens``, and no older unit has to be walked (the same units, running
    sums, unit over, window and contents, and what it keeps); None in every other case.

    Args:
        previous: The walk of the conversation's last call, made with ``count``.
        items: The caller's list or tuple (read as given: see
            `ctxpolicy.history.fit_history`).
        length: How many of ``items`` the history shows.
        max_tokens: The history's cap (the one ``previous`` was fitted to).
        count: Tokens of one message.
        layers: What the new walk carries for the turn after (`TurnWalk.layers`).
    """
    end = previous.end
    if not _unchanged(previous, items, length):
        return None
    parsed = _new_units(items, end, length, max_tokens=max_tokens, count=count)
    if parsed is None:
        return None
    new, added = parsed
    old = previous.prefix
    room = max_tokens - added
    first = bisect_left(old, old[-1] - room)  # the oldest old unit that still fits
    over: _Unit | None
    if first:  # an older unit no longer fits: the walk stops at the one before it
        over = previous.units[first - 1]
        reached_start = False
    else:
        over, reached_start = previous.over, previous.reached_start
        left = room - (old[-1] - old[0])
        if not (reached_start or (over is not None and over[3] > left)):
            return None  # the budget grew past the unit it stopped at: walk older ones
    units = previous.units[first:] + tuple(new)
    prefix = old[first:] + tuple(accumulate(map(_tokens, new), initial=old[-1]))[1:]
    cut = units[0][0] if units else length
    start = over[0] if over is not None else cut
    window = tuple(items[start:length])
    # the window starts at or after the old one's start, whose contents were just checked
    contents = previous.contents[start - previous.start :] + tuple(
        map(_contents, window[end - start :])
    )
    walk = TurnWalk(
        window,
        contents,
        units,
        prefix,
        over,
        start,
        cut,
        length,
        reached_start,
        previous.frame,
        layers,
    )
    lead = _leading_non_human(units)  # the kept part starts on a HumanMessage
    return walk, KeptPart(
        units[lead][0] if lead < len(units) else length,
        prefix[-1] - prefix[lead],
        units,
        lead,
        over,
        length,
    )
