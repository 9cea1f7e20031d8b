"""Structural validity, repair and budget fitting of conversation histories."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from ctxpolicy.history import (
    HistoryFit,
    MessagesView,
    PrefixView,
    check_history,
    fit_history,
    repair_history,
)
from ctxpolicy.tokens import get_tokenizer

# -- helpers ----------------------------------------------------------------------------


def count(message):
    """A cheap deterministic counter: 3 + content length + 2 per tool call."""
    calls = getattr(message, "tool_calls", None) or []
    return 3 + len(message.content) + sum(2 + len(c["name"]) for c in calls)


def trim(messages, max_tokens, counter=count):
    return trim_messages(
        list(messages),
        max_tokens=max_tokens,
        token_counter=lambda msgs: sum(counter(m) for m in msgs),
        strategy="last",
        start_on="human",
        include_system=False,
        allow_partial=False,
    )


def ids(messages):
    return [id(m) for m in messages]


def call(call_id, name="search"):
    return {"name": name, "args": {"q": call_id}, "id": call_id}


def ai_calls(*call_ids, text=""):
    return AIMessage(text, tool_calls=[call(i) for i in call_ids])


def tool(call_id, text="result"):
    return ToolMessage(text, tool_call_id=call_id)


VALID_KINDS = ["human", "ai", "tools"]
BROKEN_KINDS = [
    "orphan",
    "missing",
    "partial",
    "system",
    "duplicate",
    "interleaved",
    "repeated_ids",
]


@st.composite
def histories(draw, *, broken=False):
    """Random histories with tool calls (1-3 per AI message, parallel ToolMessages in any order).

    With ``broken=True`` also: orphan ToolMessages, tool calls without results (whole or
    partial), SystemMessages, duplicated answers, a Human message between a call and its
    result, repeated tool call ids, and possibly a leading non-Human message.
    """
    ids_ = itertools.count()
    kinds = VALID_KINDS + (BROKEN_KINDS if broken else [])
    first_human = not broken or draw(st.booleans())
    n_turns = draw(st.integers(min_value=0, max_value=30))
    size = st.integers(min_value=0, max_value=40)
    messages = []
    for turn in range(n_turns):
        kind = "human" if turn == 0 and first_human else draw(st.sampled_from(kinds))
        text = "x" * draw(size)
        if kind == "human":
            messages.append(HumanMessage(text))
        elif kind == "ai":
            messages.append(AIMessage(text))
        elif kind in ("tools", "duplicate", "partial", "interleaved"):
            call_ids = [f"c{next(ids_)}" for _ in range(draw(st.integers(1, 3)))]
            answers = [tool(i, "y" * draw(size)) for i in call_ids]
            answers = draw(st.permutations(answers))
            if kind == "duplicate":
                answers.append(tool(call_ids[0], "again"))
            if kind == "partial":
                call_ids.append(f"c{next(ids_)}")
            messages.append(ai_calls(*call_ids, text=text))
            if kind == "interleaved":
                messages.append(HumanMessage("wait"))
            messages.extend(answers)
        elif kind == "orphan":
            messages.append(tool(f"ghost{next(ids_)}", text))
        elif kind == "missing":
            messages.append(ai_calls(f"c{next(ids_)}", text=text))
        elif kind == "system":
            messages.append(SystemMessage(text))
        elif kind == "repeated_ids":
            same = f"c{next(ids_)}"
            messages += [ai_calls(same, same, text=text), tool(same), tool(same)]
    return messages


budgets = st.integers(min_value=0, max_value=400)


def assert_fit_invariants(history, max_tokens, fit, counted):
    repaired, _ = repair_history(history)
    assert check_history(repaired) == []
    # valid, within budget, tokens reported right
    assert check_history(fit.kept) == []
    assert fit.tokens == sum(count(m) for m in fit.kept) <= max_tokens
    # a suffix of the repaired history
    assert ids(repaired[len(repaired) - len(fit.kept) :]) == ids(fit.kept)
    # maximal: the shortest longer valid suffix (from the previous Human) does not fit
    start = len(repaired) - len(fit.kept)
    humans = [i for i in range(start) if isinstance(repaired[i], HumanMessage)]
    if humans:
        assert sum(count(m) for m in repaired[humans[-1] :]) > max_tokens
    # dropped is the untouched prefix before the kept window
    assert ids(history[: len(fit.dropped)]) == ids(fit.dropped)
    window = iter(ids(history[len(fit.dropped) :]))
    assert all(any(k == w for w in window) for k in ids(fit.kept))  # ordered subsequence
    if fit.kept:
        assert fit.kept[0] is history[len(fit.dropped)]
    # every message counted at most once
    assert len(counted) == len(set(counted))
    # the same as trim_messages on the repaired history with the same counter
    assert ids(trim(repaired, max_tokens)) == ids(fit.kept)


def recording(counter=count):
    counted = []

    def wrapped(message):
        counted.append(id(message))
        return counter(message)

    return wrapped, counted


# -- property tests ---------------------------------------------------------------------


@given(histories(), budgets)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fit_valid_history_matches_trim_messages(history, max_tokens):
    assert check_history(history) == []
    counter, counted = recording()
    fit = fit_history(history, max_tokens=max_tokens, count=counter)
    assert_fit_invariants(history, max_tokens, fit, counted)
    assert repair_history(history) == (tuple(history), ())
    assert ids(trim(history, max_tokens)) == ids(fit.kept)
    assert fit.repairs == () or fit.repairs[0].endswith("must start on a HumanMessage")


@given(histories(broken=True), budgets)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fit_broken_history_stays_valid(history, max_tokens):
    counter, counted = recording()
    fit = fit_history(history, max_tokens=max_tokens, count=counter)
    assert_fit_invariants(history, max_tokens, fit, counted)
    trimmed = trim(history, max_tokens)
    if check_history(history) == []:
        assert ids(trimmed) == ids(fit.kept)


@given(histories(broken=True))
@settings(max_examples=300, deadline=None)
def test_repair_history_is_valid_idempotent_and_only_removes(history):
    repaired, notes = repair_history(history)
    assert check_history(repaired) == []
    assert repair_history(repaired) == (repaired, ())
    window = iter(ids(history))
    assert all(any(k == w for w in window) for k in ids(repaired))  # subsequence, same objects
    assert (notes == ()) == (len(repaired) == len(history))
    assert (check_history(history) == []) == (repaired == tuple(history))


def test_the_generator_finds_histories_trim_messages_breaks():
    """trim_messages keeps what it is given: a broken tool-call pair stays broken."""
    found = find(
        histories(broken=True),
        lambda h: bool(h) and check_history(trim(h, 10_000)) != [],
        settings=settings(database=None, max_examples=2000, derandomize=True),
    )
    assert check_history(fit_history(found, max_tokens=10_000, count=count).kept) == []


# -- regression cases -------------------------------------------------------------------


def test_regression_trim_messages_keeps_an_interrupted_parallel_tool_call():
    # The user interrupted while two tools ran; only one result was recorded.
    history = [
        HumanMessage("book a flight and a hotel"),
        ai_calls("flight", "hotel"),
        tool("flight", "booked"),
        HumanMessage("never mind the hotel"),
        AIMessage("ok"),
    ]
    trimmed = trim(history, 1_000)
    assert trimmed == history  # kept as is: the provider rejects this request
    assert check_history(trimmed) == ["messages[1]: tool call(s) 'hotel' have no ToolMessage"]

    fit = fit_history(history, max_tokens=1_000, count=count)
    assert check_history(fit.kept) == []
    assert ids(fit.kept) == ids([history[0], history[3], history[4]])
    assert fit.repairs == (
        (
            "removed AIMessage at index 1 and its 1 ToolMessage(s): tool call(s) 'hotel' "
            "have no ToolMessage"
        ),
    )
    assert fit.dropped == ()


def test_broken_unit_inside_the_window_is_removed_not_a_stop():
    """A unit removed by repair is not a unit that did not fit: the walk continues past it.

    trim_messages counts the broken message and stops there; fit_history works on the
    repaired history, so it keeps the older complete turn (this is where the two differ
    on broken input, and trim_messages' output happens to be valid here).
    """
    history = [
        HumanMessage("x" * 10),
        ai_calls("lost", text="y" * 100),
        HumanMessage("x" * 10),
        AIMessage("x" * 10),
    ]
    fit = fit_history(history, max_tokens=60, count=count)
    assert ids(fit.kept) == ids([history[0], history[2], history[3]])
    assert ids(trim(history, 60)) == ids(history[2:])
    assert ids(trim(repair_history(history)[0], 60)) == ids(fit.kept)


def test_stops_at_the_first_unit_that_does_not_fit():
    history = [
        HumanMessage("x"),  # small, older: must NOT be taken past the big unit
        AIMessage("x" * 100),
        HumanMessage("x" * 10),
        AIMessage("x" * 10),
    ]
    fit = fit_history(history, max_tokens=40, count=count)
    assert ids(fit.kept) == ids(history[2:])
    assert ids(fit.dropped) == ids(history[:2])
    assert fit.tokens == 26
    assert fit.repairs == ()


def test_tool_unit_is_kept_or_dropped_whole():
    history = [
        HumanMessage("q"),
        ai_calls("a", "b"),
        tool("b", "x" * 30),
        tool("a", "x" * 30),
        AIMessage("answer"),
    ]
    whole = sum(count(m) for m in history)
    fit = fit_history(history, max_tokens=whole, count=count)
    assert ids(fit.kept) == ids(history)
    for budget in range(whole):
        kept = fit_history(history, max_tokens=budget, count=count).kept
        assert not any(isinstance(m, ToolMessage) for m in kept)
        assert check_history(kept) == []


def test_leading_units_that_fit_are_dropped_to_start_on_human():
    history = [
        HumanMessage("x" * 50),
        ai_calls("a"),
        tool("a", "x"),
        AIMessage("x"),
        HumanMessage("x"),
        AIMessage("x"),
    ]
    fit = fit_history(history, max_tokens=40, count=count)
    assert ids(fit.kept) == ids(history[4:])
    assert ids(fit.dropped) == ids(history[:4])
    assert fit.tokens == 8
    assert fit.repairs == (
        (
            "removed 3 message(s) from index 1 (AIMessage, ToolMessage, AIMessage): "
            "the history must start on a HumanMessage"
        ),
    )


def test_everything_fits_but_history_starts_on_ai():
    history = [AIMessage("hi, how can I help?"), HumanMessage("q"), AIMessage("a")]
    fit = fit_history(history, max_tokens=1000, count=count)
    assert ids(fit.kept) == ids(history[1:])
    assert ids(fit.dropped) == ids(history[:1])
    assert len(fit.repairs) == 1


def test_repairs_inside_the_window_are_reported_outside_are_not():
    history = [
        HumanMessage("old"),
        SystemMessage("stale system prompt"),
        HumanMessage("q"),
        tool("ghost"),
        AIMessage("a"),
    ]
    fit = fit_history(history, max_tokens=1000, count=count)
    assert ids(fit.kept) == ids([history[0], history[2], history[4]])
    assert fit.repairs == (
        "removed SystemMessage at index 1: no system messages in history",
        "removed ToolMessage at index 3 (tool_call_id 'ghost'): no AIMessage tool call before it",
    )
    small = fit_history(history, max_tokens=12, count=count)
    assert ids(small.kept) == ids([history[2], history[4]])
    assert small.repairs == (
        "removed ToolMessage at index 3 (tool_call_id 'ghost'): no AIMessage tool call before it",
    )


def test_empty_and_zero_budget():
    assert fit_history([], max_tokens=0, count=count) == HistoryFit((), (), 0, ())
    history = [HumanMessage("q")]
    fit = fit_history(history, max_tokens=0, count=count)
    assert fit.kept == ()
    assert ids(fit.dropped) == ids(history)


def test_fit_with_exact_tokenizer_matches_trim_messages():
    tok = get_tokenizer("cl100k_base")
    rng = random.Random(7)
    words = ["alpha", "beta", "数据", "管道", "def", "return", "x = 1", "\n"]
    history = []
    for turn in range(120):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
        if turn % 2 == 0:
            history.append(HumanMessage(text))
        elif turn % 6 == 1:
            history += [ai_calls(f"t{turn}", text=text), tool(f"t{turn}", text)]
        else:
            history.append(AIMessage(text))
    for budget in (0, 50, 500, 2000, 100_000):
        fit = fit_history(history, max_tokens=budget, count=tok.count_message)
        assert fit.tokens == tok.count_messages(fit.kept) <= budget
        assert ids(trim(history, budget, tok.count_message)) == ids(fit.kept)


# -- cost proportional to what is kept --------------------------------------------------


class GuardedSequence(Sequence):
    """A history that records index reads and refuses whole iteration."""

    def __init__(self, items):
        self._items = items
        self.read = []

    def __len__(self):
        return len(self._items)

    def __getitem__(self, index):
        if isinstance(index, int):
            self.read.append(index if index >= 0 else len(self._items) + index)
        return self._items[index]

    def __iter__(self):
        raise AssertionError("fit_history iterated the whole history")


def test_cost_grows_with_what_is_kept_not_with_length():
    history = []
    for i in range(5_000):
        history.append(HumanMessage("x" * 20))
        history += [ai_calls(f"c{i}"), tool(f"c{i}", "x" * 20)] if i % 3 == 0 else [AIMessage("y")]
    guarded = GuardedSequence(history)
    counter, counted = recording()
    fit = fit_history(guarded, max_tokens=300, count=counter)
    assert 0 < len(fit.kept) < 20
    assert len(counted) <= len(fit.kept) + 3  # kept + the one unit that did not fit
    assert min(guarded.read) >= len(history) - len(fit.kept) - 4
    assert len(fit.dropped) == len(history) - len(fit.kept)


# -- check_history and errors -----------------------------------------------------------


def test_check_history_names_each_problem():
    history = [
        AIMessage("hello"),
        SystemMessage("s"),
        ai_calls("a", "b"),
        tool("a"),
        tool("a"),
        HumanMessage("q"),
        tool("z"),
        ChatMessage("c", role="user"),
        AIMessage("", tool_calls=[call("d"), call("d")]),
        tool("d"),
    ]
    assert check_history(history) == [
        "messages[0]: history must start on a HumanMessage, got AIMessage",
        "messages[1]: SystemMessage inside the history",
        (
            "messages[4]: ToolMessage (tool_call_id 'a') answers no open tool call of the "
            "AIMessage before it"
        ),
        "messages[2]: tool call(s) 'b' have no ToolMessage",
        (
            "messages[6]: ToolMessage (tool_call_id 'z') answers no open tool call of the "
            "AIMessage before it"
        ),
        "messages[7]: ChatMessage is not a Human, AI or Tool message",
        "messages[8]: tool call ids missing or repeated",
    ]
    assert check_history([]) == []
    assert check_history([HumanMessage("q"), ai_calls("a"), tool("a"), AIMessage("a")]) == []


def test_check_history_names_index_0_for_a_first_message_that_opens_or_answers_calls():
    start = "messages[0]: history must start on a HumanMessage"
    assert check_history([ai_calls("a")]) == [
        f"{start}, got AIMessage",
        "messages[0]: tool call(s) 'a' have no ToolMessage",
    ]
    assert check_history([tool("a"), HumanMessage("q")]) == [
        f"{start}, got ToolMessage",
        (
            "messages[0]: ToolMessage (tool_call_id 'a') answers no open tool call of the "
            "AIMessage before it"
        ),
    ]
    assert check_history([HumanMessage("q"), ai_calls("a")]) == [
        "messages[1]: tool call(s) 'a' have no ToolMessage"
    ]


def test_views_of_the_same_length_are_equal_only_with_equal_messages():
    first = [HumanMessage("q"), AIMessage("a"), HumanMessage("r")]
    other = [first[0], AIMessage("b"), first[2]]  # the same objects but one
    assert PrefixView is MessagesView
    assert MessagesView(first) != MessagesView(other)
    assert MessagesView(first) != tuple(other)
    assert tuple(other) != MessagesView(first)
    assert PrefixView([*first, AIMessage("x")], 3) != PrefixView([*other, AIMessage("x")], 3)
    assert MessagesView(first, 2) != (HumanMessage("q"), AIMessage("b"))
    assert MessagesView(first).replaced(1, AIMessage("c")) != MessagesView(other)


def test_views_of_equal_messages_are_equal():
    first = [HumanMessage("q"), AIMessage("a"), HumanMessage("r")]
    copies = [m.model_copy() for m in first]
    assert MessagesView(first) == MessagesView(copies) == tuple(copies)
    assert MessagesView(first, 2) == (HumanMessage("q"), AIMessage("a"))
    replaced = (HumanMessage("q"), AIMessage("b"), HumanMessage("r"))
    assert MessagesView(first).replaced(1, AIMessage("b")) == replaced


def test_repair_history_notes_every_removal_oldest_first():
    history = [
        AIMessage("greeting"),
        HumanMessage("q"),
        ai_calls("a", "b"),
        tool("b"),
        tool("a"),
        tool("a", "duplicate"),
        SystemMessage("s"),
        ChatMessage("c", role="user"),
        HumanMessage("q2"),
        ai_calls("pending"),
    ]
    repaired, notes = repair_history(history)
    assert ids(repaired) == ids([*history[1:5], history[8]])
    assert notes == (
        "removed 1 message(s) from index 0 (AIMessage): the history must start on a HumanMessage",
        (
            "removed ToolMessage at index 5 (tool_call_id 'a'): it answers no open tool call of "
            "the AIMessage at index 2"
        ),
        "removed SystemMessage at index 6: no system messages in history",
        "removed ChatMessage at index 7: history holds only Human, AI and Tool messages",
        "removed AIMessage at index 9: its tool call(s) 'pending' have no ToolMessage",
    )


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="max_tokens must be >= 0, got -1"):
        fit_history([], max_tokens=-1, count=count)
    with pytest.raises(
        TypeError, match=r"messages\[1\] must be a langchain-core BaseMessage, got dict"
    ):
        fit_history([HumanMessage("q"), {"role": "user"}], max_tokens=10, count=count)
    with pytest.raises(TypeError, match=r"messages\[0\] must be a langchain-core BaseMessage"):
        repair_history(["hi"])


class RecordingEncoding:
    """Stands in for a tiktoken.Encoding: one token per character, encoded texts recorded."""

    def __init__(self):
        self.encoded = []

    def encode_ordinary(self, text):
        self.encoded.append(text)
        return list(range(len(text)))


def test_next_turn_counts_only_the_new_messages():
    from ctxpolicy.tokens import Tokenizer

    encoding = RecordingEncoding()
    tok = Tokenizer("recording", encoding=encoding)
    history = []
    for i in range(2_000):
        history.append(HumanMessage(f"question {i} " + "x" * 30))
        history.append(AIMessage(f"answer {i} " + "y" * 30))
    first = fit_history(history, max_tokens=600, count=tok.count_message)
    assert 0 < len(first.kept) < 30
    # kept, a leading AI unit dropped to start on Human, the unit that did not fit
    assert len(encoding.encoded) <= len(first.kept) + 2
    encoding.encoded.clear()

    new = [HumanMessage("a new question"), AIMessage("a new answer")]
    second = fit_history(history + new, max_tokens=600, count=tok.count_message)
    assert second.kept[-2:] == tuple(new)
    assert encoding.encoded == ["a new answer", "a new question"]  # newest first


def test_repeated_tool_call_ids_cannot_be_matched_and_are_removed():
    history = [HumanMessage("q"), ai_calls("x", "x"), tool("x"), tool("x"), AIMessage("a")]
    assert "messages[1]: tool call ids missing or repeated" in check_history(history)
    repaired, notes = repair_history(history)
    assert ids(repaired) == ids([history[0], history[4]])
    assert notes == (
        (
            "removed AIMessage at index 1 and its 2 ToolMessage(s): tool call ids missing or "
            "repeated, answers cannot be matched"
        ),
    )
