"""PolicyEngine API (DESIGN §4): construction, plan, collect, services, persist, testing helpers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import ctxpolicy
from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import UnknownProcessError
from ctxpolicy.testing import (
    ListRetriever,
    ScriptedSummarizer,
    assert_composed_valid,
    assert_history_valid,
)
from tests.engine.conftest import design_data, make_policy

ROOT = Path(__file__).resolve().parents[2]
STATE = {"messages": [HumanMessage("q")], "todo": [{"title": "t", "done": True}]}


def test_public_names_resolve_to_the_engine() -> None:
    assert ctxpolicy.PolicyEngine is PolicyEngine
    assert ctxpolicy.ComposeResult is ComposeResult
    assert ctxpolicy.compose_messages.__module__ == "ctxpolicy.compose"
    assert ctxpolicy.LayerPlan.__module__ == "ctxpolicy.plan"


def test_from_file_and_share_context_argument() -> None:
    engine = PolicyEngine.from_file(ROOT / "policies" / "base.yaml", enable_share_context=False)
    assert engine.policy.enable_share_context is False
    assert list(engine.plan("react").names) == ["system_prompt", "checkpoint_messages", "query"]
    result = engine.compose(system_prompt="s", state={"messages": [HumanMessage("q")]})
    assert [m.type for m in result.messages] == ["system", "human"]


def test_plan_defaults_to_default_process_and_rejects_unknown() -> None:
    engine = PolicyEngine(make_policy())
    assert engine.plan().process == "react"
    assert engine.plan() is engine.plan("react")  # planned once, at construction
    with pytest.raises(UnknownProcessError):
        engine.plan("nope")
    with pytest.raises(UnknownProcessError):
        engine.compose(process="nope", system_prompt="s", state=STATE)
    with pytest.raises(TypeError, match=r"ctxpolicy\.Policy"):
        PolicyEngine({"version": 1})  # type: ignore[arg-type]


def test_collect_returns_only_context_keys() -> None:
    engine = PolicyEngine(make_policy(), services={"knowledge": ListRetriever(["k1"])})
    collected = engine.collect(process="react", state=STATE)
    assert collected["knowledge__context"] == "k1"
    assert all(key.endswith("__context") for key in collected)
    worker = engine.collect(process="mapreduce_worker", query="task")
    assert set(worker) == {"framework__context", "knowledge__context"}


def test_call_services_override_engine_services() -> None:
    engine = PolicyEngine(make_policy(), services={"knowledge": ListRetriever(["engine"])})
    base = engine.compose(system_prompt="s", state=STATE)
    assert "engine" in [m.content for m in base.messages]
    override = engine.compose(
        system_prompt="s", state=STATE, services={"knowledge": ListRetriever(["call"])}
    )
    assert "call" in [m.content for m in override.messages]
    assert dict(engine.services).keys() == {"knowledge"}


def test_checkpoint_messages_argument_overrides_state_and_accepts_dicts() -> None:
    engine = PolicyEngine(make_policy())
    result = engine.compose(
        system_prompt="s",
        state={"messages": [HumanMessage("from state")]},
        checkpoint_messages=[{"role": "user", "content": "from argument"}],
    )
    assert result.messages[-1] == HumanMessage("from argument")
    with pytest.raises(ValueError, match="checkpoint_messages"):
        engine.compose(system_prompt="s", checkpoint_messages=[{"type": "alien", "content": "x"}])
    with pytest.raises(TypeError, match="state must be a mapping"):
        engine.compose(system_prompt="s", state=[1])  # type: ignore[arg-type]


def test_persist_carries_only_values_this_call_produced() -> None:
    data = design_data()
    data["layers"]["todo__context"]["persist"] = True
    engine = PolicyEngine(make_policy(data))
    state = {**STATE, "compression__context": "summary from state"}
    read_back = engine.compose(system_prompt="s", state=state)
    assert read_back.persist == {}  # state collectors re-emit state: nothing new to write
    given = engine.compose(
        system_prompt="s",
        state=state,
        contexts={"todo__context": "runtime todo", "framework__context": "fw override"},
    )
    assert given.persist == {"todo__context": "runtime todo"}  # framework is runtime-only
    same = engine.compose(
        system_prompt="s", state={**state, "todo__context": "t"}, contexts={"todo__context": "t"}
    )
    assert same.persist == {}


def test_async_compose_equals_sync_compose() -> None:
    engine = PolicyEngine(make_policy(), services={"knowledge": ListRetriever(["k"])})
    sync = engine.compose(system_prompt="s", state=STATE)
    awaited = asyncio.run(engine.acompose(system_prompt="s", state=STATE))
    assert sync.messages == awaited.messages
    assert sync.report.prefix_hashes == awaited.report.prefix_hashes


def test_testing_helpers_catch_broken_histories() -> None:
    assert_history_valid([HumanMessage("a"), AIMessage("b")])
    with pytest.raises(AssertionError, match="not structurally valid"):
        assert_history_valid([AIMessage("a")])
    with pytest.raises(AssertionError):
        assert_history_valid([HumanMessage("a"), ToolMessage("r", tool_call_id="x")])
    with pytest.raises(AssertionError):
        assert_history_valid([HumanMessage("a"), SystemMessage("s")])
    engine = PolicyEngine(make_policy())
    result = engine.compose(system_prompt="s", state=STATE)
    assert_composed_valid(result, engine.plan())
    summarizer = ScriptedSummarizer(responses=["first"])
    assert summarizer([HumanMessage("x")], None) == "first"
    assert summarizer([HumanMessage("y z")], "first").startswith("first | summary #2 of 1")
    assert [previous for _, previous in summarizer.calls] == [None, "first"]
    retriever = ListRetriever(["apples and pears", "only pears"], match_all=False)
    assert [d.page_content for d in retriever.invoke("apples")] == ["apples and pears"]
    assert retriever.queries == ["apples"]


def test_engines_derived_for_a_host_or_a_window_warn_no_second_time() -> None:
    import warnings

    from ctxpolicy.integrations.langgraph import agent_node
    from ctxpolicy.loading import load_policy
    from ctxpolicy.memory import MemoryNotDurableWarning, MemorySessions
    from tests.integrations.fakes import RecordingChatModel

    policy = load_policy(Path(__file__).resolve().parents[2] / "policies" / "seed002-sessions.yaml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = PolicyEngine(policy, services={"memory": MemorySessions(store=False)})
        for name in ("a", "b"):  # each node builder derives a host engine
            agent_node(engine, name=name, system_prompt="S", model=RecordingChatModel(responses=[]))
        narrow = engine.for_model_host().with_context_window(8000)
    volatile = [w for w in caught if issubclass(w.category, MemoryNotDurableWarning)]
    assert len(volatile) == 1  # before: once more per derived engine
    assert narrow.policy.model.context_window == 8000
    assert narrow.policy.model.system_messages == "merge"
    assert narrow._recallers is engine._recallers and narrow._memories is engine._memories
