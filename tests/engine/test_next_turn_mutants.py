"""Where the next turn's fast path is taken, and what it returns: cases found by mutation
testing.

A conversation's next turn is composed from its last call (`ctxpolicy.compose._advance_turn`,
`ctxpolicy.next_turn.advance_walk`) when that gives what composing afresh gives. Each
test here pins a case the mutants of that path (docs/mutation.md) showed unpinned: an
ordinary next turn that must be taken (speed is a feature: a plain answer is read without
the parser, a part that fills the cap exactly, small turns after the walk stopped at a
unit, a history that does not fit at all under a runtime query), a result that must be the
fresh one (an input pushed out, a view shorter than its list, a repair in the new part, an
edit to the unit the walk stopped at, a walk served to the general fit), the walk
`advance_walk` returns (the one `fit_history` makes from the same last walk), and the
engine's plain path declining frames of other inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
)

import ctxpolicy.compose as compose_module
import ctxpolicy.next_turn as next_turn_module
from ctxpolicy.compose import compose_layers, compose_next_turn
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import QueryPathError
from ctxpolicy.history import MessagesView, TurnWalk, fit_history
from ctxpolicy.loading.loader import resolve_policy
from ctxpolicy.next_turn import advance_walk
from ctxpolicy.report import NO_EXTRAS
from ctxpolicy.tokens import get_tokenizer

from .test_issue14_new_user import CACHE_POLICY
from .test_next_turn_path import (
    TOOL_CALL,
    _and_fresh,
    _compose_twice,
    _exchanges,
    _fresh,
    _outcome,
    _plain_engine,
    _plan,
    _same_composition,
    _same_result,
    _taken,
)

TOKENIZER = get_tokenizer("cl100k_base")
#: the history's cap of the plain policy (`_plain_engine`: window 800, ratio 0.7)
CAP = 560


def _sized(kind: type[BaseMessage], tokens: int, name: str) -> Any:
    """A message of class ``kind`` that counts exactly ``tokens`` (" word" is one token)."""
    base = TOKENIZER.count_message(kind(content=name))
    message = kind(content=name + " word" * (tokens - base))
    assert TOKENIZER.count_message(message) == tokens
    return message


def _turn_walk() -> TurnWalk:
    walk = TOKENIZER.walks[0]
    assert type(walk) is TurnWalk
    return walk


def _next(plan: Any, history: list[Any], taken: list[bool], **kwargs: Any) -> bool:
    """Compose ``history`` as the conversation's next turn; whether the path was taken
    (the result checked against a fresh composition)."""
    taken.clear()

    def call() -> Any:
        return _outcome(
            lambda: compose_layers(
                plan, system_prompt="prompt", checkpoint_messages=history, **kwargs
            )
        )

    got = call()
    was_taken = taken == [True]
    with _fresh():
        expected = call()
    _same_composition(got, expected)
    if not isinstance(expected, Exception):
        assert got.kept_history == expected.kept_history
        assert tuple(got.dropped_history) == tuple(expected.dropped_history)
    return was_taken


# ----------------------------------------------------------------------- the new part


def test_a_plain_answer_and_question_appended_are_read_without_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A HumanMessage and an AIMessage without tool calls are each a unit of their own:
    the next turn reads them itself, never through the walk's parser (`_walk_units`)."""
    taken = _taken(monkeypatch)
    parsed: list[int] = []
    walk_units = next_turn_module._walk_units

    def recording(*args: Any, **kwargs: Any) -> Any:
        parsed.append(1)
        return walk_units(*args, **kwargs)

    monkeypatch.setattr(next_turn_module, "_walk_units", recording)
    plan = _plan()
    first = [*_exchanges(2, 20), HumanMessage("the input")]
    got, expected = _compose_twice(plan, first, [AIMessage("an answer"), HumanMessage("next")])
    assert taken[-2:] == [True, False]
    assert parsed == []
    _same_composition(got, expected)


