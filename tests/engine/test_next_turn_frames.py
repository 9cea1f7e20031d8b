"""The next turn takes the other layers as the last call made them (docs/design.md, "The
next turn costs what is new").

A composition's layers but the history depend only on the plan, the system prompt, the
runtime query, the block values and their sources: the tokenizer remembers what the last
call of each plan made of them (a frame, `Tokenizer.frames`), and a call with the same
ones takes it and composes only its history. A plain process (no collector, recall,
summary, curation, query reference nor kept memory) called with nothing but its system
prompt, query and history skips the preparation steps that have nothing to do
(`PolicyEngine._compose_plain`). Both are optimisations only: the messages and the report
are the ones the full path makes, whatever changes between calls.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

import ctxpolicy.compose as compose_module
from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import BudgetExceededError, QueryPathError, UnknownProcessError
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer


def _policy(
    name: str,
    *,
    redistribute: bool,
    merge: bool,
    block_overflow: str,
    collector: dict[str, Any] | None = None,
) -> Policy:
    """System prompt, a system-role block, the history and the query on 400 tokens."""
    notes: dict[str, Any] = {"role": "system", "overflow": block_overflow}
    if collector is not None:
        notes["collector"] = collector
    return Policy.model_validate(
        {
            "version": 1,
            "name": name,
            "model": {
                "context_window": 400,
                "tokenizer": "cl100k_base",
                "system_messages": "merge" if merge else "separate",
            },
            "budget": {
                "output_reserve": 0.0,
                "ratios": {
                    "system_prompt": 0.1,
                    "notes__context": 0.1,
                    "checkpoint_messages": 0.6,
                    "query": 0.2,
                },
                "redistribute": redistribute,
            },
            "order": ["system_prompt", "notes__context", "checkpoint_messages", "query"],
            "layers": {"notes__context": notes},
            "processes": {
                "react": {"checkpoint_messages": True, "query": "checkpoint"},
                "ask": {"checkpoint_messages": True, "query": "runtime"},
            },
            "default_process": "react",
        }
    )


def _full_frame(call: Any, values: Any, sources: Any) -> Any:
    return compose_module._make_frame(call, values, sources, query_free=False)


def _without_frames(fn: Any) -> Any:
    """``fn()`` composed the full way: no frame taken from nor left to the tokenizer, and
    every layer (the query too) fitted from the call's own texts."""
    saved = compose_module._frame
    compose_module._frame = _full_frame  # type: ignore[assignment]
    try:
        return fn()
    finally:
        compose_module._frame = saved  # type: ignore[assignment]


def _same(a: ComposeResult, b: ComposeResult) -> None:
    assert [type(m) for m in a.messages] == [type(m) for m in b.messages]
    assert a.messages == b.messages
    assert a.report == b.report
    assert a.report.to_dict() == b.report.to_dict()
    assert a.persist == b.persist
    assert a.compacted_history == b.compacted_history


PROMPTS = st.sampled_from(["You are careful.", "You are terse. " * 30, ""])
NOTES = st.sampled_from([None, "", "Short notes.", "Long notes, " * 60])
STEP = st.tuples(
    PROMPTS,
    NOTES,
    st.sampled_from(["react", "ask"]),
    st.integers(0, 3),  # new exchanges appended
    st.integers(1, 60),  # words per new message
)


@settings(max_examples=100, deadline=None)
@given(
    redistribute=st.booleans(),
    merge=st.booleans(),
    overflow=st.sampled_from(["truncate_tail", "truncate_head", "drop"]),
    steps=st.lists(STEP, min_size=1, max_size=6),
)
def test_frames_and_the_plain_path_give_what_the_full_path_gives(
    redistribute: bool, merge: bool, overflow: str, steps: list[Any]
) -> None:
    policy = _policy("frames", redistribute=redistribute, merge=merge, block_overflow=overflow)
    engine = PolicyEngine(policy)
    history: list[Any] = [HumanMessage("first question"), AIMessage("first answer")]
    for turn, (prompt, notes, process, appended, words) in enumerate(steps):
        for i in range(appended):
            history = [
                *history,
                HumanMessage(f"question {turn}.{i} " + "word " * words),
                AIMessage(f"answer {turn}.{i} " + "word " * (61 - words)),
            ]
        if process == "react" and not isinstance(history[-1], HumanMessage):
            history = [*history, HumanMessage(f"the input of turn {turn}")]
        kwargs: dict[str, Any] = {
            "process": process,
            "system_prompt": prompt,
            "checkpoint_messages": history,
        }
        if process == "ask":
            kwargs["query"] = f"runtime question {turn}"
        if notes is not None:
            kwargs["contexts"] = {"notes__context": notes}

        def call(kwargs: dict[str, Any] = kwargs) -> Any:
            try:
                return engine.compose(**kwargs)
            except BudgetExceededError as exc:
                return exc

        got = call()
        # the full path: no frame, and the state given (so no plain path either)
        expected = _without_frames(lambda kwargs=kwargs: call({**kwargs, "state": {}}))
        if isinstance(expected, BudgetExceededError):
            assert isinstance(got, BudgetExceededError)
            assert str(got) == str(expected)
        else:
            assert isinstance(got, ComposeResult)
            _same(got, expected)


