"""``agent_node(..., contexts=...)``: the seed's per-call context overrides (issue 32, #15).

Real LangGraph graphs on the SQLite checkpointer: a mapping, or a function of the graph
state, gives runtime values of ``__context`` layers for each call; they replace the
layer's collector for that call only and are never written to state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.integrations.langgraph import aagent_node, agent_node, state_schema
from ctxpolicy.state import user_turn
from tests.integrations.fakes import RecordingChatModel, replies
from tests.integrations.graphs import FRAMEWORK, make_policy, open_saver

CONFIG = {"configurable": {"thread_id": "ctx-1"}}


def build(tmp_path: Path, model: RecordingChatModel, **node: Any) -> Any:
    engine = PolicyEngine(make_policy())
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "analyst", agent_node(engine, name="analyst", system_prompt="S", model=model, **node)
    )
    graph.add_edge(START, "analyst")
    graph.add_edge("analyst", END)
    return graph.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))


def system_texts(model: RecordingChatModel, call: int) -> list[str]:
    """Each layer's text in the call's system message(s) (one merged message by default:
    its layers are joined by a blank line)."""
    return [
        part
        for m in model.seen[call]
        if m.type == "system"
        for part in str(m.content).split("\n\n")
    ]


def test_a_mapping_overrides_a_layer_on_every_call(tmp_path: Path) -> None:
    model = RecordingChatModel(responses=replies("a1", "a2"))
    reports: list[ComposeResult] = []
    graph = build(
        tmp_path,
        model,
        contexts={"knowledge__context": "知识: orders 表按天分区", "framework__context": None},
        on_compose=lambda name, result: reports.append(result),
    )
    graph.invoke(user_turn("q1", turn_id="t1"), CONFIG)
    state = graph.invoke(user_turn("q2", turn_id="t2"), CONFIG)
    for call in (0, 1):
        texts = system_texts(model, call)
        assert "知识: orders 表按天分区" in texts
        assert FRAMEWORK not in texts  # None: the layer is left empty for the call
    assert reports[0].report.layer("knowledge__context").source == "contexts"
    assert "knowledge__context" not in state  # runtime-only: never persisted


def test_a_callable_reads_the_graph_state(tmp_path: Path) -> None:
    model = RecordingChatModel(responses=replies("a1", "a2"))
    seen_states: list[Any] = []

    def per_call(state: Any) -> dict[str, str] | None:
        seen_states.append(state)
        humans = [m for m in state["messages"] if m.type == "human"]
        if len(humans) < 2:
            return None  # no override: the layers' collectors run
        return {"knowledge__context": f"turn {len(humans)}: {humans[-1].content}"}

    graph = build(tmp_path, model, contexts=per_call)
    graph.invoke(user_turn("第一问", turn_id="t1"), CONFIG)
    graph.invoke(user_turn("第二问", turn_id="t2"), CONFIG)
    assert FRAMEWORK in system_texts(model, 0)
    assert not any(t.startswith("turn ") for t in system_texts(model, 0))
    assert "turn 2: 第二问" in system_texts(model, 1)
    assert len(seen_states) == 2


def test_async_node_takes_contexts(tmp_path: Path) -> None:
    import asyncio

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a1"))
    builder = StateGraph(state_schema(engine))
    builder.add_node(
        "analyst",
        aagent_node(
            engine,
            name="analyst",
            system_prompt="S",
            model=model,
            contexts=lambda state: {"knowledge__context": "ASYNC-KNOWLEDGE"},
        ),
    )
    builder.add_edge(START, "analyst")
    builder.add_edge("analyst", END)

    async def scenario() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke(user_turn("q1", turn_id="t1"), CONFIG)

    asyncio.run(scenario())
    assert "ASYNC-KNOWLEDGE" in system_texts(model, 0)


def test_bad_contexts_are_refused_when_the_node_is_built() -> None:
    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a1"))

    def node(contexts: Any) -> None:
        agent_node(engine, name="a", system_prompt="S", model=model, contexts=contexts)

    with pytest.raises(ValueError, match="todo__context"):
        node({"todo__context": "x"})
    with pytest.raises(ValueError, match="__context"):
        node({"knowledge": "x"})
    with pytest.raises(TypeError, match="str or None"):
        node({"knowledge__context": 3})
    with pytest.raises(TypeError, match="mapping"):
        node("knowledge__context")


def test_a_callable_returning_a_wrong_type_fails_before_the_model_is_called(
    tmp_path: Path,
) -> None:
    model = RecordingChatModel(responses=replies("a1"))
    graph = build(tmp_path, model, contexts=lambda state: ["knowledge__context"])
    with pytest.raises(TypeError, match="returned list"):
        graph.invoke(user_turn("q1", turn_id="t1"), CONFIG)
    assert model.calls == 0
