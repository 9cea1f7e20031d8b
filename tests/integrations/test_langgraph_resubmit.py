"""A completed turn submitted again adds nothing (issue 13, defect 3).

Real LangGraph graphs on the SQLite checkpointer: the same input with the same turn id
(the same HumanMessage id, e.g. from `user_turn`) after the turn completed makes the
agent node return an empty patch: no model call, no second AIMessage. A turn whose
model call failed still runs on resubmission, and a ReAct loop still continues after
its tools answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.integrations.langgraph import aagent_node, agent_node, state_schema
from ctxpolicy.state import user_turn
from tests.integrations.fakes import ModelDown, RecordingChatModel, replies
from tests.integrations.graphs import chat_graph, make_policy, open_saver

CONFIG = {"configurable": {"thread_id": "thread-resubmit"}}


def contents(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in messages]


def test_resubmitted_completed_turn_adds_no_second_answer(tmp_path: Path) -> None:
    model = RecordingChatModel(responses=replies("a1", "a2", "a3"))
    graph = chat_graph(PolicyEngine(make_policy()), model, open_saver(tmp_path / "c.sqlite"))
    first = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)
    again = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)  # e.g. after a resume
    assert contents(again["messages"]) == [("human", "q1"), ("ai", "a1")]
    assert [m.id for m in again["messages"]] == [m.id for m in first["messages"]]
    assert model.calls == 1  # the model was not called for the completed turn

    third = graph.invoke(user_turn("q2", turn_id="req-2"), CONFIG)  # the next turn still runs
    assert contents(third["messages"]) == [
        ("human", "q1"),
        ("ai", "a1"),
        ("human", "q2"),
        ("ai", "a2"),
    ]
    assert model.calls == 2


def test_same_human_message_id_on_a_new_graph_object_is_recognised(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    turn = HumanMessage("How many rows?", id="client-msg-7")
    first_model = RecordingChatModel(responses=replies("42"))
    chat_graph(PolicyEngine(make_policy()), first_model, open_saver(db)).invoke(
        {"messages": [turn]}, CONFIG
    )
    model = RecordingChatModel(responses=replies("a different answer"))
    graph = chat_graph(PolicyEngine(make_policy()), model, open_saver(db))
    state = graph.invoke({"messages": [turn]}, CONFIG)
    assert contents(state["messages"]) == [("human", "How many rows?"), ("ai", "42")]
    assert model.calls == 0
    assert graph.get_state(CONFIG).next == ()


def test_resubmission_after_a_failed_model_call_still_answers(tmp_path: Path) -> None:
    model = RecordingChatModel(responses=replies("a1"), fail_on={0})
    graph = chat_graph(PolicyEngine(make_policy()), model, open_saver(tmp_path / "c.sqlite"))
    with pytest.raises(ModelDown):
        graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)
    state = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)
    assert contents(state["messages"]) == [("human", "q1"), ("ai", "a1")]
    state = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)  # and once more: done
    assert contents(state["messages"]) == [("human", "q1"), ("ai", "a1")]
    assert model.calls == 2


def test_async_node_skips_a_completed_turn(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a1", "a2"))
    builder = StateGraph(state_schema(engine))
    builder.add_node("analyst", aagent_node(engine, name="analyst", system_prompt="S", model=model))
    builder.add_edge(START, "analyst")
    builder.add_edge("analyst", END)

    async def scenario() -> dict[str, Any]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke(user_turn("q1", turn_id="req-1"), CONFIG)
            result: dict[str, Any] = await graph.ainvoke(user_turn("q1", turn_id="req-1"), CONFIG)
            return result

    state = asyncio.run(scenario())
    assert contents(state["messages"]) == [("human", "q1"), ("ai", "a1")]
    assert model.calls == 1


def test_two_agents_in_sequence_each_answer_once(tmp_path: Path) -> None:
    engine = PolicyEngine(make_policy())
    first = RecordingChatModel(responses=replies("draft", "draft again"))
    second = RecordingChatModel(responses=replies("review", "review again"))
    builder = StateGraph(state_schema(engine))
    builder.add_node("writer", agent_node(engine, name="writer", system_prompt="W", model=first))
    builder.add_node("critic", agent_node(engine, name="critic", system_prompt="C", model=second))
    builder.add_edge(START, "writer")
    builder.add_edge("writer", "critic")
    builder.add_edge("critic", END)
    graph = builder.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))

    state = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)
    assert contents(state["messages"]) == [("human", "q1"), ("ai", "draft"), ("ai", "review")]
    state = graph.invoke(user_turn("q1", turn_id="req-1"), CONFIG)
    assert contents(state["messages"]) == [("human", "q1"), ("ai", "draft"), ("ai", "review")]
    assert (first.calls, second.calls) == (1, 1)


@tool
def count_rows(table: str) -> int:
    """Count the rows of a table."""
    return 3


class ToolCallingModel(RecordingChatModel):
    """Asks for ``count_rows`` first, then answers (tools are accepted and ignored)."""

    responses: list[BaseMessage] = Field(
        default_factory=lambda: [
            AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "count_rows",
                        "args": {"table": "t"},
                        "id": "call-1",
                        "type": "tool_call",
                    }
                ],
            ),
            AIMessage("t has 3 rows"),
        ]
    )

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def test_react_loop_continues_after_its_tools_and_skips_once_answered(tmp_path: Path) -> None:
    engine = PolicyEngine(make_policy())
    model = ToolCallingModel()
    builder = StateGraph(state_schema(engine))
    builder.add_node(
        "agent",
        agent_node(engine, name="agent", system_prompt="S", model=model, tools=[count_rows]),
    )
    builder.add_node("tools", ToolNode([count_rows]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))

    state = graph.invoke(user_turn("rows of t?", turn_id="req-1"), CONFIG)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][-1].content == "t has 3 rows"
    assert model.calls == 2
    state = graph.invoke(user_turn("rows of t?", turn_id="req-1"), CONFIG)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert model.calls == 2


# --------------------------------------------------------------------------- MapReduce
# Issue 32, finding 13: the MapReduce path had no "turn already answered" guard.


def mapreduce_run(tmp_path: Path, *, planner_knows_reducer: bool = True) -> tuple[Any, ...]:
    """planner → workers → reducer on SQLite; the models, to count their calls."""
    from ctxpolicy.integrations.langgraph import (
        add_mapreduce,
        mapreduce_planner_node,
        mapreduce_reducer_node,
        mapreduce_worker_node,
    )
    from tests.integrations.fakes import EchoWorkerModel

    engine = PolicyEngine(make_policy())
    planner = RecordingChatModel(responses=replies("- 数行数\n- check nulls", "- other plan"))
    worker = EchoWorkerModel()
    reducer = RecordingChatModel(responses=replies("最终答案 1", "final answer 2"))
    builder = StateGraph(state_schema(engine))
    entry, exit_ = add_mapreduce(
        builder,
        planner=mapreduce_planner_node(
            engine,
            name="planner",
            system_prompt="Split.",
            model=planner,
            reducer="reducer" if planner_knows_reducer else None,
        ),
        worker=mapreduce_worker_node(engine, name="worker", system_prompt="Do.", model=worker),
        reducer=mapreduce_reducer_node(
            engine, name="reducer", system_prompt="Merge.", model=reducer
        ),
    )
    builder.add_edge(START, entry)
    builder.add_edge(exit_, END)
    graph = builder.compile(checkpointer=open_saver(tmp_path / "mr.sqlite"))
    return graph, planner, worker, reducer


def test_mapreduce_resubmitted_turn_adds_nothing_and_calls_no_model(tmp_path: Path) -> None:
    graph, planner, worker, reducer = mapreduce_run(tmp_path)
    first = graph.invoke(user_turn("统计 orders 表", turn_id="req-1"), CONFIG)
    assert contents(first["messages"]) == [("human", "统计 orders 表"), ("ai", "最终答案 1")]

    again = graph.invoke(user_turn("统计 orders 表", turn_id="req-1"), CONFIG)
    assert contents(again["messages"]) == contents(first["messages"])
    assert [m.id for m in again["messages"]] == [m.id for m in first["messages"]]
    # the completed turn's plan and results stand; no model was called again
    assert again["mapreduce_tasks"] == first["mapreduce_tasks"]
    assert again["mapreduce_results"] == first["mapreduce_results"]
    assert (planner.calls, len(worker.seen), reducer.calls) == (1, 2, 1)
    assert graph.get_state(CONFIG).next == ()

    # the next turn still runs the whole MapReduce
    third = graph.invoke(user_turn("now customers", turn_id="req-2"), CONFIG)
    assert contents(third["messages"])[2:] == [("human", "now customers"), ("ai", "final answer 2")]
    assert (planner.calls, reducer.calls) == (2, 2)


def test_mapreduce_resubmission_on_a_new_graph_object_adds_nothing(tmp_path: Path) -> None:
    graph, _, _, _ = mapreduce_run(tmp_path)
    first = graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    # a restarted process: new graph, engine and models on the same checkpoint file
    graph, planner, worker, reducer = mapreduce_run(tmp_path)
    again = graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    assert contents(again["messages"]) == contents(first["messages"])
    assert (planner.calls, len(worker.seen), reducer.calls) == (0, 0, 0)


def test_mapreduce_reducer_alone_keeps_a_second_answer_out(tmp_path: Path) -> None:
    # a planner built without reducer= plans and maps the turn again; the reducer's own
    # guard (agent_node's) still adds no second answer
    graph, planner, _, reducer = mapreduce_run(tmp_path, planner_knows_reducer=False)
    first = graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    again = graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    assert contents(again["messages"]) == contents(first["messages"])
    assert (planner.calls, reducer.calls) == (2, 1)


def test_mapreduce_reducer_failure_then_resubmission_answers_once(tmp_path: Path) -> None:
    graph, _, _, reducer = mapreduce_run(tmp_path)
    reducer.fail_on = {0}
    with pytest.raises(ModelDown):
        graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    state = graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    assert contents(state["messages"]) == [("human", "profile orders"), ("ai", "最终答案 1")]
    state = graph.invoke(user_turn("profile orders", turn_id="req-1"), CONFIG)
    assert contents(state["messages"]) == [("human", "profile orders"), ("ai", "最终答案 1")]
    assert reducer.calls == 2  # the failed call and the answer; nothing after
