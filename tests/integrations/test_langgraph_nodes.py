"""agent_node details, persistence rules and unknown keys on real graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from pydantic import Field

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import PersistenceError, QueryPathError, UnknownProcessError
from ctxpolicy.integrations.langgraph import (
    agent_node,
    fan_out_tasks,
    init_context_engine,
    mapreduce_reducer_node,
    mapreduce_worker_node,
    state_schema,
)
from ctxpolicy.policy import Policy
from ctxpolicy.state import Blackboard, StateBuilder, UnknownStateKeyError
from tests.integrations.fakes import RecordingChatModel, replies
from tests.integrations.graphs import make_policy, open_saver

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"configurable": {"thread_id": "t"}}


def single_node_graph(node: Any, schema: type = Blackboard, saver: Any = None) -> Any:
    graph = StateGraph(schema)
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    graph.add_edge("n", END)
    return graph.compile(checkpointer=saver)


def test_persisting_a_runtime_only_layer_fails_the_node_and_writes_nothing(
    tmp_path: Path,
) -> None:
    policy = make_policy()

    def node(state: dict[str, Any]) -> dict[str, Any]:
        sb = StateBuilder(state, policy)
        sb.routing.activate("bad")
        sb.contexts.persist({"knowledge__context": "retrieved docs"})
        return sb.patch()

    graph = single_node_graph(node, saver=open_saver(tmp_path / "c.sqlite"))
    with pytest.raises(PersistenceError, match=r"'knowledge__context'.*runtime-only"):
        graph.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
    values = graph.get_state(CONFIG).values
    assert "knowledge__context" not in values
    assert "active_agent" not in values


def test_unknown_state_keys_raise_inside_a_graph() -> None:
    class WiderState(Blackboard, total=False):
        scratch: str

    def node(state: dict[str, Any]) -> dict[str, Any]:
        return StateBuilder(state).patch()

    graph = single_node_graph(node, schema=WiderState)
    with pytest.raises(UnknownStateKeyError, match="'scratch'"):
        graph.invoke({"scratch": "x"})
    # declaring the wider schema makes it legal
    ok = single_node_graph(lambda s: StateBuilder(s, schema=WiderState).patch(), WiderState)
    assert ok.invoke({"scratch": "x"})["scratch"] == "x"


def test_policy_persisted_custom_layer_survives_in_the_state(tmp_path: Path) -> None:
    data = make_policy().model_dump(mode="json", exclude_none=True)
    data["order"].insert(1, "profile__context")
    data["layers"]["profile__context"] = {
        "persist": True,
        "collector": {"type": "template", "template": "PROFILE v1"},
    }
    engine = PolicyEngine(Policy.model_validate(data))
    model = RecordingChatModel(responses=replies("a1"))
    node = agent_node(engine, name="analyst", system_prompt="S", model=model)
    graph = single_node_graph(node, state_schema(engine), open_saver(tmp_path / "c.sqlite"))
    state = graph.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    assert state["profile__context"] == "PROFILE v1"
    assert graph.get_state(CONFIG).values["profile__context"] == "PROFILE v1"
    assert "\n\nPROFILE v1\n\n" in model.seen[0][0].content  # in the one SystemMessage


def test_runtime_query_process_uses_the_assigned_task() -> None:
    data = make_policy().model_dump(mode="json", exclude_none=True)
    data["processes"]["delegate"] = {"checkpoint_messages": True, "query": "runtime"}
    engine = PolicyEngine(Policy.model_validate(data))
    model = RecordingChatModel(responses=replies("done"))
    node = agent_node(engine, name="helper", system_prompt="S", model=model, process="delegate")
    graph = single_node_graph(node)
    state = graph.invoke({"messages": [HumanMessage("q")], "assigned_task": "count rows"})
    assert model.seen[0][-1].content == "count rows"
    assert state["assigned_task"] is None
    # the runtime query is the turn's user input: kept in the history (issue 32, finding 3)
    assert [m.content for m in state["messages"]] == ["q", "count rows", "done"]
    assert state["messages"][-1].name == "helper"
    with pytest.raises(QueryPathError, match="assigned_task"):
        graph.invoke({"messages": [HumanMessage("q")]})


def test_agent_node_checks_the_process_when_built() -> None:
    engine = PolicyEngine(make_policy())
    with pytest.raises(UnknownProcessError):
        agent_node(
            engine,
            name="a",
            system_prompt="S",
            model=RecordingChatModel(responses=replies("x")),
            process="nope",
        )


def test_a_model_that_returns_no_ai_message_is_an_error() -> None:
    from langchain_core.runnables import RunnableLambda

    engine = PolicyEngine(make_policy())
    model: Any = RunnableLambda(lambda _: "text")
    node = agent_node(engine, name="a", system_prompt="S", model=model)
    with pytest.raises(TypeError, match="not an AIMessage"):
        single_node_graph(node).invoke({"messages": [HumanMessage("q")]})


class ToolAwareModel(RecordingChatModel):
    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.extend(tools)
        return self


@tool
def count_rows(table: str) -> int:
    """Count the rows of a table."""
    return 3


def test_tools_are_bound_to_the_model() -> None:
    engine = PolicyEngine(make_policy())
    model = ToolAwareModel(responses=replies("ok"))
    node = agent_node(engine, name="a", system_prompt="S", model=model, tools=[count_rows])
    state = single_node_graph(node).invoke({"messages": [HumanMessage("q")]})
    assert model.bound == [count_rows]
    assert state["messages"][-1].content == "ok"


def test_ai_reply_ids_are_stable_not_the_model_run_id() -> None:
    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=[AIMessage("a1", id="run-random")])
    state = single_node_graph(agent_node(engine, name="a", system_prompt="S", model=model)).invoke(
        {"messages": [HumanMessage("q", id="h")]}
    )
    assert state["messages"][-1].id.startswith("cp-")


def test_worker_without_task_and_reducer_with_missing_results_fail_clearly() -> None:
    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("x"))
    worker = mapreduce_worker_node(engine, name="w", system_prompt="S", model=model)
    with pytest.raises(QueryPathError, match="mapreduce_task"):
        single_node_graph(worker).invoke({"mapreduce_goal": "g"})
    reducer = mapreduce_reducer_node(engine, name="r", system_prompt="S", model=model)
    with pytest.raises(ValueError, match="task-2"):
        single_node_graph(reducer).invoke(
            {
                "mapreduce_tasks": [
                    {"id": "task-1", "description": "a"},
                    {"id": "task-2", "description": "b"},
                ],
                "mapreduce_results": [{"task_id": "task-1", "output": "x"}],
            }
        )


def test_fan_out_sends_task_goal_and_session_only() -> None:
    route = fan_out_tasks("w")
    sends = route(
        {
            "namespace": "ns",
            "messages": [HumanMessage("secret history")],
            "mapreduce_goal": "g",
            "mapreduce_tasks": [{"id": "t1", "description": "a"}],
        }
    )
    task = {"id": "t1", "description": "a"}
    assert [(s.node, s.arg) for s in sends] == [
        ("w", {"namespace": "ns", "mapreduce_goal": "g", "mapreduce_task": task})
    ]
    with pytest.raises(ValueError, match="no task"):
        route({"mapreduce_tasks": []})


# ----------------------------------------------------------------------------- init


def test_init_context_engine_from_file_with_the_central_switch() -> None:
    engine = init_context_engine(ROOT / "policies" / "base.yaml", enable_share_context=False)
    assert engine.policy.enable_share_context is False
    assert init_context_engine(ROOT / "policies" / "base.yaml").policy.enable_share_context


def test_init_context_engine_from_a_policy_and_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = init_context_engine(make_policy(), enable_share_context=False, services={"x": 1})
    assert engine.policy.enable_share_context is False
    assert engine.services["x"] == 1
    monkeypatch.setenv("CTXPOLICY_POLICY", str(ROOT / "policies" / "base.yaml"))
    assert init_context_engine().policy.name == "datapillar-base"
    monkeypatch.delenv("CTXPOLICY_POLICY")
    with pytest.raises(ValueError, match="CTXPOLICY_POLICY"):
        init_context_engine()


def test_history_messages_reach_the_model_as_given(tmp_path: Path) -> None:
    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a2"))
    prior: list[BaseMessage] = [HumanMessage("q1", id="h1"), AIMessage("a1", id="x1")]
    state = single_node_graph(agent_node(engine, name="a", system_prompt="S", model=model)).invoke(
        {"messages": [*prior, HumanMessage("q2", id="h2")]}
    )
    assert [m.id for m in model.seen[0][-3:]] == ["h1", "x1", "h2"]
    assert [m.content for m in state["messages"]] == ["q1", "a1", "q2", "a2"]


def test_async_agent_node_with_ainvoke_and_resume(tmp_path: Path) -> None:
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver

    from ctxpolicy.integrations.langgraph import aagent_node

    engine = PolicyEngine(make_policy())
    model = RecordingChatModel(responses=replies("a1", "a2"), fail_on={1})
    seen: list[str] = []
    node = aagent_node(
        engine, name="a", system_prompt="S", model=model, on_compose=lambda n, r: seen.append(n)
    )
    graph = single_node_graph(node, saver=InMemorySaver())

    async def scenario() -> dict[str, Any]:
        await graph.ainvoke({"messages": [HumanMessage("q1")]}, CONFIG)
        with pytest.raises(Exception, match="scripted failure"):
            await graph.ainvoke({"messages": [HumanMessage("q2")]}, CONFIG)
        return await graph.ainvoke(None, CONFIG)

    state = asyncio.run(scenario())
    assert [m.content for m in state["messages"]] == ["q1", "a1", "q2", "a2"]
    assert seen == ["a", "a", "a"]


def test_todo_written_by_one_node_reaches_the_next_agents_prompt() -> None:
    engine = init_context_engine(ROOT / "policies" / "base.yaml")
    model = RecordingChatModel(responses=replies("on it"))

    def planner(state: dict[str, Any]) -> dict[str, Any]:
        sb = StateBuilder(state, engine.policy)
        sb.todo.replace(["count rows", "check nulls"])
        sb.react.save_goal("profile orders")
        return sb.patch()

    graph = StateGraph(state_schema(engine))
    graph.add_node("plan", planner)
    graph.add_node("agent", agent_node(engine, name="agent", system_prompt="S", model=model))
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "agent")
    graph.add_edge("agent", END)
    state = graph.compile().invoke({"messages": [HumanMessage("profile orders")]})
    todo_blocks = [
        str(m.content).strip() for m in model.seen[0] if "Current plan:" in str(m.content)
    ]
    assert len(todo_blocks) == 1  # in the one SystemMessage (system_messages: auto)
    assert todo_blocks[0].endswith("\n\nCurrent plan:\n- count rows\n- check nulls")
    assert state["todo"] == ["count rows", "check nulls"]
    assert "todo__context" not in state  # runtime-only: rendered, never persisted
