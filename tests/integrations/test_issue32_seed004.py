"""Issue 32, seed 004 (tiers and tasks) inside a real LangGraph graph.

SQLite checkpointer and store; "a restarted process" is a new graph, engine, memory and
store connection on the same files.
"""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.sqlite import SqliteStore

from ctxpolicy.errors import MissingServiceError
from ctxpolicy.integrations.langgraph import (
    agent_node,
    init_context_engine,
    policy_tools,
    state_schema,
)
from ctxpolicy.loading import load_policy
from ctxpolicy.memory import MemoryNotDurableWarning, TieredMemory
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import open_saver

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "policies" / "seed004-tasks.yaml"
NAMESPACE = ("seed004", "analyst")


class ToolModel(RecordingChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def text_of(prompt: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in prompt)


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def open_store(path: Path) -> SqliteStore:
    store = SqliteStore(sqlite3.connect(str(path), check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def build(engine: Any, model: RecordingChatModel, saver: Any) -> Any:
    graph = StateGraph(state_schema(engine))
    graph.add_node("analyst", agent_node(engine, name="analyst", system_prompt="S", model=model))
    graph.add_node("tools", ToolNode(policy_tools(engine, "react")))
    graph.add_edge(START, "analyst")
    graph.add_conditional_edges("analyst", tools_condition)
    graph.add_edge("tools", "analyst")
    return graph.compile(checkpointer=saver)


CONFIG: Any = {"configurable": {"thread_id": "task-1"}}


def test_a_memory_service_without_a_durable_store_is_named_at_construction() -> None:
    with pytest.warns(MemoryNotDurableWarning, match=r"'memory__context'.*no store"):
        init_context_engine(TASKS, services={"memory": TieredMemory()})
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryNotDurableWarning)
        # no service: no durability to warn about (building fails on the missing service)
        with pytest.raises(MissingServiceError):
            init_context_engine(TASKS)


def test_a_memory_service_on_a_store_survives_a_restart(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryNotDurableWarning)  # the durable pattern
        memory = TieredMemory.from_store(
            open_store(tmp_path / "store.sqlite"), namespace=NAMESPACE, l1_size=4
        )
        engine = init_context_engine(TASKS, services={"memory": memory})
    model = ToolModel(
        responses=[
            call("list_files", "t1", pattern="*.md"),
            call("search", "t2", pattern="dw.orders"),
            AIMessage("TASK-ANSWER dw.orders is the order fact table."),
        ]
    )
    app = build(engine, model, open_saver(tmp_path / "ckpt.sqlite"))
    app.invoke({"messages": [HumanMessage("Which table has orders?", id="u1")]}, CONFIG)
    tasks = [(t.task_id, t.action, t.success) for t in memory.tasks()]
    l1 = [i.content for i in memory.get_l1()]
    assert [t[0] for t in tasks] == ["t1", "t2"]

    # a restarted process: the service is rebuilt from the same store
    again = TieredMemory.from_store(
        open_store(tmp_path / "store.sqlite"), namespace=NAMESPACE, l1_size=4
    )
    assert [(t.task_id, t.action, t.success) for t in again.tasks()] == tasks
    assert [i.content for i in again.get_l1()] == l1  # before: L1 came back empty
    engine = init_context_engine(TASKS, services={"memory": again})
    model = ToolModel(responses=[AIMessage("done")])
    app = build(engine, model, open_saver(tmp_path / "ckpt.sqlite"))
    app.invoke({"messages": [HumanMessage("and the answer again?", id="u2")]}, CONFIG)
    assert "TASK-ANSWER" in text_of(model.seen[-1])


def test_context_strategy_in_the_graph_input_reaches_the_memory_layer(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemoryNotDurableWarning)
        memory = TieredMemory()
        memory.add("MEM-MARK the deploy region is eu-west-3", kind="user")
        engine = init_context_engine(TASKS, services={"memory": memory})
    model = ToolModel(responses=[AIMessage("a"), AIMessage("b")])
    app = build(engine, model, open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": [HumanMessage("region?")], "context_strategy": "minimal"}, CONFIG)
    assert "MEM-MARK" not in text_of(model.seen[-1])  # before: dropped, balanced applied
    assert app.get_state(CONFIG).values["context_strategy"] == "minimal"
    app.invoke({"messages": [HumanMessage("region?")], "context_strategy": "balanced"}, CONFIG)
    assert "MEM-MARK" in text_of(model.seen[-1])


L2_POLICY = """version: 1
name: l2-rule
model: {{context_window: 16000, tokenizer: cl100k_base}}
budget: {{ratios: {{memory__context: 0.3}}}}
order: [system_prompt, memory__context, checkpoint_messages, query]
layers:
  memory__context:
    collector:
      type: memory
      tier: l2
      tiers: {{l1: 2, l2: 5, l2_policy: {rule}}}
processes:
  react: {{query: checkpoint, checkpoint_messages: true}}
"""


@pytest.mark.parametrize(("rule", "kept"), [("refresh", False), ("seed", True)])
def test_the_l2_rule_is_set_from_the_policy(tmp_path: Path, rule: str, kept: bool) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(L2_POLICY.format(rule=rule), encoding="utf-8")
    assert load_policy(path).layer("memory__context").collector.tiers.l2_policy == rule  # type: ignore[union-attr]
    engine = init_context_engine(path)
    model = RecordingChatModel(responses=[AIMessage(f"ok {i}") for i in range(3)])
    graph = StateGraph(state_schema(engine))
    graph.add_node("analyst", agent_node(engine, name="analyst", system_prompt="S", model=model))
    graph.add_edge(START, "analyst")
    app = graph.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))
    app.invoke({"messages": [HumanMessage("The staging DB port is 5432.")]}, CONFIG)
    app.invoke({"messages": [HumanMessage("Correction: the staging DB port is now 6543.")]}, CONFIG)
    app.invoke({"messages": [HumanMessage("which port?")]}, CONFIG)
    working_set = next(  # the memory layer (the history holds both statements anyway)
        part
        for m in model.seen[-1]
        for part in str(m.content).split("\n\n")  # one merged SystemMessage by default
        if part.startswith("- [user]")
    )
    assert "6543" in working_set
    # refresh: the correction replaced the older statement; seed: both stay in L2
    assert ("5432" in working_set) is kept
