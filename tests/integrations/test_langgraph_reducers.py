"""Reducer rules and re-runs on real graphs: tool loops, parallel writers, forks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Send
from pydantic import Field

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.integrations.langgraph import agent_node, state_schema
from ctxpolicy.state import Blackboard, StateBuilder
from tests.integrations.fakes import RecordingChatModel, replies
from tests.integrations.graphs import chat_graph, make_policy, open_saver

CONFIG = {"configurable": {"thread_id": "r"}}


@tool
def count_rows(table: str) -> int:
    """Count the rows of a table."""
    return 42


class ToolModel(RecordingChatModel):
    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.extend(tools)
        return self


def test_react_tool_loop_keeps_tool_call_pairs_in_the_prompt(tmp_path: Path) -> None:
    engine = PolicyEngine(make_policy())
    call = {"name": "count_rows", "args": {"table": "orders"}, "id": "call-1"}
    model = ToolModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("42 rows")])
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(engine, name="agent", system_prompt="S", model=model, tools=[count_rows]),
    )
    graph.add_node("tools", ToolNode([count_rows]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))

    state = app.invoke({"messages": [HumanMessage("how many orders?")]}, CONFIG)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    second_prompt = model.seen[1]
    assert [m.type for m in second_prompt[-3:]] == ["human", "ai", "tool"]
    assert second_prompt[-1].tool_call_id == "call-1"
    assert state["messages"][-1].content == "42 rows"


def test_parallel_nodes_record_deliverables_without_conflict_or_duplicates() -> None:
    def fan(state: dict[str, Any]) -> list[Send]:
        return [Send("save", {"assigned_task": k}) for k in ("a.md", "b.md", "a.md")]

    def save(state: dict[str, Any]) -> dict[str, Any]:
        sb = StateBuilder(state)
        sb.deliverables.record_saved(state["assigned_task"])
        return sb.patch()

    graph = StateGraph(Blackboard)
    graph.add_node("start", lambda s: {})
    graph.add_node("save", save)
    graph.add_edge(START, "start")
    graph.add_conditional_edges("start", fan, ["save"])
    graph.add_edge("save", END)
    state = graph.compile().invoke({"deliverable_keys": ["a.md"]})
    assert sorted(state["deliverable_keys"]) == ["a.md", "b.md"]


def test_replaying_a_turn_from_an_earlier_checkpoint_does_not_duplicate(tmp_path: Path) -> None:
    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a1", "a1"))
    graph = chat_graph(engine, model, open_saver(tmp_path / "c.sqlite"))
    graph.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    before_agent = next(s for s in graph.get_state_history(CONFIG) if s.next == ("analyst",))
    state = graph.invoke(None, before_agent.config)  # re-run the node on the restored state
    assert [m.content for m in state["messages"]] == ["q1", "a1"]
    assert len(model.seen) == 2
    assert [m.content for m in model.seen[1] if m.type == "human"] == ["q1"]


def test_at_least_once_fan_out_still_gives_one_result_per_task() -> None:
    from ctxpolicy.integrations.langgraph import fan_out_tasks

    route = fan_out_tasks("work")

    def plan(state: dict[str, Any]) -> dict[str, Any]:
        sb = StateBuilder(state)
        sb.mapreduce.init_plan("g", None, ["a", "b"])
        return sb.patch()

    def twice(state: dict[str, Any]) -> list[Send]:
        return route(state) + route(state)  # every task delivered twice

    def work(state: dict[str, Any]) -> dict[str, Any]:
        sb = StateBuilder(state)
        task = sb.mapreduce.snapshot().task
        assert task is not None
        sb.mapreduce.append_result({"task_id": task["id"], "output": task["description"]})
        return sb.patch()

    graph = StateGraph(Blackboard)
    graph.add_node("plan", plan)
    graph.add_node("work", work)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", twice, ["work"])
    graph.add_edge("work", END)
    state = graph.compile().invoke({"mapreduce_results": [{"task_id": "stale", "output": "x"}]})
    assert sorted(r["task_id"] for r in state["mapreduce_results"]) == ["task-1", "task-2"]
