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


# ---------------------------------------------------------------------------------------
# Issue 32, finding 10: curation from the policy alone. `dismiss_memory` in `tools.allow`
# is accepted by the schema; agent_node binds it with the file tools, and the one-liner
# `ToolNode(policy_tools(engine))` runs them.

POLICY_FILE = """\
version: 1
name: curated-from-policy
model: {context_window: 16000, tokenizer: cl100k_base}
order: [system_prompt, checkpoint_messages, query]
tools:
  root: docs
  allow: [read_file, dismiss_memory]
layers:
  checkpoint_messages: {curate: %s}
processes:
  react: {checkpoint_messages: true}
"""


def _policy_file(tmp_path: Path, *, curate: bool = True) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "notes.md").write_text(BODY + "\n笔记 与问题无关\n", encoding="utf-8")
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_FILE % ("true" if curate else "false"), encoding="utf-8")
    return path


def _policy_graph(engine: PolicyEngine, model: ToolModel, saver: Any) -> Any:
    from ctxpolicy.integrations.langgraph import policy_tools

    graph = StateGraph(state_schema(engine))
    graph.add_node("agent", agent_node(engine, name="agent", system_prompt="S", model=model))
    graph.add_node("tools", ToolNode(policy_tools(engine)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def test_dismiss_memory_from_the_policy_alone(tmp_path: Path) -> None:
    import jsonschema
    import yaml

    from ctxpolicy.integrations.langgraph import init_context_engine
    from ctxpolicy.loading import resolve_policy
    from ctxpolicy.schema import load_schema

    path = _policy_file(tmp_path)
    assert resolve_policy(path).issues == ()  # no error, no warning
    # the shipped schema (what editors and check-jsonschema use) accepts it too
    jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), load_schema())

    engine = init_context_engine(path)
    read = {"name": "read_file", "args": {"path": "notes.md"}, "id": "c1"}
    dismiss = {
        "name": "dismiss_memory",
        "args": {"target_message_id": "c1", "summary": "与问题无关"},
        "id": "c2",
    }
    model = ToolModel(
        responses=[
            AIMessage("", tool_calls=[read]),
            AIMessage("", tool_calls=[dismiss]),
            AIMessage("nothing useful there"),
        ]
    )
    state = _policy_graph(engine, model, open_saver(tmp_path / "c.sqlite")).invoke(
        {"messages": [HumanMessage("看一下 notes.md")]}, CONFIG
    )
    assert [t.name for t in model.bound] == ["read_file", "dismiss_memory"]
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert state["messages"][4].status != "error"  # the ToolNode ran dismiss_memory
    placeholder = "[read notes.md — dismissed: 与问题无关]"
    (shown,) = [m for m in model.seen[2] if getattr(m, "tool_call_id", None) == "c1"]
    assert shown.content == placeholder
    assert all(BODY not in str(m.content) for m in model.seen[2])

    # a restarted process: a new engine and graph on the same checkpoint file
    later = ToolModel(responses=[AIMessage("ok")])
    _policy_graph(init_context_engine(path), later, open_saver(tmp_path / "c.sqlite")).invoke(
        {"messages": [HumanMessage("还有吗")]}, CONFIG
    )
    assert placeholder in [m.content for m in later.seen[0]]


def test_dismiss_memory_without_curate_is_a_warning_at_its_entry(tmp_path: Path) -> None:
    from ctxpolicy.loading import resolve_policy

    loaded = resolve_policy(_policy_file(tmp_path, curate=False))
    assert loaded.policy is not None  # a warning, not an error
    (issue,) = loaded.issues
    assert issue.rule == "tools.dismiss-without-curate"
    assert issue.severity == "warning"
    assert (issue.line, issue.column, issue.path) == (7, 22, "$.tools.allow[1]")