@pytest.mark.parametrize(
    "appended",
    [
        [AIMessage("", tool_calls=[TOOL_CALL])],
        [ToolMessage("found", tool_call_id="call-x")],
        [ToolMessage("found", tool_call_id="call-x"), HumanMessage("next")],
        [SystemMessage("a system message"), HumanMessage("next")],
    ],
    ids=["unanswered call alone", "orphan result alone", "orphan result first", "system first"],
)
def test_a_new_part_that_needs_a_repair_gives_the_fresh_result(appended: list[Any]) -> None:
    """Messages a fresh fit removes (an unanswered tool call, a result answering nothing,
    a SystemMessage), alone or first in the appended part, are removed as it removes them:
    never kept as units of their own."""
    plan = _plan()
    first = [*_exchanges(2, 10), HumanMessage("the input")]
    got, expected = _compose_twice(plan, first, appended)
    _same_composition(got, expected)
    assert got.kept_history == expected.kept_history


def test_an_appended_part_that_fills_the_cap_exactly_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """New messages whose tokens are exactly the history's cap fit: the next turn is
    composed from the last call (every older unit dropped)."""
    taken = _taken(monkeypatch)
    plan = _plan()
    first = [HumanMessage("the first question")]
    appended = [_sized(AIMessage, 300, "answer"), _sized(HumanMessage, CAP - 300, "next")]
    got, expected = _compose_twice(plan, first, appended)
    assert taken[-2:] == [True, False]
    _same_composition(got, expected)
    assert got.report.layer("checkpoint_messages").tokens == CAP - 300


def test_an_appended_input_over_the_cap_raises_as_a_fresh_call() -> None:
    """One new HumanMessage larger than the history's cap (but not than the window): the
    input does not fit, so the call raises, whichever way the turn is made."""
    plan = _plan()
    first = [*_exchanges(1, 10), HumanMessage("the input")]
    got, expected = _compose_twice(plan, first, [_sized(HumanMessage, CAP + 40, "huge")])
    assert isinstance(expected, Exception)
    _same_composition(got, expected)


def test_a_view_shorter_than_its_list_is_advanced_over_its_own_messages() -> None:
    """A history given as a `MessagesView` that stops before its list's end: a next turn
    whose new part holds a tool call reads only the messages the view shows."""
    plan = _plan()
    items: list[Any] = [
        *_exchanges(1, 10),
        HumanMessage("the input"),
        AIMessage("", tool_calls=[TOOL_CALL]),
        ToolMessage("found", tool_call_id="call-x"),
        HumanMessage("next"),
        AIMessage("not shown " + "word " * 50),
        HumanMessage("not shown either"),
    ]
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=MessagesView(items, 3))
    view = MessagesView(items, 6)

    def call() -> Any:
        return compose_layers(plan, system_prompt="prompt", checkpoint_messages=view)

    got, expected = _and_fresh(call)
    _same_composition(got, expected)
    assert got.kept_history[-1] is items[5]


# ------------------------------------------------------------- the unit the walk stopped at


def _stopped_history() -> list[Any]:
    """A history whose oldest unit (300 tokens) does not fit beside the newer ones (300):
    the walk stops at it, leaving 260 tokens of the cap (560) free."""
    return [
        _sized(HumanMessage, 300, "the oldest question"),
        _sized(HumanMessage, 100, "a question"),
        _sized(AIMessage, 100, "an answer"),
        _sized(HumanMessage, 100, "the input"),
    ]


