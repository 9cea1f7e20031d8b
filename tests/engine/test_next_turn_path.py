"""The next turn composed from the last call gives what composing afresh gives.

A conversation's next call (its history with messages appended, everything else equal)
is composed from the last call's walk and layers (`ctxpolicy.next_turn.advance_walk`,
`ctxpolicy.compose._advance_turn`; docs/design.md, 'Budget and overflow'). That path
is an optimisation only: on random sessions of appends (tool units, repairs, converted
dicts), in-place edits, replacements, removals, changed prompts and block values, edited
returned messages, on policies with and without redistribution, merged system messages,
a runtime query and every history overflow rule, the messages, the report and the
composition are the ones a fresh composition (no remembered walk nor frame) makes.
And it must really be taken: a plain conversation takes it on every next turn.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    HumanMessageChunk,
    ToolMessage,
)

import ctxpolicy.compose as compose_module
import ctxpolicy.engine as engine_module
from ctxpolicy.compose import compose_layers
from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import BudgetExceededError, QueryPathError
from ctxpolicy.history import HistoryWalk, TurnWalk
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer

from ..history.test_history import histories


def _policy(*, redistribute: bool, merge: bool, overflow: str, block: bool, window: int) -> Policy:
    order = ["system_prompt", "checkpoint_messages", "query"]
    ratios = {"system_prompt": 0.15, "checkpoint_messages": 0.7, "query": 0.15}
    layers: dict[str, Any] = {"checkpoint_messages": {"overflow": overflow}}
    if block:
        order.insert(1, "notes__context")
        ratios = {k: v - 0.05 for k, v in ratios.items()} | {"notes__context": 0.15}
        layers["notes__context"] = {"role": "system", "overflow": "truncate_tail"}
    return Policy.model_validate(
        {
            "version": 1,
            "name": "next-turn-path",
            "model": {
                "context_window": window,
                "tokenizer": "cl100k_base",
                "system_messages": "merge" if merge else "separate",
            },
            "budget": {"output_reserve": 0.0, "ratios": ratios, "redistribute": redistribute},
            "order": order,
            "layers": layers,
            "processes": {
                "react": {"checkpoint_messages": True, "query": "checkpoint"},
                "ask": {"checkpoint_messages": True, "query": "runtime"},
                "review": {"checkpoint_messages": True, "query": "checkpoint"},
            },
            "default_process": "react",
        }
    )


@contextmanager
def _fresh() -> Iterator[None]:
    """Compose as a fresh process would: no walk nor frame remembered (the ones of the
    session under test are put back afterwards, untouched)."""
    tok = get_tokenizer("cl100k_base")
    walks, frames = tok._walks, tok._frames
    tok._walks, tok._frames = (), ()
    try:
        yield
    finally:
        tok._walks, tok._frames = walks, frames


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except (BudgetExceededError, QueryPathError) as exc:
        return exc


def _same_error(got: Any, expected: Exception) -> None:
    assert type(got) is type(expected)
    assert str(got) == str(expected)


def _same_result(got: Any, expected: Any) -> None:
    if isinstance(expected, Exception):
        _same_error(got, expected)
        return
    assert isinstance(got, ComposeResult)
    assert [type(m) for m in got.messages] == [type(m) for m in expected.messages]
    assert got.messages == expected.messages
    assert got.report == expected.report
    assert got.report.to_dict() == expected.report.to_dict()
    assert got.persist == expected.persist


ACTIONS = st.sampled_from(
    ["append", "append", "append", "append", "edit", "replace", "pop", "same", "prompt", "notes"]
)


def _changed(history: list[Any], action: str, new: list[Any], index: int) -> list[Any]:
    if action == "append" or not history:
        return [*history, *new]
    i = index % len(history)
    if not isinstance(history[i], BaseMessage):  # a dict the view converts: left as it is
        return history
    if action == "edit":  # a content assigned in place
        history[i].content = f"{history[i].content} (edited)"
        return history
    if action == "replace":  # add_messages replacing a message by id: a new object
        copy = history[i].model_copy(update={"content": f"{history[i].content}!"})
        return [*history[:i], copy, *history[i + 1 :]]
    if action == "pop":
        return history[:-1]
    return history


@st.composite
def sessions(draw: Any) -> tuple[list[Any], list[tuple[str, list[Any], int, bool]]]:
    """A first history, then steps: (action, messages it appends, an index, whether the
    caller then edits the returned system message)."""
    first = draw(histories(broken=draw(st.booleans())))
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        action = draw(ACTIONS)
        kind = draw(st.sampled_from(["exchange", "exchange", "random", "dicts"]))
        new: list[Any]
        if kind == "exchange":
            words = draw(st.integers(1, 80))
            new = [HumanMessage("question " + "word " * words), AIMessage("answer " * words)]
        elif kind == "dicts":
            new = [{"role": "user", "content": "a question as a dict"}]
        else:
            new = draw(histories(broken=draw(st.booleans())))
        steps.append((action, new, draw(st.integers(0, 1_000)), draw(st.booleans())))
    return first, steps


def _human(text: str) -> HumanMessage:
    return HumanMessage(text)


@settings(max_examples=150, deadline=None)
@given(
    redistribute=st.booleans(),
    merge=st.booleans(),
    overflow=st.sampled_from(["drop_oldest", "summarize", "error"]),
    block=st.booleans(),
    window=st.sampled_from([300, 800, 3_000]),
    process=st.sampled_from(["react", "react", "ask"]),
    session=sessions(),
)
def test_the_engine_next_turn_gives_what_a_fresh_composition_gives(
    redistribute: bool,
    merge: bool,
    overflow: str,
    block: bool,
    window: int,
    process: str,
    session: Any,
) -> None:
    engine = PolicyEngine(
        _policy(
            redistribute=redistribute, merge=merge, overflow=overflow, block=block, window=window
        )
    )
    first, steps = session
    history: list[Any] = list(first)
    prompt = "You are careful."
    notes = "Some notes."
    counter = itertools.count()
    for action, new, index, edit_returned in [("append", [], 0, False), *steps]:
        history = _changed(history, action, list(new), index)
        if action == "prompt":
            prompt = f"You are careful, turn {next(counter)}."
        if action == "notes":
            notes = f"Other notes {next(counter)}."
        kwargs: dict[str, Any] = {
            "process": process,
            "system_prompt": prompt,
            "checkpoint_messages": history,
        }
        if process == "ask":
            kwargs["query"] = f"runtime question {next(counter)}"
        if block:
            kwargs["contexts"] = {"notes__context": notes}

        def call(kwargs: dict[str, Any] = kwargs) -> Any:
            return _outcome(lambda: engine.compose(**kwargs))

        got, expected = _and_fresh(call)
        _same_result(got, expected)
        if edit_returned and isinstance(got, ComposeResult) and got.messages:
            got.messages[0].content = f"{got.messages[0].content} (changed by the caller)"


@settings(max_examples=100, deadline=None)
@given(
    redistribute=st.booleans(),
    overflow=st.sampled_from(["drop_oldest", "summarize"]),
    request_summary=st.booleans(),
    session=sessions(),
)
def test_compose_layers_next_turn_gives_the_fresh_composition(
    redistribute: bool, overflow: str, request_summary: bool, session: Any
) -> None:
    """The composer's own next turn (`compose_call`): every field of the `Composition`,
    the kept and dropped history and the layer of each message included."""
    plan = PolicyEngine(
        _policy(redistribute=redistribute, merge=False, overflow=overflow, block=True, window=800)
    ).plan()
    first, steps = session
    history: list[Any] = [m for m in first if isinstance(m, BaseMessage)]
    for action, new, index, _ in [("append", [], 0, False), *steps]:
        appended = [m for m in new if isinstance(m, BaseMessage)]
        history = _changed(history, action, appended, index)

        def call(history: list[Any] = history) -> Any:
            return _outcome(
                lambda: compose_layers(
                    plan,
                    system_prompt="prompt",
                    checkpoint_messages=history,
                    contexts={"notes__context": "notes"},
                    request_summary=request_summary,
                )
            )

        got, expected = _and_fresh(call)
        _same_composition(got, expected)
        if isinstance(expected, Exception):
            continue
        assert got.message_layers == expected.message_layers
        assert [id(m) for m in got.kept_history] == [id(m) for m in expected.kept_history]
        assert tuple(got.dropped_history) == tuple(expected.dropped_history)
        assert got.summarize == expected.summarize
        assert got.contexts == expected.contexts


def _plain_engine(**overrides: Any) -> PolicyEngine:
    settings_: dict[str, Any] = {
        "redistribute": False,
        "merge": False,
        "overflow": "drop_oldest",
        "block": False,
        "window": 800,
    }
    settings_.update(overrides)
    return PolicyEngine(_policy(**settings_))


def _taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of `_advance_turn` composed the turn (True) or declined."""
    taken: list[bool] = []
    advance = compose_module._advance_turn

    def recording(*args: Any, **kwargs: Any) -> Any:
        result = advance(*args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(compose_module, "_advance_turn", recording)
    return taken


@pytest.mark.parametrize("redistribute", [False, True])
@pytest.mark.parametrize("block", [False, True])
def test_every_next_turn_of_a_conversation_is_composed_from_the_last_one(
    monkeypatch: pytest.MonkeyPatch, redistribute: bool, block: bool
) -> None:
    """Turns of 2 or 4 messages (some with a tool call), the history dropped from on most:
    each turn after the first is composed from the last call (with redistributed caps,
    each once the caps stop moving: once the history asks for more than it may be given),
    and the tokenizer then holds the conversation's `TurnWalk`."""
    engine = _plain_engine(redistribute=redistribute, block=block)
    taken = _taken(monkeypatch)
    history: list[Any] = [HumanMessage("the first question")]
    contexts = {"notes__context": "notes"} if block else None
    engine.compose(system_prompt="prompt", checkpoint_messages=history, contexts=contexts)
    assert True not in taken  # nothing to take on the first call
    taken.clear()
    for turn in range(40):
        history = [*history, AIMessage(f"answer {turn} " + "word " * (turn % 30))]
        if turn % 3 == 0:
            call = {"name": "search", "args": {"q": str(turn)}, "id": f"call-{turn}"}
            history += [
                AIMessage("", tool_calls=[call]),
                ToolMessage("found", tool_call_id=f"call-{turn}"),
            ]
        history = [*history, _human(f"question {turn} " + "word " * (turn % 20))]
        result = engine.compose(
            system_prompt="prompt", checkpoint_messages=history, contexts=contexts
        )
        assert result.messages[-1] is history[-1]
    if redistribute:  # caps move with the history until it outgrows what it may be given
        moving = taken.index(True)
        assert moving < 30
        assert taken == [False] * moving + [True] * (40 - moving)
    else:
        assert taken == [True] * 40
    assert any(layer.cuts for layer in result.report.layers)  # it dropped from the history
    walks = get_tokenizer("cl100k_base").walks
    assert type(walks[0]) is TurnWalk
    assert walks[0].end == len(history)


@pytest.mark.parametrize(
    ("change", "taken_after"),
    [
        # another frame: no TurnWalk of it (the composer's own next turn declines)
        ("prompt", [False]),
        # the window changed: the engine's next turn declines, then the composer's
        ("edit_old", [False, False]),
        # the returned system message changed: both decline
        ("edit_returned", [False, False]),
        # the same history again: composed from the last call
        ("nothing", [True]),
    ],
)
def test_a_next_turn_after_a_change_is_composed_the_general_way(
    monkeypatch: pytest.MonkeyPatch, change: str, taken_after: list[bool]
) -> None:
    engine = _plain_engine()
    taken = _taken(monkeypatch)
    history: list[Any] = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    first = engine.compose(system_prompt="prompt", checkpoint_messages=history)
    taken.clear()
    prompt = "prompt"
    if change == "prompt":
        prompt = "another prompt"
    elif change == "edit_old":
        history[0].content = "q1, edited"
    elif change == "edit_returned":
        first.messages[0].content = "changed by the caller"
    result = engine.compose(system_prompt=prompt, checkpoint_messages=history)
    assert taken == taken_after
    with _fresh():
        expected = engine.compose(system_prompt=prompt, checkpoint_messages=history)
    _same_result(result, expected)


def test_a_turn_walk_holds_a_history_walk_s_fields_first_in_its_order() -> None:
    """`fit_history` reads a `TurnWalk` as the `HistoryWalk` it stands for (a named tuple
    cannot subclass the dataclass: the fields are written twice, and held equal here)."""
    walk_fields = tuple(field.name for field in dataclasses.fields(HistoryWalk))
    assert TurnWalk._fields[: len(walk_fields)] == walk_fields


def test_agents_that_take_turns_each_compose_their_next_turn_before_any_other_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two processes of one engine (two plans: two frames in the tokenizer) composing in
    turn, each on its own conversation: every next turn of each is composed by the plain
    path's first step (`compose_next_turn`), never by `compose_call`."""
    engine = _plain_engine()
    histories_ = {"react": [HumanMessage("q react")], "review": [HumanMessage("q review")]}
    for process, history in histories_.items():
        engine.compose(process=process, system_prompt="prompt", checkpoint_messages=history)
    composed: list[str] = []
    compose_call = engine_module.compose_call

    def recording(*args: Any, **kwargs: Any) -> Any:
        composed.append("compose_call")
        return compose_call(*args, **kwargs)

    monkeypatch.setattr(engine_module, "compose_call", recording)
    for turn in range(6):
        for process, history in histories_.items():
            history += [AIMessage(f"a{turn}"), HumanMessage(f"{process} q{turn}")]
            result = engine.compose(
                process=process, system_prompt="prompt", checkpoint_messages=history
            )
            assert result.messages[-1] is history[-1]
    assert composed == []


def _plan(**overrides: Any) -> Any:
    return _plain_engine(**overrides).plan()


def _and_fresh(call: Callable[[], Any]) -> tuple[Any, Any]:
    """What ``call`` returns now, and what it returns with no walk or frame remembered."""
    got = call()
    with _fresh():
        expected = call()
    return got, expected


def _compose_twice(
    plan: Any, first: list[Any], appended: list[Any], **kwargs: Any
) -> tuple[Any, Any]:
    """The composer's next turn of ``first`` + ``appended``, and a fresh one."""
    compose_layers(plan, system_prompt="prompt", checkpoint_messages=first, **kwargs)
    history = [*first, *appended]

    def call() -> Any:
        return _outcome(
            lambda: compose_layers(
                plan, system_prompt="prompt", checkpoint_messages=history, **kwargs
            )
        )

    return _and_fresh(call)


def _same_composition(got: Any, expected: Any) -> None:
    if isinstance(expected, Exception):
        _same_error(got, expected)
        return
    assert got.messages == expected.messages
    assert got.report == expected.report
    assert got.report.to_dict() == expected.report.to_dict()


def _exchanges(count: int, words: int) -> list[Any]:
    return [
        m
        for i in range(count)
        for m in (HumanMessage(f"q{i} " + "word " * words), AIMessage(f"a{i} " + "word " * words))
    ]


TOOL_CALL = {"name": "search", "args": {"q": "x"}, "id": "call-x"}


@pytest.mark.parametrize(
    ("case", "kwargs", "appended"),
    [
        # room left: the new messages fit without dropping anything
        ("slack", {}, [HumanMessage("short")]),
        # an AI message with a tool call and its result, then the input
        (
            "tool unit",
            {},
            [
                AIMessage("", tool_calls=[TOOL_CALL]),
                ToolMessage("found", tool_call_id="call-x"),
                HumanMessage("next"),
            ],
        ),
        # older units dropped; the kept part starts on the AI answer, which is dropped too
        ("dropped", {}, _exchanges(3, 40)),
        # overflow summarize, no summary requested: drops like drop_oldest
        ("summarize", {"overflow": "summarize"}, _exchanges(3, 40)),
    ],
)
def test_the_composer_takes_the_next_turn_from_the_last_call(
    monkeypatch: pytest.MonkeyPatch, case: str, kwargs: dict[str, Any], appended: list[Any]
) -> None:
    taken = _taken(monkeypatch)
    plan = _plan(**kwargs)
    first = [*_exchanges(2, 20), HumanMessage("the input")]
    got, expected = _compose_twice(plan, first, appended, request_summary=False)
    assert taken[-2:] == [True, False], case  # the next turn, then the fresh call
    _same_composition(got, expected)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"merge": True, "block": True},  # a merged system message is made on every call
        {"overflow": "error"},
    ],
)
def test_plans_whose_turns_the_next_turn_cannot_reproduce_never_take_it(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any]
) -> None:
    taken = _taken(monkeypatch)
    plan = _plan(**kwargs)
    contexts = {"notes__context": "notes"} if kwargs.get("block") else None
    history: list[Any] = [HumanMessage("q1")]
    for turn in range(3):
        compose_layers(plan, system_prompt="p", checkpoint_messages=history, contexts=contexts)
        history = [*history, AIMessage(f"a{turn}"), HumanMessage(f"q{turn + 2}")]
    assert True not in taken


