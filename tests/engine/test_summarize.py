"""History overflow `summarize`: the summarizer service, persist and compacted history."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import CollectorError
from ctxpolicy.testing import ScriptedSummarizer, assert_composed_valid, assert_history_valid
from tests.engine.conftest import design_data, make_policy


def summarize_policy(window: int = 1200, **layers: Any) -> Any:
    data = design_data()
    data["model"] = {"context_window": window, "tokenizer": "cl100k_base"}
    data["layers"]["checkpoint_messages"] = {"overflow": "summarize"}
    for name, spec in layers.items():
        data["layers"][name] = spec
    return make_policy(data)


def long_history(turns: int = 30) -> list[Any]:
    out: list[Any] = []
    for t in range(turns):
        out += [
            HumanMessage(f"question {t}: " + "detail " * 20),
            AIMessage("", tool_calls=[{"name": "sql", "args": {"q": t}, "id": f"c{t}"}]),
            ToolMessage("rows " * 10, tool_call_id=f"c{t}"),
            AIMessage(f"answer {t}"),
        ]
    return [*out, HumanMessage("final question")]


def test_summary_is_used_now_persisted_and_history_compacted() -> None:
    summarizer = ScriptedSummarizer(responses=["S1: the user explored tables t0..t20"])
    engine = PolicyEngine(summarize_policy(), services={"summarizer": summarizer})
    state = {"messages": long_history(), "compression__context": "S0: earlier work"}
    result = engine.compose(system_prompt="s", state=state)
    dropped, previous = summarizer.calls[0]
    assert previous == "S0: earlier work"  # the previous summary goes in with the prefix
    assert dropped == tuple(state["messages"][: len(dropped)])
    # the new summary took room from the history: a second pass folded a bit more,
    # on top of the first summary
    for (_, later_previous), earlier in zip(summarizer.calls[1:], summarizer.calls, strict=False):
        assert later_previous is not None and later_previous != earlier[1]
    final = result.persist["compression__context"]
    assert final.startswith("S1: the user explored tables t0..t20")
    assert final in [m.content for m in result.messages]  # used in this same call
    assert "S0: earlier work" not in [m.content for m in result.messages]
    folded = sum(len(messages) for messages, _ in summarizer.calls)
    assert result.compacted_history is not None
    assert list(result.compacted_history) == state["messages"][folded:]
    assert_history_valid(result.compacted_history)
    assert_composed_valid(result, engine.plan())
    history = result.report.layer("checkpoint_messages")
    summarized = [c for c in history.cuts if c.action == "summarized"]
    assert sum(c.messages for c in summarized) == folded
    assert result.report.layer("compression__context").source == "summary"
    assert result.report.summarized


def test_summary_is_carried_into_the_next_call() -> None:
    summarizer = ScriptedSummarizer()
    engine = PolicyEngine(summarize_policy(), services={"summarizer": summarizer})
    first = engine.compose(system_prompt="s", state={"messages": long_history()})
    state = {"messages": [*(first.compacted_history or ())], **first.persist}
    for t in range(12):  # the conversation goes on until the history overflows again
        state["messages"] += [AIMessage(f"more {t} " + "x " * 30), HumanMessage(f"next {t}")]
    calls_before = len(summarizer.calls)
    second = engine.compose(system_prompt="s", state=state)
    assert len(summarizer.calls) > calls_before
    assert summarizer.calls[calls_before][1] == first.persist["compression__context"]
    assert second.persist["compression__context"].startswith(first.persist["compression__context"])
    assert_composed_valid(second, engine.plan())


def test_no_overflow_means_no_summary_and_no_persist() -> None:
    summarizer = ScriptedSummarizer()
    engine = PolicyEngine(summarize_policy(window=100_000), services={"summarizer": summarizer})
    state = {"messages": long_history(2), "compression__context": "old summary"}
    result = engine.compose(system_prompt="s", state=state)
    assert summarizer.calls == []
    assert result.persist == {}  # re-reading state is not producing a value
    assert result.compacted_history is None
    assert "old summary" in [m.content for m in result.messages]


def test_chat_model_summarizer_sync_and_async() -> None:
    model = FakeMessagesListChatModel(responses=[AIMessage("model summary")] * 4)
    engine = PolicyEngine(summarize_policy(), services={"summarizer": model})
    result = engine.compose(system_prompt="s", state={"messages": long_history()})
    assert result.persist["compression__context"] == "model summary"
    awaited = asyncio.run(engine.acompose(system_prompt="s", state={"messages": long_history()}))
    assert awaited.persist["compression__context"] == "model summary"


def test_async_callable_summarizer() -> None:
    async def summarizer(messages: Any, previous: str | None) -> str:
        return f"async summary of {len(messages)}"

    engine = PolicyEngine(summarize_policy(), services={"summarizer": summarizer})
    result = asyncio.run(engine.acompose(system_prompt="s", state={"messages": long_history()}))
    assert result.persist["compression__context"].startswith("async summary of")
    sync = engine.compose(system_prompt="s", state={"messages": long_history()})
    assert sync.persist["compression__context"].startswith("async summary of")


def test_missing_or_failing_summarizer_raises() -> None:
    with pytest.raises(CollectorError, match="needs a 'summarizer' service"):
        PolicyEngine(summarize_policy()).compose(
            system_prompt="s", state={"messages": long_history()}
        )

    def broken(messages: Any, previous: str | None) -> str:
        raise RuntimeError("model down")

    engine = PolicyEngine(summarize_policy(), services={"summarizer": broken})
    with pytest.raises(CollectorError, match="model down"):
        engine.compose(system_prompt="s", state={"messages": long_history()})
    empty = PolicyEngine(summarize_policy(), services={"summarizer": lambda m, p: ""})
    with pytest.raises(CollectorError, match="not a non-empty text"):
        empty.compose(system_prompt="s", state={"messages": long_history()})


def test_runtime_only_summary_layer_is_used_but_not_persisted() -> None:
    policy = summarize_policy(
        compression__context={
            "persist": False,
            "collector": {"type": "state", "field": "compression__context"},
        }
    )
    engine = PolicyEngine(policy, services={"summarizer": ScriptedSummarizer(responses=["S"] * 5)})
    result = engine.compose(system_prompt="s", state={"messages": long_history()})
    assert "S" in [m.content for m in result.messages]
    assert result.persist == {}
    assert result.compacted_history is None  # replacing the history would lose what S holds


def test_summarize_without_a_compression_layer_falls_back_with_a_warning() -> None:
    policy = summarize_policy().with_share_context(False)  # react loses compression__context
    summarizer = ScriptedSummarizer()
    engine = PolicyEngine(policy, services={"summarizer": summarizer})
    result = engine.compose(system_prompt="s", state={"messages": long_history()})
    assert summarizer.calls == []
    assert result.persist == {} and result.compacted_history is None
    assert any("fell back to drop_oldest" in w for w in result.report.warnings)
    cut = result.report.layer("checkpoint_messages").cuts[-1]
    assert cut.action == "dropped_oldest"
    assert_composed_valid(result, engine.plan())


def test_collectors_see_state_read_only() -> None:
    import sys
    import types

    from ctxpolicy.collectors.base import CollectRequest

    module = types.ModuleType("ctxpolicy_test_readonly")

    def writer(request: CollectRequest) -> str:
        request.state["todo"] = "hacked"  # type: ignore[index]
        return "x"

    module.writer = writer  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        data = design_data()
        data["layers"]["experience__context"] = {
            "collector": {"type": "callable", "target": f"{module.__name__}:writer"}
        }
        state = {"messages": [HumanMessage("q")], "todo": "original"}
        with pytest.raises(CollectorError, match="does not support item assignment"):
            PolicyEngine(make_policy(data)).compose(system_prompt="s", state=state)
        assert state["todo"] == "original"
    finally:
        del sys.modules[module.__name__]