def test_small_turns_after_the_walk_stopped_at_a_unit_are_each_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turns that fit in the room the unit the walk stopped at left (nothing more is
    dropped) are composed from the last call, after a general composition and after a
    next turn that dropped older units alike."""
    taken = _taken(monkeypatch)
    plan = _plan()
    history = _stopped_history()
    assert not _next(plan, history, taken)  # the first call: composed the general way
    steps = [
        [_sized(AIMessage, 5, "ok")],  # after the general composition's walk
        [_sized(HumanMessage, 5, "and?")],  # after a next turn's walk
        [_sized(AIMessage, 280, "a long answer")],  # drops the oldest kept unit
        [_sized(HumanMessage, 5, "thanks")],  # after a walk that dropped
    ]
    for appended in steps:
        history = [*history, *appended]
        assert _next(plan, history, taken)
    assert _turn_walk().over is not None


def test_an_edit_to_the_unit_the_walk_stopped_at_is_seen_on_a_later_turn() -> None:
    """The unit the walk stopped at is part of the window the next turns check: once
    its message is shortened in place, it fits, and the next turn keeps it as a fresh
    composition does."""
    plan = _plan()
    history = _stopped_history()
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    history = [*history, _sized(AIMessage, 5, "ok")]
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    history[0].content = "the oldest question, shortened"
    history = [*history, _sized(HumanMessage, 5, "and?")]

    def call() -> Any:
        return compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)

    got, expected = _and_fresh(call)
    _same_composition(got, expected)
    assert got.kept_history[0] is history[0]


def test_a_walk_a_next_turn_advanced_serves_the_general_fit_after_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A next turn that dropped older units, then a shorter system prompt (another frame,
    more room for the history): the general fit reuses the advanced walk and walks the
    older units it now has room for, as a fresh call does."""
    taken = _taken(monkeypatch)
    plan = _plan(window=1_200, redistribute=True)
    history = [*_exchanges(30, 30), HumanMessage("the input")]
    long_prompt = "a long prompt " * 60
    compose_layers(plan, system_prompt=long_prompt, checkpoint_messages=history)
    history = [*history, AIMessage("an answer " + "word " * 40), HumanMessage("next")]
    taken.clear()
    before = compose_layers(plan, system_prompt=long_prompt, checkpoint_messages=history)
    assert taken == [True]

    def call() -> Any:
        return compose_layers(plan, system_prompt="short", checkpoint_messages=history)

    got, expected = _and_fresh(call)
    _same_composition(got, expected)
    assert len(before.dropped_history) > len(got.dropped_history) > 0


# ----------------------------------------------------------------- advance_walk's walk


def _same_walk(previous: TurnWalk, history: Sequence[Any], max_tokens: int) -> None:
    """`advance_walk` gives the walk and the kept part `fit_history` makes of ``history``
    from the same last walk (running sums compared by their steps: the offset is free)."""
    advanced = advance_walk(
        previous,
        history,
        len(history),
        max_tokens=max_tokens,
        count=TOKENIZER.count_message,
        layers=previous.layers,
    )
    assert advanced is not None
    walk, part = advanced
    fit = fit_history(
        history, max_tokens=max_tokens, count=TOKENIZER.count_message, previous=previous
    )
    fitted = fit.walk
    assert fitted is not None
    assert walk.window == fitted.window
    assert walk.contents == fitted.contents
    assert walk.units == fitted.units
    steps = [b - a for a, b in pairwise(walk.prefix)]
    assert steps == [b - a for a, b in pairwise(fitted.prefix)]
    assert (walk.over, walk.start, walk.cut, walk.end) == (
        fitted.over,
        fitted.start,
        fitted.cut,
        fitted.end,
    )
    assert walk.reached_start is fitted.reached_start
    assert walk.frame is previous.frame
    assert walk.layers is previous.layers
    assert part.cut == len(fit.dropped)
    assert part.tokens == fit.tokens
    assert fit.repairs == ((part.note,) if part.note else ())
    assert part.dropped_counts == fit.dropped_counts


