"""Services a policy needs are checked when the engine is built (issue 32, finding 14).

A retriever, memory or skills layer with ``on_error: fail`` and a ``summarize`` history
overflow used to fail on the first call that needed the missing service, possibly hours
into production. `PolicyEngine.from_file` and `init_context_engine` now refuse to build
the engine, naming every missing service with its layer, the policy key and its
file:line:col; ``on_error: skip`` layers still run without theirs (a reported skip).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import MissingServiceError, PolicyValidationError
from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, state_schema
from ctxpolicy.loading import load_policy
from ctxpolicy.memory import TieredMemory
from ctxpolicy.state import user_turn
from ctxpolicy.testing import ListRetriever
from tests.integrations.fakes import RecordingChatModel, replies
from tests.integrations.graphs import open_saver

POLICY = """\
version: 1
name: needs-services
model: {context_window: 16000, tokenizer: cl100k_base}
order: [system_prompt, knowledge__context, memory__context, skills__context,
        compression__context, checkpoint_messages, query]
layers:
  knowledge__context:
    collector: {type: retriever, service: kb_zh, on_error: %(on_error)s}
  memory__context:
    collector: {type: memory, tier: l1, on_error: %(on_error)s}
  skills__context:
    collector:
      type: skills
      on_error: %(on_error)s
  compression__context:
    persist: true
    collector: {type: state, field: compression__context}
  checkpoint_messages:
    overflow: summarize
processes:
  react: {checkpoint_messages: true}
"""


def write(tmp_path: Path, *, on_error: str = "fail") -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY % {"on_error": on_error}, encoding="utf-8")
    return path


def services() -> dict[str, Any]:
    return {
        "kb_zh": ListRetriever(["订单表按天分区。"]),
        "memory": TieredMemory(),
        "skills": {"sql-review": "Check joins."},
        "summarizer": RecordingChatModel(responses=replies("summary")),
    }


def test_every_missing_service_is_named_when_the_engine_is_built(tmp_path: Path) -> None:
    path = write(tmp_path)
    with pytest.raises(MissingServiceError) as caught:
        init_context_engine(path)
    found = {
        (i.path, i.line, i.column, i.rule): i.message
        for i in caught.value.issues
        if Path(i.file) == path
    }
    assert set(found) == {
        ("$.layers.knowledge__context.collector.service", 8, 34, "services.missing"),
        ("$.layers.memory__context.collector", 10, 5, "services.missing"),
        ("$.layers.skills__context.collector", 12, 5, "services.missing"),
        ("$.layers.checkpoint_messages.overflow", 19, 5, "services.missing"),
    }
    by_layer = {message.split(":")[0]: message for message in found.values()}
    assert "'kb_zh'" in by_layer["layer knowledge__context"]
    assert "a retriever collector" in by_layer["layer knowledge__context"]
    assert "'memory'" in by_layer["layer memory__context"]
    assert "'skills'" in by_layer["layer skills__context"]
    assert "overflow 'summarize'" in by_layer["layer checkpoint_messages"]
    assert "'summarizer'" in by_layer["layer checkpoint_messages"]
    text = str(caught.value)
    assert f"{path}:8:34: $.layers.knowledge__context.collector.service" in text
    assert isinstance(caught.value, PolicyValidationError)
    assert isinstance(caught.value, LookupError)

    # the same from PolicyEngine.from_file, and for a policy object handed over
    with pytest.raises(MissingServiceError):
        PolicyEngine.from_file(path, services={"memory": TieredMemory()})
    given = services()
    del given["skills"]
    with pytest.raises(MissingServiceError) as one:
        init_context_engine(load_policy(path), services=given)
    (issue,) = one.value.issues
    assert (issue.path, issue.line) == ("$.layers.skills__context.collector", 12)


def test_with_its_services_the_engine_runs_a_graph(tmp_path: Path) -> None:
    engine = init_context_engine(write(tmp_path), services=services())
    model = RecordingChatModel(responses=replies("a1"))
    graph = StateGraph(state_schema(engine))
    graph.add_node("agent", agent_node(engine, name="agent", system_prompt="S", model=model))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))
    app.invoke(user_turn("订单表怎么分区", turn_id="1"), {"configurable": {"thread_id": "t"}})
    assert "订单表按天分区。" in "\n".join(str(m.content) for m in model.seen[0])


def test_skip_layers_may_run_without_their_service_and_report_it(tmp_path: Path) -> None:
    given = {"summarizer": RecordingChatModel(responses=replies("summary"))}
    engine = init_context_engine(write(tmp_path, on_error="skip"), services=given)
    model = RecordingChatModel(responses=replies("a1"))
    reports: list[ComposeResult] = []
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(
            engine,
            name="agent",
            system_prompt="S",
            model=model,
            on_compose=lambda name, result: reports.append(result),
        ),
    )
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile(checkpointer=open_saver(tmp_path / "c.sqlite"))
    app.invoke(user_turn("q", turn_id="1"), {"configurable": {"thread_id": "t"}})
    skipped = {s.layer for s in reports[0].report.skipped}
    assert skipped == {"knowledge__context", "memory__context", "skills__context"}
    assert model.calls == 1


def test_a_memory_layer_with_tiers_needs_no_service(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "version: 1\nname: tiers\n"
        "order: [system_prompt, memory__context, checkpoint_messages, query]\n"
        "layers:\n  memory__context:\n"
        "    collector: {type: memory, strategy: balanced, tiers: {l1: 5}}\n",
        encoding="utf-8",
    )
    assert init_context_engine(path).policy.name == "tiers"


AGGREGATE = """\
version: 1
name: needs-sessions
model: {context_window: 16000, tokenizer: cl100k_base}
order: [system_prompt, sessions__context, checkpoint_messages, query]
layers:
  sessions__context:
    collector: {type: aggregate, service: sessions, contexts: session_states}
"""


def test_an_aggregate_layer_needs_its_sessions_and_contexts_services(tmp_path: Path) -> None:
    from ctxpolicy.memory import MemorySessions

    path = tmp_path / "aggregate.yaml"
    path.write_text(AGGREGATE, encoding="utf-8")
    with pytest.raises(MissingServiceError) as caught:
        init_context_engine(path)
    found = {(i.path, i.line, i.column): i.message for i in caught.value.issues}
    assert set(found) == {  # before: no check; the first call failed instead
        ("$.layers.sessions__context.collector.service", 7, 34),
        ("$.layers.sessions__context.collector.contexts", 7, 53),
    }
    assert all("an aggregate collector" in message for message in found.values())
    sessions = MemorySessions(store=False)
    sessions.session("A").add("会话 A: 部署冻结于 18:00")
    engine = init_context_engine(path, services={"sessions": sessions, "session_states": {}})
    state = {"messages": [("human", "状态?")], "session_ids": ["A"]}
    text = "\n".join(
        str(m.content) for m in engine.compose(system_prompt="S", state=state).messages
    )
    assert "部署冻结于 18:00" in text