def test_a_summary_to_request_is_never_composed_from_the_last_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = _taken(monkeypatch)
    plan = _plan(overflow="summarize")
    first = [*_exchanges(2, 20), HumanMessage("the input")]
    got, expected = _compose_twice(plan, first, _exchanges(6, 40), request_summary=True)
    assert True not in taken
    assert got.summarize is not None
    assert got.summarize == expected.summarize


def test_an_appended_answer_that_pushes_the_input_out_raises_as_a_fresh_call() -> None:
    """The input (the newest HumanMessage) and what follows must fit: an appended AI
    answer that leaves only itself in the cap raises, whichever way the turn is made."""
    plan = _plan(window=400)
    first = [HumanMessage("q " + "word " * 100)]
    appended = [AIMessage("a " + "word " * 200)]
    got, expected = _compose_twice(plan, first, appended)
    assert isinstance(expected, BudgetExceededError)
    _same_composition(got, expected)
    # the engine's plain path, whose input is the newest HumanMessage of the history
    engine = _plain_engine(window=400)
    engine.compose(system_prompt="prompt", checkpoint_messages=first)
    history = [*first, *appended]
    raised = _outcome(lambda: engine.compose(system_prompt="prompt", checkpoint_messages=history))
    with _fresh():
        fresh = _outcome(
            lambda: engine.compose(system_prompt="prompt", checkpoint_messages=history)
        )
    _same_result(raised, fresh)
    assert isinstance(raised, BudgetExceededError)