def test_advance_walk_gives_the_walk_fit_history_makes_from_the_same_last_walk() -> None:
    """Small turns after the walk stopped, a turn that drops older units, a tool unit, the
    same history again: each walk advanced is the walk a reused fit records, with the same
    kept part (where it starts, its tokens, the note, the counts before it)."""
    plan = _plan()
    history = _stopped_history()
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    steps: list[list[Any]] = [
        [_sized(AIMessage, 5, "ok")],
        [_sized(HumanMessage, 5, "and?")],
        [_sized(AIMessage, 280, "a long answer")],
        [_sized(HumanMessage, 5, "thanks")],
        [
            AIMessage("", tool_calls=[TOOL_CALL]),
            ToolMessage("found", tool_call_id="call-x"),
            HumanMessage("next"),
        ],
        [],
    ]
    for appended in steps:
        history = [*history, *appended]
        _same_walk(_turn_walk(), history, CAP)
        compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)


def test_advance_walk_declines_a_budget_grown_past_the_unit_it_stopped_at() -> None:
    """The unit the last walk stopped at fits a larger budget exactly: `advance_walk`
    returns None (a fresh fit walks it and what is older), also for a walk advanced
    already, whose running sums do not start at 0."""
    plan = _plan()
    history = _stopped_history()
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    history = [*history, _sized(AIMessage, 280, "a long answer")]  # drops a unit
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    previous = _turn_walk()
    assert previous.over is not None
    assert previous.prefix[0] > 0
    appended = _sized(HumanMessage, 5, "thanks")
    history = [*history, appended]
    # left for the unit it stopped at: exactly its tokens
    grown = previous.over[3] + 5 + previous.prefix[-1] - previous.prefix[0]
    count = TOKENIZER.count_message
    advanced = advance_walk(
        previous, history, len(history), max_tokens=grown, count=count, layers=None
    )
    assert advanced is None
    fit = fit_history(history, max_tokens=grown, count=count, previous=previous)
    assert previous.over[1][0] in fit.kept


# ----------------------------------------------------------------- what a turn must keep


def test_a_runtime_query_turn_whose_history_does_not_fit_at_all_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a runtime query, a history whose newest unit alone exceeds its cap keeps
    nothing, and that is a result: the same history again, then a short answer appended,
    are composed from the last call (the walk holds no unit)."""
    taken = _taken(monkeypatch)
    plan = _plain_engine(redistribute=True).plan("ask")
    query = "the runtime question"
    history: list[Any] = [_sized(HumanMessage, 900, "a huge question")]
    assert not _next(plan, history, taken, query=query)
    walk = _turn_walk()
    assert walk.units == ()
    composed = compose_layers(
        plan, system_prompt="prompt", checkpoint_messages=history, query=query
    )
    cap = composed.report.layer("checkpoint_messages").cap
    assert cap is not None
    _same_walk(walk, history, cap)
    assert _next(plan, history, taken, query=query)  # the same history again
    history = [*history, AIMessage("a short answer")]
    assert _next(plan, history, taken, query=query)


def test_a_human_message_the_input_is_not_pushes_it_out_as_on_a_fresh_call() -> None:
    """The input of a ``query: checkpoint`` call is its newest message of type 'human'; a
    `HumanMessageChunk` (a HumanMessage of another type) after it is kept as the start of
    the history but is not the input: the input does not fit, and the call raises."""
    plan = _plan()
    first = [_sized(HumanMessage, 100, "the input")]
    appended = [_sized(AIMessage, 100, "an answer"), _sized(HumanMessageChunk, 400, "a chunk")]
    got, expected = _compose_twice(plan, first, appended)
    assert isinstance(expected, Exception)
    _same_composition(got, expected)


def test_each_conversation_keeps_one_walk_so_the_others_keep_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A next turn's walk replaces its conversation's last one: a conversation that takes
    many turns pushes no other conversation's walk out of the tokenizer."""
    taken = _taken(monkeypatch)
    plan = _plan()
    other: list[Any] = [HumanMessage("the other conversation's question")]
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=other)
    history: list[Any] = [HumanMessage("a question")]
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    for turn in range(10):
        history = [*history, AIMessage(f"answer {turn}"), HumanMessage(f"question {turn}")]
        compose_layers(plan, system_prompt="prompt", checkpoint_messages=history)
    taken.clear()
    other = [*other, AIMessage("an answer"), HumanMessage("a next question")]
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=other)
    assert taken == [True]


