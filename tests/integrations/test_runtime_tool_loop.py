"""A ``query: runtime`` agent in a ReAct tool loop shows its question once per prompt.

Real LangGraph graph (agent → ToolNode → agent) on the SQLite checkpointer; the model
is a langchain-core fake that asks for a tool, then answers. The turn keeps the runtime
question in the history as its HumanMessage; a pass back from the tools must not add it
again through the query layer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.integrations.langgraph import aagent_node, agent_node, state_schema
from ctxpolicy.policy import Policy
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import make_policy, open_saver

CONFIG = {"configurable": {"thread_id": "runtime-loop"}}
QUESTION = "表 t 有多少行? how many rows has table t?"


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
                    {"name": "count_rows", "args": {"table": "t"}, "id": "c1", "type": "tool_call"}
                ],
            ),
            AIMessage("t 有 3 行"),
        ]
    )

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def runtime_engine() -> PolicyEngine:
    data = make_policy().model_dump(mode="json", exclude_none=True)
    data["processes"]["delegate"] = {"checkpoint_messages": True, "query": "runtime"}
    return PolicyEngine(Policy.model_validate(data))


def build(node_factory: Any, engine: PolicyEngine, model: Any, saver: Any) -> Any:
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        node_factory(
            engine,
            name="helper",
            system_prompt="S",
            model=model,
            process="delegate",
            tools=[count_rows],
        ),
    )
    graph.add_node("tools", ToolNode([count_rows]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def occurrences(prompt: list[BaseMessage]) -> int:
    return sum(str(m.content).count(QUESTION) for m in prompt)


def test_the_runtime_question_is_sent_once_in_every_pass_of_a_tool_loop(tmp_path: Path) -> None:
    model = ToolCallingModel()
    app = build(agent_node, runtime_engine(), model, open_saver(tmp_path / "c.sqlite"))
    state = app.invoke(
        {"messages": [HumanMessage("earlier turn")], "assigned_task": QUESTION}, CONFIG
    )
    assert model.calls == 2  # asked for the tool, then answered
    assert [occurrences(prompt) for prompt in model.seen] == [1, 1]
    # the pass back from the tools: the turn's tool call and result, then the question
    assert [(m.type, str(m.content)) for m in model.seen[1][1:]] == [
        ("human", "earlier turn"),
        ("ai", ""),
        ("tool", "3"),
        ("human", QUESTION),
    ]
    # the history holds the question once, before the turn's tool call and answer
    assert [(m.type, str(m.content)) for m in state["messages"]] == [
        ("human", "earlier turn"),
        ("human", QUESTION),
        ("ai", ""),
        ("tool", "3"),
        ("ai", "t 有 3 行"),
    ]


def test_async_node_sends_the_runtime_question_once_per_pass(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    model = ToolCallingModel()

    async def scenario() -> dict[str, Any]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            app = build(aagent_node, runtime_engine(), model, saver)
            result: dict[str, Any] = await app.ainvoke({"assigned_task": QUESTION}, CONFIG)
            return result

    state = asyncio.run(scenario())
    assert [occurrences(prompt) for prompt in model.seen] == [1, 1]
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]


def test_a_summary_in_the_pass_back_from_the_tools_keeps_the_question_in_place(
    tmp_path: Path,
) -> None:
    data = make_policy(window=1200, overflow="summarize", redistribute=False).model_dump(
        mode="json", exclude_none=True
    )
    data["processes"]["delegate"] = {"checkpoint_messages": True, "query": "runtime"}
    model = ToolCallingModel()
    summaries: list[int] = []  # the model calls made when each summary was asked for

    def summarize(messages: Any, previous: str | None) -> str:
        summaries.append(model.calls)
        return f"summary of {len(messages)} messages"

    engine = PolicyEngine(Policy.model_validate(data), services={"summarizer": summarize})
    app = build(agent_node, engine, model, open_saver(tmp_path / "c.sqlite"))
    earlier: list[BaseMessage] = []
    for i in range(6):
        earlier += [HumanMessage(f"旧问题 {i} " + "word " * 60), AIMessage(f"old answer {i}")]
    state = app.invoke({"messages": earlier, "assigned_task": QUESTION}, CONFIG)
    assert 1 in summaries, "the pass back from the tools never summarized"
    assert [occurrences(prompt) for prompt in model.seen] == [1, 1]
    kinds = [(m.type, str(m.content)) for m in state["messages"]]
    assert sum(text == QUESTION for _, text in kinds) == 1
    assert kinds[-4:] == [("human", QUESTION), ("ai", ""), ("tool", "3"), ("ai", "t 有 3 行")]
