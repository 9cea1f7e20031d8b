"""The memory the engine keeps for a ``tiers`` layer, inside a real LangGraph graph.

A real ``StateGraph`` with ``agent_node`` and the SQLite checkpointer; only the chat
model is a fake (langchain-core's, recording what it was sent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from ctxpolicy import PolicyEngine
from ctxpolicy.integrations.langgraph import agent_node, state_schema
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import open_saver, time_travel_deploy
from tests.memory.test_owned_memory import POLICY


def build(tmp_path: Path, model: RecordingChatModel) -> tuple[Any, PolicyEngine]:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY, encoding="utf-8")
    engine = PolicyEngine.from_file(path)
    graph = StateGraph(state_schema(engine))
    graph.add_node("agent", agent_node(engine, name="agent", system_prompt="S", model=model))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=open_saver(tmp_path / "checkpoints.db")), engine


def test_a_fact_corrected_by_time_travel_is_remembered_as_corrected(tmp_path: Path) -> None:
    """LangGraph time travel: fork before the reply, edit the human message under its id.

    Many turns later the memory layer shows the corrected fact and neither shows nor
    finds the one the user took back, nor the reply of the abandoned branch that
    repeated it (docs/memory.md, 'Edits').
    """
    turns = 16
    replies = [AIMessage("Deploying the nightly load to walrus-3.")]
    replies += [AIMessage("Deploying the nightly load to narwhal-5.")]
    replies += [
        AIMessage(f"Batch {i} is fine; " + "all rows were loaded. " * 40) for i in range(turns)
    ]
    replies += [AIMessage("narwhal-5")]
    model = RecordingChatModel(responses=replies)
    app, engine = build(tmp_path, model)
    time_travel_deploy(app, {"configurable": {"thread_id": "ops-3"}}, turns=turns)
    last_prompt = "\n".join(str(m.content) for m in model.seen[-1])
    assert not any(m.id == "deploy" for m in model.seen[-1])  # out of the kept history
    assert "narwhal-5" in last_prompt  # from the memory layer
    assert "walrus-3" not in last_prompt
    (memory,) = engine._memories.values()
    assert memory.search("walrus", 5) == []
    assert not any("walrus" in item.content for item in memory.get_l1() + memory.get_l2())
    found = [h.content for h in memory.search("which replica", 5)]
    assert "Deploy to replica narwhal-5." in found
    assert not any("walrus" in text for text in found)
    # one summary of the message, of the version the history holds
    summaries = [i.content for i in memory.get_l3() if i.id == "deploy"]
    assert summaries == ["Deploy to replica narwhal-5."]