# ------------------------------------------------------ the engine's plain next turn


def test_compose_next_turn_gives_the_dropped_part_as_the_caller_names_it() -> None:
    """`compose_next_turn`'s dropped part is a view of the caller's list that converts an
    item that is no message (a dict), as the engine's own view of the history does."""
    engine = _plain_engine()
    history: list[Any] = [
        {"role": "user", "content": "an old question as a dict"},
        AIMessage("an old answer"),
        _sized(HumanMessage, 300, "a question"),
        _sized(AIMessage, 100, "an answer"),
        _sized(HumanMessage, 200, "the input"),
    ]
    engine.compose(system_prompt="prompt", checkpoint_messages=history)
    history = [*history, AIMessage("ok"), HumanMessage("next")]
    turn = compose_next_turn(
        engine.plan(),
        system_prompt="prompt",
        history=history,
        argument="checkpoint_messages",
        notes={},
        extras=NO_EXTRAS,
    )
    assert turn is not None
    assert len(turn.dropped) == 4
    converted = turn.dropped[0]
    assert isinstance(converted, HumanMessage)
    assert converted.content == "an old question as a dict"


@pytest.mark.parametrize(
    "frame_kwargs",
    [
        {"contexts": {"notes__context": "notes"}, "sources": {}},
        {"sources": {}, "reserved": {"notes__context"}},
    ],
    ids=["other values", "a reserved layer"],
)
def test_the_engine_next_turn_declines_a_frame_made_for_other_inputs(
    frame_kwargs: dict[str, Any],
) -> None:
    """The plan's frame was made by a call with block values or a reserved layer (the
    composer's own, `compose_layers`): an engine call with neither composes its turn the
    general way, never from that frame's layers."""
    engine = _plain_engine(block=True)
    history: list[Any] = [*_exchanges(2, 10), HumanMessage("the input")]
    compose_layers(
        engine.plan(), system_prompt="prompt", checkpoint_messages=history, **frame_kwargs
    )
    history = [*history, AIMessage("an answer"), HumanMessage("next")]

    def call() -> Any:
        return engine.compose(system_prompt="prompt", checkpoint_messages=history)

    got, expected = _and_fresh(call)
    _same_result(got, expected)


def test_the_engine_next_turn_report_keeps_what_the_process_says_beyond_the_composition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report of a next turn composed from the last call carries the process's own
    extras as a fresh composition's does: here the warning that ``summarize`` falls back to
    ``drop_oldest`` (the process has no compression layer)."""
    taken = _taken(monkeypatch)
    engine = _plain_engine(overflow="summarize")
    history: list[Any] = [
        HumanMessage("q" + " word" * 300),
        AIMessage("a" + " word" * 300),
        HumanMessage("q2"),
    ]
    first = engine.compose(system_prompt="prompt", checkpoint_messages=history)
    (warning,) = first.report.warnings
    assert "fell back to drop_oldest" in warning
    history = [*history, AIMessage("a2"), HumanMessage("q3" + " word" * 300)]
    taken.clear()
    got = engine.compose(system_prompt="prompt", checkpoint_messages=history)
    assert taken == [True]
    assert got.report.warnings == (warning,)
    with _fresh():
        fresh = engine.compose(system_prompt="prompt", checkpoint_messages=history)
    _same_result(got, fresh)


def test_a_next_turn_works_out_its_history_report_only_when_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The history's tally of a next turn (its demand, cut and notes) is made when its
    report is first read, once; the report is then the one of its call, though the caller
    appended to its list in place since (the dropped part it counts is the list's prefix)."""
    taken = _taken(monkeypatch)
    made: list[object] = []
    make = compose_module._history_tally

    def recording(draft: Any) -> Any:
        made.append(draft)
        return make(draft)

    monkeypatch.setattr(compose_module, "_history_tally", recording)
    engine = _plain_engine()
    history: list[Any] = [*_exchanges(12, 40), HumanMessage("the input")]
    engine.compose(system_prompt="prompt", checkpoint_messages=history)
    history.extend([AIMessage("an answer" + " word" * 40), HumanMessage("next")])
    as_called = list(history)
    taken.clear()
    got = engine.compose(system_prompt="prompt", checkpoint_messages=history)
    assert taken == [True]
    assert made == []
    history.extend([AIMessage("a later answer"), HumanMessage("a later question")])
    report = got.report.layers.named("checkpoint_messages")
    assert len(made) == 1
    assert report.cuts and report.cuts[0].action == "dropped_oldest"
    assert got.report.layers.named("checkpoint_messages") is report
    assert len(made) == 1
    with _fresh():
        fresh = engine.compose(system_prompt="prompt", checkpoint_messages=as_called)
    _same_result(got, fresh)


