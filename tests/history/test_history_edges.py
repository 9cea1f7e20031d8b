"""Edge cases of the history module: exact repair notes, `MessagesView` details, and the
`HistoryWalk` a reused fit records (it must be the walk a fresh fit would record)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.history import (
    MessagesView,
    as_messages,
    check_history,
    count_newest,
    fit_history,
    repair_history,
)

from .test_history import ai_calls, ids, tool

OUT_OF_RANGE = r"^MessagesView index out of range$"


def size(message):
    """Tokens of a message: the length of its content (exact, easy to reason about)."""
    return len(message.content)


def h(n):
    return HumanMessage("h" * n)


def a(n):
    return AIMessage("a" * n)


# -- repair notes -----------------------------------------------------------------------


def lead_note(removed, index, kinds):
    return (
        f"removed {removed} message(s) from index {index} ({kinds}): "
        "the history must start on a HumanMessage"
    )


def test_the_lead_note_lists_four_kinds_and_no_ellipsis_for_four_messages():
    history = [a(1), ai_calls("x"), tool("x"), a(1), h(1)]
    _, notes = repair_history(history)
    assert notes == (lead_note(4, 0, "AIMessage, AIMessage, ToolMessage, AIMessage"),)


def test_the_lead_note_lists_four_kinds_then_an_ellipsis_for_five_messages():
    history = [a(1), ai_calls("x"), tool("x"), a(1), ai_calls("y"), tool("y"), h(1)]
    _, notes = repair_history(history)
    assert notes == (lead_note(6, 0, "AIMessage, AIMessage, ToolMessage, AIMessage, ..."),)
    history = [a(1), a(1), ai_calls("x"), tool("x"), a(1), h(1)]
    _, notes = repair_history(history)
    assert notes == (lead_note(5, 0, "AIMessage, AIMessage, AIMessage, ToolMessage, ..."),)


def test_the_lead_note_comes_before_the_notes_of_the_kept_window():
    history = [a(1), h(1), ToolMessage("r", tool_call_id="ghost"), a(1)]
    lead = "removed 1 message(s) from index 0 (AIMessage): the history must start on a HumanMessage"
    orphan = (
        "removed ToolMessage at index 2 (tool_call_id 'ghost'): no AIMessage tool call before it"
    )
    fit = fit_history(history, max_tokens=100, count=size)
    assert fit.kept == (history[1], history[3])
    assert fit.repairs == (lead, orphan)
    assert fit.walk is None
    assert repair_history(history) == ((history[1], history[3]), (lead, orphan))


def test_each_orphan_tool_message_is_named_at_its_own_index():
    history = [h(1), tool("p"), tool("q"), tool("r")]
    assert repair_history(history) == (
        (history[0],),
        tuple(
            f"removed ToolMessage at index {i} (tool_call_id {c!r}): "
            "no AIMessage tool call before it"
            for i, c in ((1, "p"), (2, "q"), (3, "r"))
        ),
    )


def test_tool_messages_at_the_very_start_answer_nothing():
    # the run of ToolMessages starts at index 0: nothing before it (not the last message)
    history = [tool("x"), h(1), ai_calls("x")]
    assert repair_history(history) == (
        (history[1],),
        (
            "removed ToolMessage at index 0 (tool_call_id 'x'): no AIMessage tool call before it",
            "removed AIMessage at index 2: its tool call(s) 'x' have no ToolMessage",
        ),
    )
    history = [tool("a"), h(1), tool("b")]
    assert repair_history(history) == (
        (history[1],),
        (
            "removed ToolMessage at index 0 (tool_call_id 'a'): no AIMessage tool call before it",
            "removed ToolMessage at index 2 (tool_call_id 'b'): no AIMessage tool call before it",
        ),
    )


def test_tool_messages_at_index_one_answer_the_ai_message_at_index_zero():
    history = [ai_calls("x"), tool("x"), h(1)]
    assert repair_history(history) == (
        (history[2],),
        (lead_note(2, 0, "AIMessage, ToolMessage"),),
    )


def test_notes_list_every_missing_tool_call_id():
    history = [h(1), ai_calls("a", "b", "c"), tool("a")]
    assert repair_history(history)[1] == (
        (
            "removed AIMessage at index 1 and its 1 ToolMessage(s): "
            "tool call(s) 'b', 'c' have no ToolMessage"
        ),
    )
    history = [h(1), ai_calls("a", "b")]
    assert repair_history(history)[1] == (
        "removed AIMessage at index 1: its tool call(s) 'a', 'b' have no ToolMessage",
    )
    assert check_history([h(1), ai_calls("b", "a"), h(1)]) == [
        "messages[1]: tool call(s) 'a', 'b' have no ToolMessage"
    ]


# -- count_newest -------------------------------------------------------------------------


def test_count_newest_goes_on_while_the_total_equals_the_limit():
    tok = SimpleNamespace(count_message=size)
    assert count_newest(tok, [h(5), h(5)], 5) == (10, True)
    assert count_newest(tok, [h(1), h(5), h(5)], 5) == (10, False)
    assert count_newest(tok, [h(2), h(3)], 5) == (5, True)


# -- as_messages ----------------------------------------------------------------------------


def test_as_messages_refuses_strings_and_non_sequences_with_the_exact_message():
    with pytest.raises(TypeError, match=r"^history must be a sequence of messages, got str$"):
        as_messages("hello", argument="history")
    with pytest.raises(TypeError, match=r"^h must be a sequence of messages, got bytes$"):
        as_messages(b"hello", argument="h")
    with pytest.raises(TypeError, match=r"^h must be a sequence of messages, got int$"):
        as_messages(5, argument="h")


def test_as_messages_returns_empty_sequences_and_views_as_given():
    empty = []
    assert as_messages(empty, argument="h") is empty
    view = MessagesView([h(1)])
    assert as_messages(view, argument="h") is view
    assert as_messages(None, argument="h") == ()
    items = [{"role": "user", "content": "q"}]
    converted = as_messages(items, argument="h")
    assert isinstance(converted, MessagesView) and converted.base is items
    assert converted[0] == HumanMessage("q")
    # a tuple (no list fast path) is read through a view too, naming the argument
    empty_tuple = ()
    assert as_messages(empty_tuple, argument="h") is empty_tuple
    given = ({"role": "user", "content": "q"}, {"no": "role"})
    converted = as_messages(given, argument="history")
    assert isinstance(converted, MessagesView) and converted.base is given
    assert converted[0] == HumanMessage("q")
    with pytest.raises(ValueError, match=r"^history\[1\]: not a message"):
        converted[1]


# -- MessagesView ---------------------------------------------------------------------------


def test_out_of_range_indexes_raise_the_exact_index_error():
    view = MessagesView([h(1), h(2)])
    with pytest.raises(IndexError, match=OUT_OF_RANGE):
        view[-3]
    with pytest.raises(IndexError, match=OUT_OF_RANGE):
        view[2]
    with pytest.raises(IndexError, match=OUT_OF_RANGE):
        MessagesView([h(1), h(2), h(3)], 2)[2]
    with pytest.raises(IndexError, match=OUT_OF_RANGE):
        view.replaced(2, h(3))
    with pytest.raises(IndexError, match=OUT_OF_RANGE):
        view.replaced(-3, h(3))


def test_replaced_accepts_negative_indexes_and_shows_only_that_message():
    first, second, new = h(1), h(2), h(3)
    view = MessagesView([first, second])
    last = view.replaced(-1, new)
    assert last[-1] is new and last[1] is new and last[0] is first
    assert last[0:2] == (first, new) and list(last) == [first, new]
    assert view[1] is second  # the original view is unchanged
    front = view.replaced(-2, new)
    assert front[0] is new and front[1] is second


def test_a_view_of_a_view_keeps_its_shown_messages_and_conversions():
    first, new = h(1), h(9)
    shown = MessagesView([first, h(2)]).replaced(1, new)
    again = MessagesView(shown)
    assert again[1] is new and again[0] is first
    assert list(again) == [first, new]
    both = again.replaced(0, h(8))
    assert both[1] is new and both[0].content == "hhhhhhhh"
    items = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    converting = MessagesView(items, argument="h")
    inner = MessagesView(converting)
    assert inner[0] == HumanMessage("q") and inner[1] == AIMessage("a")
    assert inner[0] is converting[0]  # converted once, kept by both views
    prefix = MessagesView(MessagesView(items, argument="h"), 1)
    assert list(prefix) == [HumanMessage("q")]


def test_a_view_of_a_view_names_its_own_argument_in_conversion_errors():
    bad = [5]
    outer = MessagesView(MessagesView(bad, argument="inner"), argument="outer")
    with pytest.raises(ValueError, match=r"^outer\[0\]: not a message \(int\): "):
        outer[0]
    kept = MessagesView(MessagesView(bad, argument="inner"))
    with pytest.raises(ValueError, match=r"^inner\[0\]: not a message \(int\): "):
        kept[0]
    with pytest.raises(ValueError, match=r"^inner\[0\]: not a message \(int\): "):
        list(kept)


def test_without_argument_items_are_returned_as_they_are():
    item = {"role": "user", "content": "q"}
    view = MessagesView([item, h(1)])
    assert view[0] is item
    assert next(iter(view)) is item
    assert view[0:1] == (item,)


def test_a_view_hashes_as_the_tuple_of_its_messages():
    # langchain messages are unhashable; the view hashes whatever it holds as a tuple would
    assert hash(MessagesView([])) == hash(())
    assert hash(MessagesView(["q", "a", "b"], 2)) == hash(("q", "a"))


# -- the walk a fit records ------------------------------------------------------------------


def walk_summary(walk):
    """A `HistoryWalk` as comparable values: message ids, token differences, exact flags."""

    def unit(u):
        return None if u is None else (u[0], ids(u[1]), list(u[2]), u[3])

    return {
        "start": walk.start,
        "cut": walk.cut,
        "end": walk.end,
        "reached_start": walk.reached_start,
        "over": unit(walk.over),
        "units": [unit(u) for u in walk.units],
        "steps": [b - a for a, b in zip(walk.prefix, walk.prefix[1:], strict=False)],
        "window": ids(walk.window),
        "contents": [id(c) for c in walk.contents],
    }


def fresh_and_reused(history, first_budget, appended, budget):
    first = fit_history(history, max_tokens=first_budget, count=size)
    assert first.walk is not None
    grown = history + appended
    reused = fit_history(grown, max_tokens=budget, count=size, previous=first.walk)
    fresh = fit_history(grown, max_tokens=budget, count=size)
    assert reused == fresh
    assert reused.walk is not None and fresh.walk is not None
    assert walk_summary(reused.walk) == walk_summary(fresh.walk)
    return grown, reused.walk


def test_a_fresh_walk_records_the_unit_over_and_whether_it_reached_the_start():
    history = [h(50), h(10), a(10)]
    walk = fit_history(history, max_tokens=20, count=size).walk
    assert walk.reached_start is False
    assert walk.over == (0, [history[0]], [], 50)
    assert walk.start == 0 and walk.cut == 1 and walk.end == 3
    assert ids(walk.window) == ids(history)
    walk = fit_history(history, max_tokens=100, count=size).walk
    assert walk.reached_start is True
    assert walk.over is None
    assert walk.start == 0 and walk.cut == 0


def test_reuse_when_the_new_messages_alone_fill_the_budget():
    history = [h(10), a(10)]
    grown, walk = fresh_and_reused(history, 100, [h(200), a(10)], 100)
    assert walk.reached_start is False
    assert walk.over == (2, [grown[2]], [], 200)
    assert walk.start == 2 and walk.cut == 3


def test_reuse_when_an_old_unit_no_longer_fits():
    history = [h(10), a(10), h(10), a(10)]
    grown, walk = fresh_and_reused(history, 40, [h(10), a(10)], 40)
    assert walk.reached_start is False
    assert walk.over == (1, [grown[1]], [], 10)
    assert walk.start == 1 and walk.cut == 2


def test_reuse_of_a_walk_that_reached_the_start():
    history = [h(10), a(10)]
    _, walk = fresh_and_reused(history, 100, [h(10), a(10)], 100)
    assert walk.reached_start is True
    assert walk.over is None and walk.start == 0


def test_reuse_that_stops_at_the_same_unit_as_before():
    history = [h(100), h(10), a(10)]
    grown, walk = fresh_and_reused(history, 30, [a(5)], 30)
    assert walk.reached_start is False
    assert walk.over == (0, [grown[0]], [], 100)
    assert walk.start == 0 and walk.cut == 1


def test_reuse_that_walks_older_messages_to_the_start():
    history = [h(10), h(10), a(10)]
    _, walk = fresh_and_reused(history, 20, [a(10)], 100)
    assert walk.reached_start is True
    assert walk.over is None and walk.cut == 0


def test_reuse_that_walks_older_messages_until_one_does_not_fit():
    history = [h(50), h(10), h(10), a(10)]
    grown, walk = fresh_and_reused(history, 20, [a(10)], 50)
    assert walk.reached_start is False
    assert walk.over == (0, [grown[0]], [], 50)
    assert walk.start == 0 and walk.cut == 1
