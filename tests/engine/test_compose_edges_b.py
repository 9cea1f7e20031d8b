"""Edges of the composer and the summarizer: merged system messages, sources, notes,
input checks, repairs, and the exact texts the summarizer sees and raises."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import Field

from ctxpolicy.compose import (
    check_call,
    check_contexts,
    check_system_prompt,
    compose_call,
    compose_layers,
    input_notes,
)
from ctxpolicy.errors import CollectorError
from ctxpolicy.layers import COMPRESSION
from ctxpolicy.plan import LayerPlan, plan_layers
from ctxpolicy.report import LayerCut, SkippedCollector
from ctxpolicy.summarize import (
    SUMMARY_INSTRUCTIONS,
    asummarize_history,
    summarize_history,
    summarizer_of,
    summary_prompt,
    transcript,
)
from ctxpolicy.tokens import get_tokenizer
from tests.engine.conftest import design_data, make_policy

TOK = get_tokenizer("cl100k_base")
MERGE_NOTE = "merged into the first system message (model.system_messages: merge), after "
RUNTIME = {"checkpoint_messages": True, "share_context": True, "query": "runtime"}
NO_HISTORY = {"checkpoint_messages": False, "share_context": True, "query": "runtime"}


def plan_of(
    process: str = "react",
    *,
    merge: bool = False,
    redistribute: bool = False,
    layers: dict[str, Any] | None = None,
    processes: dict[str, Any] | None = None,
    window: int = 1000,
) -> LayerPlan:
    data = design_data()
    data["model"] = {"context_window": window, "tokenizer": "cl100k_base"}
    if merge:
        data["model"]["system_messages"] = "merge"
    data["budget"] = {**data["budget"], "output_reserve": 0.0, "redistribute": redistribute}
    for name, spec in (layers or {}).items():
        data["layers"][name] = {**data["layers"].get(name, {}), **spec}
    data["processes"].update(processes or {})
    return plan_layers(make_policy(data), process)


# ----------------------------------------------------------------------------- merge


def test_merge_joins_the_leading_system_layers_and_stops_at_the_first_other_role() -> None:
    plan = plan_of(
        "rt", merge=True, layers={"todo__context": {"role": "human"}}, processes={"rt": RUNTIME}
    )
    comp = compose_layers(
        plan,
        system_prompt="S",
        contexts={
            "framework__context": "F",
            "experience__context": "",  # empty: skipped, the group goes on
            "knowledge__context": "K",
            "todo__context": "T",
            "compression__context": "C",
        },
        query="q",
    )
    assert comp.messages == (
        SystemMessage("S\n\nF\n\nK"),
        HumanMessage("T"),
        SystemMessage("C"),
        HumanMessage("q"),
    )
    assert comp.message_layers == (
        "system_prompt",
        "todo__context",
        "compression__context",
        "query",
    )
    report = comp.report
    merged = ["system_prompt", "framework__context", "knowledge__context"]
    assert [report.layer(n).messages for n in merged] == [1, 0, 0]
    assert sum(report.layer(n).tokens for n in merged) == TOK.count_message(
        SystemMessage("S\n\nF\n\nK")
    )
    assert report.layer("system_prompt").source == "argument"
    assert report.layer("framework__context").source == "contexts"
    assert report.layer("knowledge__context").source == "contexts"
    assert report.layer("experience__context").source == "none"
    assert report.layer("framework__context").notes == (MERGE_NOTE + "system_prompt",)
    assert report.layer("knowledge__context").notes == (MERGE_NOTE + "system_prompt",)
    assert report.layer("system_prompt").notes == ()
    assert report.layer("compression__context").notes == ()


def test_merge_of_exactly_two_system_layers() -> None:
    plan = plan_of("rt", merge=True, processes={"rt": RUNTIME})
    comp = compose_layers(plan, system_prompt="S", contexts={"knowledge__context": "K"}, query="q")
    assert comp.messages == (SystemMessage("S\n\nK"), HumanMessage("q"))
    assert comp.report.layer("knowledge__context").messages == 0
    assert comp.report.layer("knowledge__context").source == "contexts"
    assert comp.report.layer("knowledge__context").notes == (MERGE_NOTE + "system_prompt",)


def test_merge_with_a_lone_system_layer_sends_it_unchanged() -> None:
    plan = plan_of("rt", merge=True, processes={"rt": RUNTIME})
    comp = compose_layers(plan, system_prompt="S", query="q")
    assert comp.messages == (SystemMessage("S"), HumanMessage("q"))
    assert comp.report.layer("system_prompt").tokens == TOK.count_message(SystemMessage("S"))


# ----------------------------------------------------------------------------- sources, notes


def test_given_sources_win_and_other_blocks_default_to_contexts() -> None:
    plan = plan_of("rt", processes={"rt": RUNTIME})
    comp = compose_layers(
        plan,
        system_prompt="S",
        contexts={"framework__context": "F", "knowledge__context": "K"},
        query="q",
        sources={"framework__context": "collector"},
    )
    report = comp.report
    assert report.layer("framework__context").source == "collector"
    assert report.layer("knowledge__context").source == "contexts"
    assert report.layer("system_prompt").source == "argument"
    assert report.layer("query").source == "argument"
    assert report.layer("todo__context").source == "none"


def test_extra_notes_come_before_the_notes_about_ignored_inputs() -> None:
    plan = plan_of("nh", processes={"nh": NO_HISTORY})
    comp = compose_layers(
        plan,
        system_prompt="S",
        checkpoint_messages=[HumanMessage("a"), AIMessage("b")],
        query="q",
        notes={"checkpoint_messages": ["first"], "knowledge__context": ["kn"]},
    )
    assert comp.report.layer("checkpoint_messages").notes == (
        "first",
        "ignored 2 message(s): process nh takes no history",
    )
    assert comp.report.layer("knowledge__context").notes == ("empty: no value this call", "kn")


def test_notes_about_ignored_inputs_stay_when_extra_notes_name_other_layers() -> None:
    plan = plan_of("nh", processes={"nh": NO_HISTORY})
    comp = compose_layers(
        plan,
        system_prompt="S",
        checkpoint_messages=[HumanMessage("a")],
        query="q",
        notes={"knowledge__context": ["kn"]},
    )
    assert comp.report.layer("checkpoint_messages").notes == (
        "ignored 1 message(s): process nh takes no history",
    )


def test_skipped_collectors_reach_the_report() -> None:
    plan = plan_of("rt", processes={"rt": RUNTIME})
    skipped = SkippedCollector("knowledge__context", "retriever", "boom")
    comp = compose_layers(plan, system_prompt="S", query="q", skipped=[skipped])
    assert comp.report.skipped == (skipped,)
    assert comp.report.layer("knowledge__context").error == "boom"
    plain = compose_layers(plan, system_prompt="S", query="q")
    assert plain.report.skipped == ()


def test_reserved_layers_keep_their_cap_when_caps_are_redistributed() -> None:
    plan = plan_of("rt", redistribute=True, processes={"rt": RUNTIME})
    kwargs: dict[str, Any] = {"system_prompt": "S", "query": "q"}
    held = compose_layers(plan, reserved=["knowledge__context"], **kwargs)
    free = compose_layers(plan, **kwargs)
    assert held.report.layer("knowledge__context").cap == plan.caps["knowledge__context"]
    assert held.report.layer("knowledge__context").demand == plan.caps["knowledge__context"]
    assert free.report.layer("knowledge__context").demand == 0
    call = check_call(plan, system_prompt="S", query="q", reserved=["knowledge__context"])
    assert call.reserved == frozenset({"knowledge__context"})


def _summarize_plan() -> LayerPlan:
    return plan_of(
        "rt",
        layers={"checkpoint_messages": {"overflow": "summarize"}},
        processes={"rt": RUNTIME},
        window=200,
    )


def _long_history() -> list[Any]:
    out: list[Any] = []
    for i in range(30):
        out += [HumanMessage(f"question {i} " + "x " * 10), AIMessage(f"answer {i}")]
    return out


def test_compose_call_requests_a_summary_by_default_and_not_when_told() -> None:
    plan = _summarize_plan()
    call = check_call(
        plan,
        system_prompt="S",
        checkpoint_messages=_long_history(),
        query="q",
        contexts={"compression__context": "old summary"},
    )
    comp = compose_call(call)
    assert comp.summarize is not None
    assert comp.summarize.previous_summary == "old summary"
    assert comp.report.summarized is True
    assert comp.contexts == {"compression__context": "old summary"}
    plain = compose_call(call, request_summary=False)
    assert plain.summarize is None
    assert plain.report.summarized is False
    assert [c.action for c in plain.report.layer("checkpoint_messages").cuts] == ["dropped_oldest"]


def test_compose_layers_passes_request_summary() -> None:
    plan = _summarize_plan()
    kwargs: dict[str, Any] = {
        "system_prompt": "S",
        "checkpoint_messages": _long_history(),
        "query": "q",
    }
    assert compose_layers(plan, **kwargs).summarize is not None
    assert compose_layers(plan, request_summary=False, **kwargs).summarize is None


def test_composition_contexts_keep_only_non_empty_values() -> None:
    plan = plan_of("rt", processes={"rt": RUNTIME})
    call = check_call(
        plan,
        system_prompt="S",
        query="q",
        contexts={"framework__context": "F", "knowledge__context": "", "todo__context": None},
    )
    assert compose_call(call).contexts == {"framework__context": "F"}


# ----------------------------------------------------------------------------- repairs


def test_a_structural_repair_is_one_repaired_cut() -> None:
    plan = plan_of("rt", processes={"rt": RUNTIME})
    comp = compose_layers(
        plan,
        system_prompt="S",
        checkpoint_messages=[HumanMessage("h"), SystemMessage("sys"), AIMessage("a")],
        query="q",
    )
    layer = comp.report.layer("checkpoint_messages")
    assert layer.cuts == (LayerCut("repaired", 0, 1, None, "structure"),)
    assert layer.cuts[0].describe() == "repaired 1 message(s), 0 tokens (structure)"


# ----------------------------------------------------------------------------- checks


def test_check_call_rejects_a_string_history_with_an_exact_message() -> None:
    plan = plan_of()
    with pytest.raises(TypeError) as info:
        check_call(plan, system_prompt="S", checkpoint_messages="hello")  # type: ignore[arg-type]
    assert str(info.value) == "checkpoint_messages must be a sequence of messages, not a string"


def test_check_call_without_history_layer_has_an_empty_history() -> None:
    plan = plan_of("nh", processes={"nh": NO_HISTORY})
    call = check_call(plan, system_prompt="S", checkpoint_messages=[HumanMessage("a")], query="q")
    assert call.history == ()
    assert call.notes == {
        "checkpoint_messages": ("ignored 1 message(s): process nh takes no history",)
    }


def test_check_system_prompt_message() -> None:
    with pytest.raises(TypeError) as info:
        check_system_prompt(3)
    assert str(info.value) == "system_prompt must be a str, got int"


def test_check_contexts_value_type_message() -> None:
    with pytest.raises(TypeError) as info:
        check_contexts(plan_of(), {"todo__context": 5})
    assert str(info.value) == "contexts['todo__context'] must be a str or None, got int"


def test_input_notes_only_for_ignored_inputs() -> None:
    plan = plan_of("mapreduce_worker")
    assert input_notes(plan, {"framework__context": "F"}, ()) == {}
    assert input_notes(plan, {"todo__context": ""}, ()) == {}
    assert input_notes(plan, {"todo__context": "T"}, ()) == {
        "todo__context": ("contexts value ignored: process mapreduce_worker excludes this layer",)
    }
    react = plan_of("react")
    assert input_notes(react, {}, [HumanMessage("a")]) == {}
    assert input_notes(react, {"todo__context": "T"}, ()) == {}


# ----------------------------------------------------------------------------- summarize


def test_transcript_lists_messages_and_tool_calls() -> None:
    messages = [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"name": "sql", "args": {"q": 1}, "id": "c1"}]),
        ToolMessage("rows", tool_call_id="c1"),
        AIMessage("done"),
    ]
    assert transcript(messages) == (
        "human: hi\nai: \n  tool call sql({'q': 1})\ntool: rows\nai: done"
    )


def test_summary_prompt_shows_the_previous_summary_or_none() -> None:
    dropped = [HumanMessage("hi")]
    assert summary_prompt(dropped, None) == [
        SystemMessage(SUMMARY_INSTRUCTIONS),
        HumanMessage("Previous summary:\n(none)\n\nOlder messages to fold in:\nhuman: hi"),
    ]
    assert summary_prompt(dropped, "P")[1] == HumanMessage(
        "Previous summary:\nP\n\nOlder messages to fold in:\nhuman: hi"
    )


def test_summarizer_of_without_a_summarizer() -> None:
    with pytest.raises(CollectorError) as info:
        summarizer_of({})
    assert info.value.layer == COMPRESSION
    assert str(info.value) == (
        "collector of layer 'compression__context' failed: checkpoint_messages overflow "
        "'summarize' needs a 'summarizer' service (a chat model, or a callable "
        "(messages, previous_summary) -> str)"
    )


def test_summarize_history_passes_the_previous_summary() -> None:
    seen: list[Any] = []

    def summarizer(messages: tuple[Any, ...], previous: str | None) -> str:
        seen.append((messages, previous))
        return "new"

    dropped = [HumanMessage("hi")]
    assert summarize_history(summarizer, dropped, "P") == "new"
    assert asyncio.run(asummarize_history(summarizer, dropped, "P")) == "new"
    assert seen == [((dropped[0],), "P"), ((dropped[0],), "P")]


class _Recorder(FakeListChatModel):
    prompts: list[Any] = Field(default_factory=list)

    def invoke(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(input)
        return super().invoke(input, *args, **kwargs)

    async def ainvoke(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(input)
        return await super().ainvoke(input, *args, **kwargs)


def test_chat_model_summarizer_gets_the_prompt_with_the_previous_summary() -> None:
    model = _Recorder(responses=["s1", "s2"], prompts=[])
    dropped = [HumanMessage("hi")]
    assert summarize_history(model, dropped, "P") == "s1"
    assert asyncio.run(asummarize_history(model, dropped, "P")) == "s2"
    assert model.prompts == [summary_prompt(dropped, "P")] * 2


def _failing(messages: Any, previous: Any) -> str:
    raise RuntimeError("down")


def test_summarizer_failures_name_the_compression_layer() -> None:
    expected = (
        "collector of layer 'compression__context' failed: summarizer failed: RuntimeError('down')"
    )
    with pytest.raises(CollectorError) as info:
        summarize_history(_failing, [HumanMessage("hi")], None)
    assert info.value.layer == COMPRESSION
    assert str(info.value) == expected
    with pytest.raises(CollectorError) as ainfo:
        asyncio.run(asummarize_history(_failing, [HumanMessage("hi")], None))
    assert ainfo.value.layer == COMPRESSION
    assert str(ainfo.value) == expected


def test_a_summary_that_is_no_text_is_an_error() -> None:
    with pytest.raises(CollectorError) as info:
        summarize_history(lambda m, p: 5, [HumanMessage("hi")], None)
    assert info.value.layer == COMPRESSION
    assert re.fullmatch(
        r"collector of layer 'compression__context' failed: the summarizer returned int, "
        r"not a non-empty text",
        str(info.value),
    )