def test_the_engine_next_turn_keeps_the_input_not_a_human_message_of_another_type() -> None:
    """The engine's next turn checks that the kept part holds the input (the newest message
    of type 'human'), not only that it starts on a HumanMessage: a `HumanMessageChunk`
    appended after the input is one, and when it alone fills the cap the input does not
    fit and the call raises, as a fresh call does (it composed the chunk alone before)."""
    engine = _plain_engine()
    first = [HumanMessage("the input" + " word" * 96)]
    engine.compose(system_prompt="prompt", checkpoint_messages=first)
    history = [
        *first,
        AIMessage("an answer" + " word" * 96),
        HumanMessageChunk(content="chunk" + " word" * 396),
    ]
    got = _outcome(lambda: engine.compose(system_prompt="prompt", checkpoint_messages=history))
    with _fresh():
        fresh = _outcome(
            lambda: engine.compose(system_prompt="prompt", checkpoint_messages=history)
        )
    assert isinstance(fresh, BudgetExceededError)
    _same_result(got, fresh)


def test_the_dropped_part_is_counted_whole_when_it_is_short() -> None:
    """One old message dropped: its tokens are in the report's cut, as a fresh call has."""
    plan = _plan(window=400)
    first = [HumanMessage("q0 " + "word " * 30), AIMessage("a0"), HumanMessage("q1")]
    got, expected = _compose_twice(plan, first, [AIMessage("a1 " + "word " * 250)])
    _same_composition(got, expected)
    (cut,) = got.report.layer("checkpoint_messages").cuts
    assert cut.messages == 2
    assert cut.tokens is not None