def _counting_layer_texts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made: list[int] = []
    layer_texts = compose_module._layer_texts

    def counting(*args: Any) -> Any:
        made.append(1)
        return layer_texts(*args)

    monkeypatch.setattr(compose_module, "_layer_texts", counting)
    return made


def test_the_next_turn_takes_the_frame_and_other_inputs_make_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = PolicyEngine(
        _policy("frame-taken", redistribute=False, merge=False, block_overflow="truncate_tail")
    )
    made = _counting_layer_texts(monkeypatch)
    history: list[Any] = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    first = engine.compose(system_prompt="prompt A", checkpoint_messages=history)
    assert len(made) == 1
    history = [*history, AIMessage("a2"), HumanMessage("q3")]
    second = engine.compose(system_prompt="prompt A", checkpoint_messages=history)
    assert len(made) == 1  # the frame was taken: the other layers were not made again
    assert second.messages[0] == first.messages[0]
    assert second.messages[0] is first.messages[0]  # the frame's message, unchanged
    assert second.messages[-1] is history[-1]
    third = engine.compose(system_prompt="prompt B", checkpoint_messages=history)
    assert len(made) == 2 and third.messages[0].content == "prompt B"
    fourth = engine.compose(
        system_prompt="prompt B",
        checkpoint_messages=history,
        contexts={"notes__context": "some notes"},
    )
    assert len(made) == 3 and fourth.messages[1].content == "some notes"
    engine.compose(system_prompt="prompt B", checkpoint_messages=history)
    assert len(made) == 4  # the contexts went: the frame of the call with them does not fit


@pytest.mark.parametrize("redistribute", [False, True])
def test_a_new_runtime_query_keeps_the_frame_unless_caps_are_redistributed(
    monkeypatch: pytest.MonkeyPatch, redistribute: bool
) -> None:
    """Without redistribution the query moves no other layer: the frame leaves it out and
    each call fits its own query; with it, the query's demand moves the caps."""
    engine = PolicyEngine(
        _policy(
            f"frame-query-{str(redistribute).lower()}",
            redistribute=redistribute,
            merge=False,
            block_overflow="truncate_tail",
        )
    )
    made = _counting_layer_texts(monkeypatch)
    history: list[Any] = [HumanMessage("q1"), AIMessage("a1")]
    results = []
    frames_made = 0
    for query in ("first question", "second question " * 20, "third"):
        kwargs: dict[str, Any] = {
            "process": "ask",
            "system_prompt": "s",
            "checkpoint_messages": history,
            "query": query,
        }
        before = len(made)
        results.append(engine.compose(**kwargs))
        frames_made += len(made) - before
        _same(results[-1], _without_frames(lambda kwargs=kwargs: engine.compose(**kwargs)))
    assert frames_made == (3 if redistribute else 1)
    assert [r.messages[-1].content for r in results][::2] == ["first question", "third"]
    demands = [r.report.layer("query").demand for r in results]
    assert demands[0] < demands[1] and demands[2] < demands[1]  # each call's own query
    # the same query again: the frame is taken, with redistribution too
    before = len(made)
    again = engine.compose(
        process="ask", system_prompt="s", checkpoint_messages=history, query="third"
    )
    assert len(made) == before
    _same(again, results[-1])


@pytest.mark.parametrize("redistribute", [False, True])
def test_a_frame_holds_every_layer_but_the_history_and_a_free_query(redistribute: bool) -> None:
    # the history is composed by every call, and so is the query when caps are not
    # redistributed (`query_free`); every other layer is fitted once, in the frame
    policy = _policy(
        f"frame-layers-{str(redistribute).lower()}",
        redistribute=redistribute,
        merge=False,
        block_overflow="drop",
    )
    engine = PolicyEngine(policy)
    tok = get_tokenizer("cl100k_base")
    engine.compose(
        process="ask",
        system_prompt="s",
        checkpoint_messages=[HumanMessage("q1")],
        query="q2",
        contexts={"notes__context": "n"},
    )
    (frame,) = [f for f in tok.frames if f.plan is engine.plan("ask")]
    assert frame.query_free is not redistribute
    expected = ["system_prompt", "notes__context"] + ([] if not redistribute else ["query"])
    assert sorted(frame.fits) == sorted(expected)


