"""Memory curation in a running graph: ``dismiss_memory`` applies to every later compose."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from ctxpolicy.blocks.curation import CurationLog
from ctxpolicy.blocks.tools import create_file_tools
from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.integrations.langgraph import agent_node, state_schema
from ctxpolicy.policy import Policy
from tests.integrations.fakes import RecordingChatModel
from tests.integrations.graphs import make_policy, open_saver

CONFIG = {"configurable": {"thread_id": "cur"}}
BODY = "BODY-OF-THE-FILE that turned out useless"
PLACEHOLDER = "[read notes.md — dismissed: not relevant]"


class ToolModel(RecordingChatModel):
    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.extend(tools)
        return self


def _engine(*, curate: bool = True) -> PolicyEngine:
    data = make_policy().to_data()
    if curate:
        data["layers"]["checkpoint_messages"] = {"curate": True}
    return PolicyEngine(Policy.model_validate(data))


def _graph(engine: PolicyEngine, model: ToolModel, docs: Path, saver: Any, reports: list) -> Any:
    tools = create_file_tools(docs, curation_log=CurationLog())
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(
            engine,
            name="agent",
            system_prompt="S",
            model=model,
            tools=tools,
            on_compose=lambda name, result: reports.append(result),
        ),
    )
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def _turn_one(tmp_path: Path, engine: PolicyEngine) -> tuple[ToolModel, dict, list]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text(BODY + "\n", encoding="utf-8")
    read = {"name": "read_file", "args": {"path": "notes.md"}, "id": "c1"}
    dismiss = {
        "name": "dismiss_memory",
        "args": {"target_message_id": "c1", "summary": "not relevant"},
        "id": "c2",
    }
    model = ToolModel(
        responses=[
            AIMessage("", tool_calls=[read]),
            AIMessage("", tool_calls=[dismiss]),
            AIMessage("nothing useful there"),
        ]
    )
    reports: list[ComposeResult] = []
    app = _graph(engine, model, docs, open_saver(tmp_path / "c.sqlite"), reports)
    state = app.invoke({"messages": [HumanMessage("look at notes.md")]}, CONFIG)
    return model, state, reports


def test_a_dismissal_applies_to_later_calls_and_survives_a_restore(tmp_path: Path) -> None:
    engine = _engine()
    model, state, reports = _turn_one(tmp_path, engine)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    # the model read the body once, before it dismissed it
    assert BODY in model.seen[1][-1].content
    # after the dismissal: a placeholder, same tool_call_id, the body gone from the prompt
    third = model.seen[2]
    (shown,) = [m for m in third if getattr(m, "tool_call_id", None) == "c1"]
    assert shown.content == PLACEHOLDER
    assert all(BODY not in str(m.content) for m in third)
    # the state is the full record
    assert BODY in state["messages"][2].content
    notes = reports[-1].report.layer("checkpoint_messages").notes
    assert any(n.startswith("curated: 1 dismissed message(s)") and "c1" in n for n in notes)

    # a new graph object on the same checkpoint file: the restore keeps the dismissal
    later = ToolModel(responses=[AIMessage("ok")])
    again: list[ComposeResult] = []
    app = _graph(engine, later, tmp_path / "docs", open_saver(tmp_path / "c.sqlite"), again)
    restored = app.invoke({"messages": [HumanMessage("and now?")]}, CONFIG)
    prompt = later.seen[0]
    assert PLACEHOLDER in [m.content for m in prompt]
    assert all(BODY not in str(m.content) for m in prompt)
    assert BODY in restored["messages"][2].content
    assert any("curated" in n for n in again[0].report.layer("checkpoint_messages").notes)


def test_without_curate_the_body_stays_in_the_prompt(tmp_path: Path) -> None:
    model, _, reports = _turn_one(tmp_path, _engine(curate=False))
    assert any(BODY in str(m.content) for m in model.seen[2])
    assert not any("curated" in n for n in reports[-1].report.layer("checkpoint_messages").notes)
