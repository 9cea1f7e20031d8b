"""Seed 004: a multi-step task recorded as task memory, driven by a policy file, offline.

- `policies/seed004-tasks.yaml` gives the agent its file tools (root ``policies/docs``,
  read-only): `agent_node` binds them by default, `policy_tools` hands the same tools
  to the graph's ``ToolNode``; no Python wiring of roots or tools;
- a scripted langchain-core fake model lists the files, reads one and searches, then
  answers (no network);
- after the turn, each tool call answered by a ToolMessage is a task record in the
  memory service (action, parameters, result, success, parent task id);
- the memory service lives in a LangGraph store (SQLite here, Postgres in production):
  `TieredMemory.from_store` writes every tier through and restores it, so a restarted
  process (a new graph, engine and memory on the same files) finds the tasks again (a
  memory without a durable store is named by a warning when the engine is built);
- a second turn runs with ``context_strategy: minimal`` in the graph's input (no memory
  layer in the prompt);
- the tasks leave L1 and become L3 task summaries (action / parameters / result).

Run:  .venv/bin/python examples/seed004_tasks.py
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.sqlite import SqliteStore
from pydantic import Field

from ctxpolicy.integrations.langgraph import (
    agent_node,
    init_context_engine,
    policy_tools,
    state_schema,
)
from ctxpolicy.memory import TieredMemory

POLICY = Path(__file__).resolve().parents[1] / "policies" / "seed004-tasks.yaml"


class ToolCallingFake(FakeMessagesListChatModel):
    """A scripted model that accepts ``bind_tools`` (and remembers the tool names)."""

    bound: list[str] = Field(default_factory=list)
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound = [t.name for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def build(memory: TieredMemory, model: ToolCallingFake, saver: SqliteSaver) -> Any:
    engine = init_context_engine(POLICY, services={"memory": memory})
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "analyst", agent_node(engine, name="analyst", system_prompt="You answer.", model=model)
    )
    graph.add_node("tools", ToolNode(policy_tools(engine, "react")))
    graph.add_edge(START, "analyst")
    graph.add_conditional_edges("analyst", tools_condition)
    graph.add_edge("tools", "analyst")
    return graph.compile(checkpointer=saver)


def open_memory(folder: Path) -> TieredMemory:
    """The memory service, restored from (and written through to) a SQLite store."""
    connection = sqlite3.connect(
        str(folder / "store.sqlite"), check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(connection)
    store.setup()
    # small L1, so the tasks leave L1 and get L3 summaries
    return TieredMemory.from_store(store, namespace=("seed004", "analyst"), l1_size=4)


def main() -> None:
    model = ToolCallingFake(
        responses=[
            call("list_files", "t1", pattern="*.md"),
            call("read_block", "t2", path="handbook.md", block_id="Goals"),
            call("search", "t3", pattern="dw.orders"),
            call("read_file", "t4", path="../seed004-tasks.yaml"),  # refused: outside the root
            AIMessage("Use the curated dw.* tables; dw.orders is the order fact table."),
            AIMessage("Done."),
        ]
    )
    with tempfile.TemporaryDirectory() as tmp:
        saver = SqliteSaver(
            sqlite3.connect(str(Path(tmp) / "ckpt.sqlite"), check_same_thread=False)
        )
        memory = open_memory(Path(tmp))
        app = build(memory, model, saver)
        config: dict[str, Any] = {"configurable": {"thread_id": "task-1"}}
        state = app.invoke({"messages": [HumanMessage("Which table has orders?", id="u1")]}, config)
        print("bound tools:", model.bound)
        print("messages:", [m.type for m in state["messages"]])
        print("tasks:")
        for task in memory.tasks():
            outcome = "ok" if task.success else "failed"
            params = dict(task.parameters)
            print(f"  {task.task_id} {task.action}{params} {outcome} parent={task.parent_task_id}")
        # a restarted process: memory, engine and graph rebuilt on the same files
        memory = open_memory(Path(tmp))
        app = build(memory, model, saver)
        print("tasks after a restart:", [task.task_id for task in memory.tasks()])
        app.invoke(
            {
                "messages": [HumanMessage("Thanks, anything else?", id="u2")],
                "context_strategy": "minimal",
            },
            config,
        )
        last = model.prompts[-1]
        print(
            "memory layer in the minimal call:",
            any("[tool_success]" in str(m.content) for m in last),
        )
        print("L3 task summaries:")
        for summary in memory.get_l3():
            fields = summary.metadata.get("task_summary")
            if fields:
                print(f"  {fields['action']} | {fields['param_summary']} | {summary.content}")


if __name__ == "__main__":
    main()