def test_one_frame_per_plan_and_clear_cache_forgets_them() -> None:
    tok = get_tokenizer("cl100k_base")
    tok.clear_cache()
    engine = PolicyEngine(
        _policy("frame-per-plan", redistribute=False, merge=False, block_overflow="drop")
    )
    history = [HumanMessage("q1")]
    for prompt in ("one", "two", "three"):
        engine.compose(system_prompt=prompt, checkpoint_messages=history)
    assert len(tok.frames) == 1  # each new frame of the plan replaced its last one
    engine.compose(process="ask", system_prompt="one", query="q", checkpoint_messages=history)
    assert len(tok.frames) == 2  # another process: another plan
    tok.clear_cache()
    assert tok.frames == ()


def test_a_layer_whose_fit_raises_raises_in_plan_order_on_every_call() -> None:
    """A block that cannot fit (overflow ``error``) after the history: the history's own
    error comes first when it has one, the block's otherwise; a frame with a failing fit
    is never kept."""
    policy = Policy.model_validate(
        {
            "version": 1,
            "name": "frame-errors",
            "model": {"context_window": 200, "tokenizer": "cl100k_base"},
            "budget": {
                "output_reserve": 0.0,
                "ratios": {"system_prompt": 0.2, "checkpoint_messages": 0.4, "notes__context": 0.4},
                "redistribute": False,
            },
            "order": ["system_prompt", "checkpoint_messages", "notes__context"],
            "layers": {"notes__context": {"overflow": "error"}},
            "processes": {"react": {"checkpoint_messages": True, "query": "checkpoint"}},
            "default_process": "react",
        }
    )
    engine = PolicyEngine(policy)
    tok = get_tokenizer("cl100k_base")
    too_long = {"notes__context": "notes " * 200}
    fits = [HumanMessage("a short question")]
    does_not_fit = [HumanMessage("a long question " * 40)]
    for _ in range(2):
        with pytest.raises(BudgetExceededError) as block:
            engine.compose(system_prompt="s", checkpoint_messages=fits, contexts=too_long)
        assert block.value.layer == "notes__context"
        with pytest.raises(BudgetExceededError) as history:
            engine.compose(system_prompt="s", checkpoint_messages=does_not_fit, contexts=too_long)
        assert history.value.layer == "checkpoint_messages"
    assert not any(
        getattr(frame, "plan", None) is engine.plan() and frame.values == too_long  # type: ignore[attr-defined]
        for frame in tok.frames
    )


def test_redistributed_caps_moved_by_the_history_fit_the_other_layers_again() -> None:
    """With ``redistribute`` the history's demand moves the block's cap: a long history
    leaves the block its own cap (truncated), a short one lends it room (whole)."""
    engine = PolicyEngine(
        _policy("frame-caps", redistribute=True, merge=False, block_overflow="truncate_tail")
    )
    notes = {"notes__context": "note " * 200}
    short: list[Any] = [HumanMessage("q")]
    long: list[Any] = []
    for i in range(20):
        long += [HumanMessage(f"question {i} " + "w " * 20), AIMessage(f"answer {i} " + "w " * 20)]
    long.append(HumanMessage("q"))
    results = [
        engine.compose(system_prompt="s", checkpoint_messages=h, contexts=notes)
        for h in (short, long, short, long)
    ]
    caps = [r.report.layer("notes__context").cap for r in results]
    cuts = [r.report.layer("notes__context").cuts for r in results]
    assert caps[0] == caps[2] != caps[1] == caps[3]
    assert cuts[0] == cuts[2] == ()
    assert cuts[1] == cuts[3] != ()
    for history, result in zip((short, long, short, long), results, strict=True):
        expected = _without_frames(
            lambda h=history: engine.compose(
                system_prompt="s", checkpoint_messages=h, contexts=notes, state={}
            )
        )
        _same(result, expected)