def test_a_walk_left_for_the_next_turn_serves_the_general_fit_after_a_change() -> None:
    """A new system prompt (another frame: the next turn declines) that leaves the
    history more room: the general fit reuses the conversation's `TurnWalk` as a walk and
    walks older messages than the last call kept, as a fresh call does."""
    plan = _plan(window=1_200, redistribute=True)
    history = [*_exchanges(30, 30), HumanMessage("the input")]
    before = compose_layers(plan, system_prompt="a long prompt " * 60, checkpoint_messages=history)
    assert type(get_tokenizer("cl100k_base").walks[0]) is TurnWalk

    def call() -> Any:
        return compose_layers(plan, system_prompt="short", checkpoint_messages=history)

    got, expected = _and_fresh(call)
    _same_composition(got, expected)
    assert len(before.dropped_history) > len(got.dropped_history) > 0


@pytest.mark.parametrize(
    "appended",
    [
        # a tool unit that alone exceeds the history's cap: nothing of it is kept
        [
            AIMessage("", tool_calls=[TOOL_CALL]),
            ToolMessage("found " + "word " * 400, tool_call_id="call-x"),
            HumanMessage("next"),
        ],
        # an answer whose tool call has no result yet: removed, as a fresh fit removes it
        [HumanMessage("next"), AIMessage("", tool_calls=[TOOL_CALL])],
    ],
    ids=["tool unit over the cap", "unanswered tool call"],
)
def test_appended_tool_calls_give_what_a_fresh_composition_gives(appended: list[Any]) -> None:
    plan = _plan(window=400)
    first = [*_exchanges(2, 10), HumanMessage("the input")]
    got, expected = _compose_twice(plan, first, appended)
    _same_composition(got, expected)
