"""Recall inside a real LangGraph ReAct graph: fed by the nodes, once, across resumes.

A real ``StateGraph`` with ``agent_node`` and LangGraph's ``ToolNode``, the SQLite
checkpointer and a SQLite recall index in files; only the chat model is a fake.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from ctxpolicy import PolicyEngine
from ctxpolicy.integrations.langgraph import agent_node, state_schema
from tests.integrations.fakes import ModelDown, RecordingChatModel
from tests.integrations.graphs import open_saver, time_travel_deploy

FACT = "02:41 checkout ERROR pool exhausted on pg-replica-7"


@tool
def get_logs(service: str) -> str:
    """The last log lines of a service."""
    lines = [f"02:{i:02d} {service} INFO request ok latency={i}ms" for i in range(60)]
    lines.insert(41, FACT)
    return "\n".join(lines)


class ToolModel(RecordingChatModel):
    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.extend(tools)
        return self


def script(chat_turns: int) -> list[AIMessage]:
    call = {"name": "get_logs", "args": {"service": "checkout"}, "id": "call-logs"}
    out = [AIMessage("", tool_calls=[call]), AIMessage("The checkout pool ran dry last night.")]
    out += [
        AIMessage(f"Batch {i} is fine; " + "all rows were loaded. " * 20) for i in range(chat_turns)
    ]
    out.append(AIMessage("It was pg-replica-7."))
    return out


def build(tmp_path: Path, model: ToolModel, long_session) -> tuple[Any, PolicyEngine]:
    policy = long_session(window=3000, recall=f"backend: sqlite\npath: {tmp_path / 'recall.db'}")
    engine = PolicyEngine.from_file(policy)
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent", agent_node(engine, name="agent", system_prompt="S", model=model, tools=[get_logs])
    )
    graph.add_node("tools", ToolNode([get_logs]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=open_saver(tmp_path / "checkpoints.db")), engine


def indexed(engine: PolicyEngine, thread: str) -> Counter[str]:
    index = engine.recaller("recall__context").index
    return Counter(mid for _, mid, _ in index.indexed_messages(thread))


def run_session(app: Any, chat_turns: int, config: dict[str, Any]) -> dict[str, Any]:
    app.invoke({"messages": [HumanMessage("Why did checkout fail last night?")]}, config)
    for i in range(chat_turns):
        app.invoke({"messages": [HumanMessage(f"How did batch {i} go?")]}, config)
    return app.invoke({"messages": [HumanMessage("Which replica ran out of connections?")]}, config)


def test_a_buried_tool_line_comes_back_and_every_message_is_indexed_once(
    tmp_path: Path, long_session
) -> None:
    model = ToolModel(responses=script(12))
    app, engine = build(tmp_path, model, long_session)
    config = {"configurable": {"thread_id": "ops-1"}}
    state = run_session(app, 12, config)
    last_prompt = "\n".join(str(m.content) for m in model.seen[-1])
    assert FACT in last_prompt
    # the tool dump itself is no longer in the kept history: the line was recalled
    assert not any(m.type == "tool" for m in model.seen[-1])
    ids = [m.id for m in state["messages"]]
    counts = indexed(engine, "ops-1")
    assert set(counts) == set(ids)  # every message of the thread, the last answer too
    assert set(counts.values()) == {1}


def test_a_resume_after_a_failed_model_call_indexes_nothing_twice(
    tmp_path: Path, long_session
) -> None:
    model = ToolModel(responses=script(6), fail_on={5})
    app, engine = build(tmp_path, model, long_session)
    config = {"configurable": {"thread_id": "ops-2"}}
    with pytest.raises(ModelDown):
        run_session(app, 6, config)
    app.invoke(None, config)  # resume the failed turn from its checkpoint
    before = indexed(engine, "ops-2")
    assert set(before.values()) == {1}
    # a new engine (another process) on the same index and checkpoints continues
    model2 = ToolModel(responses=script(0)[-1:] * 3)
    app2, engine2 = build(tmp_path, model2, long_session)
    state = app2.invoke(
        {"messages": [HumanMessage("Which replica ran out of connections?")]}, config
    )
    counts = indexed(engine2, "ops-2")
    assert set(counts.values()) == {1}
    assert set(counts) == {m.id for m in state["messages"]}
    assert FACT in "\n".join(str(m.content) for m in model2.seen[-1])


def test_a_fact_corrected_by_time_travel_is_recalled_as_corrected(
    tmp_path: Path, long_session
) -> None:
    """LangGraph time travel: fork before the reply, edit the human message under its id.

    Many turns later the corrected fact is recalled and the one the user took back is not
    (neither the edited message's old text nor the abandoned reply).
    """
    turns = 16
    replies = [AIMessage("Deploying the nightly load to walrus-3.")]
    replies += [AIMessage("Deploying the nightly load to narwhal-5.")]
    replies += [
        AIMessage(f"Batch {i} is fine; " + "all rows were loaded. " * 20) for i in range(turns)
    ]
    replies += [AIMessage("done")]
    model = ToolModel(responses=replies)
    app, engine = build(tmp_path, model, long_session)
    time_travel_deploy(app, {"configurable": {"thread_id": "ops-3"}}, turns=turns)
    last_prompt = "\n".join(str(m.content) for m in model.seen[-1])
    assert not any(m.id == "deploy" for m in model.seen[-1])  # out of the kept history
    assert "narwhal-5" in last_prompt  # recalled
    assert "walrus-3" not in last_prompt
    index = engine.recaller("recall__context").index
    assert index.search("ops-3", ["walrus"], limit=5) == []
