"""Seed 003: "everything is a file", driven by a policy file, on a real LangGraph graph.

- `policies/seed003-docs.yaml` declares it all: a ``files`` layer over ``policies/docs/``
  (Markdown blocks and JSON keys, labelled with file and lines), inline references in
  the user's input (``layers.query.references``), read-only file tools (``tools:``) and
  ``checkpoint_messages.curate: true`` with ``dismiss_memory`` in ``tools.allow``;
- turn 1: the user's input carries ``[handbook.md#SQL style]``; the prompt holds the
  referenced block once, right after the input, while the stored HumanMessage keeps
  its text; the model calls ``read_block`` and ``read_file`` through the policy's tools
  (run by the graph's ``ToolNode``);
- turn 2: the model dismisses the ``read_file`` result with ``dismiss_memory``; the
  next call shows it as a placeholder (the state keeps the full result);
- turn 3: a new graph object on the same SQLite checkpoint file (a restore): the
  dismissal still applies, because it is part of the checkpointed history.

The model is a scripted langchain-core fake (a ``BaseChatModel``; no network). The
policy declares every tool the agent gets, ``dismiss_memory`` included: `agent_node`
binds them and ``ToolNode(policy_tools(engine))`` runs them; nothing is added in code.

Run:  .venv/bin/python examples/seed003_docs.py
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.integrations.langgraph import (
    agent_node,
    init_context_engine,
    policy_tools,
    state_schema,
)

POLICY = Path(__file__).resolve().parents[1] / "policies" / "seed003-docs.yaml"
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "docs-1"}}


class ToolCallingFake(FakeMessagesListChatModel):
    """A scripted chat model that accepts ``bind_tools`` and keeps every prompt."""

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


def build(
    engine: PolicyEngine, model: ToolCallingFake, db: Path, reports: list[ComposeResult]
) -> Any:
    """The graph: agent ⇄ tools, on a SQLite checkpointer at ``db``."""
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(  # binds the policy's tools (its `tools:` key)
            engine,
            name="agent",
            system_prompt="You answer questions about the Datapillar warehouse.",
            model=model,
            on_compose=lambda name, result: reports.append(result),
        ),
    )
    graph.add_node("tools", ToolNode(policy_tools(engine)))  # the same tools, run
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    saver = SqliteSaver(sqlite3.connect(str(db), check_same_thread=False))
    return graph.compile(checkpointer=saver)


def show(label: str, prompt: list[BaseMessage], result: ComposeResult) -> None:
    """What the model saw in one call: one line per message, plus the report's notes."""
    print(f"--- {label}")
    for message in prompt:
        text = str(message.content).replace("\n", " ⏎ ")
        if isinstance(message, AIMessage) and message.tool_calls:
            text = "calls " + ", ".join(f"{c['name']}{c['args']}" for c in message.tool_calls)
        text = text if len(text) <= 110 else text[:107] + "..."
        print(f"  {message.type:>6}: {text}")
    for ref in result.report.layer("query").references:
        print(f"  [query reference] {ref.ref} -> {ref.file} lines {ref.lines}")
    for note in result.report.layer("checkpoint_messages").notes:
        if note.startswith("curated"):
            print(f"  [history] {note}")


class Run(NamedTuple):
    """What `run` observed: the bound tools, each model call, the final state."""

    bound: list[str]
    calls: list[tuple[str, list[BaseMessage], ComposeResult]]
    state: dict[str, Any]


def run() -> Run:
    """Three turns on one thread, the third on a restored graph."""
    engine = init_context_engine(POLICY)
    model = ToolCallingFake(
        responses=[
            # turn 1: look things up through the policy's tools, then answer
            call("read_block", "r1", path="handbook.md", block_id="数据规范/时区"),
            call("read_file", "r2", path="warehouse.json"),
            AIMessage("Join dw.orders o with dw.customers c, qualify every column; times are UTC."),
            # turn 2: the warehouse dump is not needed any more
            call("dismiss_memory", "d1", target_message_id="r2", summary="schemas noted"),
            AIMessage("Dropped the warehouse dump from my context."),
            # turn 3 (after the restore)
            AIMessage("Still: qualify columns, UTC timestamps."),
        ]
    )
    reports: list[ComposeResult] = []
    calls: list[tuple[str, list[BaseMessage], ComposeResult]] = []
    turns = [
        ("turn 1", "How do I join orders and customers? [handbook.md#SQL style]", False),
        ("turn 2", "Thanks. Drop the warehouse dump, you have what you need.", False),
        ("turn 3 (restored)", "Remind me of the rules.", True),
    ]
    state: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ckpt.sqlite"
        app = build(engine, model, db, reports)
        for label, text, restore in turns:
            if restore:  # a new graph object (and connection) on the same checkpoint file
                app = build(engine, model, db, reports)
            first = len(model.prompts)
            state = app.invoke({"messages": [HumanMessage(text)]}, CONFIG)
            calls.extend(
                (f"{label}, call {n - first + 1}", model.prompts[n], reports[n])
                for n in range(first, len(model.prompts))
            )
    return Run(model.bound, calls, state)


def main() -> None:
    result = run()
    print("bound tools:", result.bound)
    for label, prompt, report in result.calls:
        show(label, prompt, report)
    messages = result.state["messages"]
    stored = next(m for m in messages if getattr(m, "tool_call_id", None) == "r2")
    print("state keeps the dismissed result:", '"engine": "postgres"' in str(stored.content))
    human = next(m for m in messages if isinstance(m, HumanMessage))
    print("stored input unchanged:", repr(human.content))


if __name__ == "__main__":
    main()
