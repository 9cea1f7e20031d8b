"""The memory the engine keeps for a ``tiers`` layer, inside a real LangGraph graph.

A real ``StateGraph`` with ``agent_node`` and the SQLite checkpointer; only the chat
model is a fake (langchain-core's, recording what it was sent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from ctxpolicy import PolicyEngine
from ctxpolicy.integrations.langgraph import agent_node, state_schema
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import open_saver

POLICY = """\
version: 1
name: owned-memory-graph
model: {context_window: 3000, tokenizer: cl100k_base}
budget:
  output_reserve: 0.0
  ratios: {system_prompt: 0.05, memory__context: 0.35, checkpoint_messages: 0.5, query: 0.1}
order: [system_prompt, memory__context, checkpoint_messages, query]
layers:
  memory__context:
    shared: false
    collector:
      type: memory
      strategy: comprehensive
      tiers: {l1: 4, l2: 10, l3: 50}
processes:
  react: {checkpoint_messages: true, share_context: true, query: checkpoint}
default_process: react
"""


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
    config = {"configurable": {"thread_id": "ops-3"}}
    app.invoke({"messages": [HumanMessage("Deploy to replica walrus-3.", id="deploy")]}, config)
    fork = next(
        s
        for s in app.get_state_history(config)
        if s.next == ("agent",) and s.values["messages"][-1].id == "deploy"
    )
    forked = app.update_state(
        fork.config, {"messages": [HumanMessage("Deploy to replica narwhal-5.", id="deploy")]}
    )
    app.invoke(None, forked)
    for i in range(turns):
        app.invoke({"messages": [HumanMessage(f"How did batch {i} go?")]}, config)
    app.invoke({"messages": [HumanMessage("Which replica did the nightly load go to?")]}, config)
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