def test_a_plain_call_skips_the_preparation_and_raises_what_it_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = PolicyEngine(
        _policy("plain", redistribute=False, merge=False, block_overflow="truncate_tail")
    )
    history = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    full = engine.compose(system_prompt="s", checkpoint_messages=history, state={})
    bad_calls: list[dict[str, Any]] = [
        {"system_prompt": 3, "checkpoint_messages": history},
        {"system_prompt": "s", "checkpoint_messages": history, "query": 5},
        {"system_prompt": "s", "checkpoint_messages": "not a list"},
        {"system_prompt": "s", "checkpoint_messages": history, "query": "twice"},
        {"system_prompt": "s", "checkpoint_messages": [AIMessage("no question")]},
        {"system_prompt": "s", "checkpoint_messages": history, "process": "nope"},
        {"system_prompt": "s", "checkpoint_messages": history, "process": "ask"},
    ]
    errors = []
    for kwargs in bad_calls:
        with pytest.raises((TypeError, QueryPathError, UnknownProcessError)) as full_error:
            engine.compose(**kwargs, state={})
        errors.append((type(full_error.value), str(full_error.value)))

    def no_preparation(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a plain call was prepared")

    monkeypatch.setattr(PolicyEngine, "_prepare", no_preparation)
    plain = engine.compose(system_prompt="s", checkpoint_messages=history)
    _same(plain, full)
    for kwargs, (kind, text) in zip(bad_calls, errors, strict=True):
        if kwargs.get("process") == "nope":
            continue  # an unknown process is no plain one: the full path raises
        with pytest.raises(kind) as plain_error:
            engine.compose(**kwargs)
        assert str(plain_error.value) == text
    with pytest.raises(AssertionError, match="prepared"):  # a state: not plain
        engine.compose(system_prompt="s", checkpoint_messages=history, state={})


def test_a_process_with_a_collector_is_not_plain_and_composes_in_one_pass() -> None:
    """A call that neither summarizes nor recalls composes once, without driving the steps
    generator: the same result as the steps give."""
    policy = _policy(
        "direct",
        redistribute=True,
        merge=True,
        block_overflow="truncate_tail",
        collector={"type": "template", "template": "hi"},
    )
    engine = PolicyEngine(policy)
    assert not engine._facts["react"].plain
    history = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    got = engine.compose(system_prompt="s", checkpoint_messages=history)
    call = engine._prepare(
        process=None,
        system_prompt="s",
        state=None,
        query=None,
        contexts=None,
        checkpoint_messages=history,
        services=None,
    )
    from ctxpolicy.collectors.run import run_collectors

    steps = engine._steps(call, *engine._collected(call, run_collectors(call.requests)))
    with pytest.raises(StopIteration) as done:
        next(steps)
    _same(got, done.value.value)
    assert got.messages[0].content == "s\n\nhi"


def _edit_content(message: Any) -> None:
    message.content = "edited"


def _edit_id(message: Any) -> None:
    message.id = "given-by-add-messages"


def _edit_nested(message: Any) -> None:
    message.additional_kwargs["cache_control"] = {"type": "ephemeral"}


def _edit_extra(message: Any) -> None:
    message.note = "an extra field"


def _edit_extra_in_place(message: Any) -> None:
    message.model_extra["note"] = "an extra field, not among the fields set"


def _set_a_field_to_its_value(message: Any) -> None:
    message.name = None  # same value, but now among the fields set


@pytest.mark.parametrize(
    "edit",
    [
        _edit_content,
        _edit_id,
        _edit_nested,
        _edit_extra,
        _edit_extra_in_place,
        _set_a_field_to_its_value,
    ],
)
@pytest.mark.parametrize("redistribute", [False, True])
@pytest.mark.parametrize("notes_text", ["some notes", "long notes, " * 200])  # whole, cut
def test_a_returned_message_the_caller_changes_never_reaches_a_later_call(
    edit: Any, redistribute: bool, notes_text: str
) -> None:
    """The next turn gives out the frame's system and block messages as they were built
    (as ``create_agent`` gives every call its one SystemMessage); a caller that changes
    one (its content, its id as LangGraph's ``add_messages`` does, a nested dict, an
    extra field) gets a new one from the next call, as the first call built it, with
    the tokens it reports (with redistribution the frame's layers are fitted again on
    every call that has a history, from the frame's own texts)."""
    engine = PolicyEngine(
        _policy(
            "frame-edited", redistribute=redistribute, merge=False, block_overflow="truncate_tail"
        )
    )
    tok = get_tokenizer("cl100k_base")
    history: list[Any] = [HumanMessage("q1")]
    notes = {"notes__context": notes_text}
    first = engine.compose(system_prompt="prompt", checkpoint_messages=history, contexts=notes)
    assert bool(first.report.layer("notes__context").cuts) == (notes_text != "some notes")
    pristine = [m.model_copy(deep=True) for m in first.messages[:2]]
    assert [m.model_fields_set for m in pristine] == [
        m.model_fields_set for m in first.messages[:2]
    ]
    for index in (0, 1):
        edit(first.messages[index])
    if notes_text == "some notes":  # a cut layer's cap moves with the history's demand
        history = [*history, AIMessage("a1"), HumanMessage("q2")]
    second = engine.compose(system_prompt="prompt", checkpoint_messages=history, contexts=notes)
    for index in (0, 1):
        assert second.messages[index] is not first.messages[index]
        assert second.messages[index] == pristine[index]
        assert second.messages[index].model_fields_set == pristine[index].model_fields_set
        assert second.messages[index].model_extra == pristine[index].model_extra
    third = engine.compose(system_prompt="prompt", checkpoint_messages=history, contexts=notes)
    assert third.messages[:2] == pristine
    for result in (second, third):
        assert result.report.total_tokens == tok.count_messages(result.messages)