class _EqualToThePrompt:
    """Not a string, yet equal to the prompt the frame was made with."""

    def __eq__(self, other: object) -> bool:
        return other == "prompt"

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"system_prompt": 5}, TypeError),
        ({"system_prompt": _EqualToThePrompt()}, TypeError),
        ({"system_prompt": "prompt", "query": 5}, TypeError),
        ({"system_prompt": "prompt", "query": "a runtime query"}, QueryPathError),
    ],
    ids=["a number", "an object equal to the prompt", "a query not a string", "a query"],
)
def test_the_engine_next_turn_takes_no_argument_a_fresh_call_refuses(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """The engine tries a next turn before it checks its arguments: a next turn that
    would otherwise be taken declines a system prompt that is not a string (even one equal
    to the frame's) and any query, which then raise as on a fresh call."""
    taken = _taken(monkeypatch)
    engine = _plain_engine()
    history: list[Any] = [*_exchanges(2, 10), HumanMessage("the input")]
    engine.compose(system_prompt="prompt", checkpoint_messages=history)
    history = [*history, AIMessage("an answer"), HumanMessage("next")]
    taken.clear()
    with pytest.raises(error) as raised:
        engine.compose(checkpoint_messages=history, **kwargs)
    assert not any(taken)
    with _fresh(), pytest.raises(error) as fresh:
        engine.compose(checkpoint_messages=history, **kwargs)
    assert str(raised.value) == str(fresh.value)
    taken.clear()
    engine.compose(system_prompt="prompt", checkpoint_messages=history)
    assert taken == [True]


@pytest.mark.parametrize("stopped_at_a_tool_unit", [True, False])
def test_the_history_report_of_a_next_turn_is_a_fresh_calls(
    monkeypatch: pytest.MonkeyPatch, stopped_at_a_tool_unit: bool
) -> None:
    """The history's report of a next turn, read: its demand and cut as a fresh call's when
    the walk stopped at a tool unit (whose messages the walk has no single count for, so
    the dropped part is counted from the messages), and its demand when the whole history
    is kept (what it uses)."""
    taken = _taken(monkeypatch)
    engine = _plain_engine()
    history: list[Any] = [
        _sized(HumanMessage, 40, "an old question"),
        AIMessage("", tool_calls=[TOOL_CALL]),
        ToolMessage(" word" * 300, tool_call_id=TOOL_CALL["id"]),
        _sized(HumanMessage, 100, "a question"),
        _sized(AIMessage, 100, "an answer"),
        _sized(HumanMessage, 100, "the input"),
    ]
    if not stopped_at_a_tool_unit:
        history = history[3:]
    engine.compose(system_prompt="prompt", checkpoint_messages=history)
    history = [*history, _sized(AIMessage, 20, "ok"), _sized(HumanMessage, 20, "next")]
    taken.clear()
    got, fresh = _and_fresh(
        lambda: engine.compose(system_prompt="prompt", checkpoint_messages=history)
    )
    assert taken[0] is True  # the fresh call after it declines: no walk remembered
    report = got.report.layers.named("checkpoint_messages")
    if stopped_at_a_tool_unit:
        assert report.cuts[0].messages == 3
    else:
        assert (report.cuts, report.demand) == ((), report.tokens)
    _same_result(got, fresh)


def test_a_next_turns_tallies_are_a_mapping_of_every_included_layer() -> None:
    """`_TurnTallies` reads as the mapping the general path gives `build_report`: the
    other layers' tallies, then the history's."""
    engine = _plain_engine(block=True)
    history: list[Any] = [*_exchanges(2, 10), HumanMessage("the input")]
    engine.compose(system_prompt="prompt", checkpoint_messages=history)
    walk = _turn_walk()
    draft = compose_module._HistoryDraft(
        TOKENIZER, engine.plan().get("checkpoint_messages"), (), None, 0, CAP, history
    )
    tallies = compose_module._TurnTallies(walk.layers.tallies, "checkpoint_messages", draft)
    assert list(tallies) == [*walk.layers.tallies, "checkpoint_messages"]
    assert len(tallies) == len(walk.layers.tallies) + 1
    assert all(tallies[name] is tally for name, tally in walk.layers.tallies.items())


def test_a_next_turn_report_carries_the_plans_warnings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plan with a warning of its own (a per-query layer ordered before stable ones):
    the next turn, composed from the last call, reports it as a fresh composition does
    (the warnings are carried from the last call, `_TurnLayers.warnings`)."""
    file = tmp_path / "cachy.yaml"
    file.write_text(CACHE_POLICY.replace("order:", "budget: {redistribute: false}\norder:", 1))
    loaded = resolve_policy(file)
    assert loaded.policy is not None
    plan = PolicyEngine(loaded.policy).plan()
    assert any("prompt-cache" in w for w in plan.warnings)
    taken = _taken(monkeypatch)
    contexts = {"knowledge__context": "the facts", "todo__context": "the list"}
    got, expected = _compose_twice(
        plan,
        [*_exchanges(40, 60), HumanMessage("q")],
        [AIMessage("a"), HumanMessage("q2")],
        contexts=contexts,
    )
    assert taken[:2] == [False, True]  # the second call takes the first one's walk
    assert got.report.warnings == plan.warnings
    _same_composition(got, expected)


def test_a_next_turn_reports_the_skips_and_block_cuts_a_fresh_call_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block layer cut to its cap and a collector skipped (``on_error: skip``, no
    service): the next turn, composed from the last call, has the fresh composition's
    ``report.warnings``, each of them a layer's event (`ComposeReport.layer_events`)."""
    policy = _plain_engine(block=True).policy
    data = policy.model_dump(mode="json", exclude_none=True)
    data["order"].insert(1, "knowledge__context")
    data["budget"]["ratios"]["knowledge__context"] = 0.05
    data["budget"]["ratios"]["checkpoint_messages"] -= 0.05
    data["layers"]["knowledge__context"] = {
        "role": "system",
        "collector": {"type": "retriever", "service": "kb", "on_error": "skip"},
    }
    engine = PolicyEngine(type(policy).model_validate(data))
    contexts = {"notes__context": "笔记 note " * 200}  # over its cap: truncated
    taken = _taken(monkeypatch)
    history: list[Any] = [*_exchanges(2, 10), HumanMessage("q 问题")]

    def call() -> Any:
        return engine.compose(
            system_prompt="prompt", checkpoint_messages=history, contexts=contexts
        )

    first = call()
    assert first.report.layer_events == 2, first.report.warnings
    history = [*history, AIMessage("a 回答"), HumanMessage("q2 问题")]
    taken.clear()
    got, fresh = _and_fresh(call)
    assert taken[0] is True  # the next turn was composed from the last call
    assert got.report.warnings == fresh.report.warnings == first.report.warnings
    assert got.report.layer_events == fresh.report.layer_events == 2
    _same_result(got, fresh)
