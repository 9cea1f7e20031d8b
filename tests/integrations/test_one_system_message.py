"""One SystemMessage per model call by default under the hosts that hand the call to a
chat model (issue 33, finding 4), the report still giving each merged layer's share, and
the ``ctxpolicy`` logger (finding 5).

Real ``create_agent`` agents and LangGraph graphs with the SQLite checkpointer; only the
chat model is a langchain-core fake that records what it was sent.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CTXPOLICY_REQUIRE_AGENTS"):
    import langchain.agents  # noqa: F401
else:
    pytest.importorskip("langchain.agents", reason="needs the langchain extra (langchain>=1.0)")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import PersistenceError
from ctxpolicy.integrations.langchain import ContextPolicyMiddleware
from ctxpolicy.integrations.langgraph import agent_node, state_schema
from ctxpolicy.loading import load_policy
from ctxpolicy.state import StateBuilder
from ctxpolicy.tokens import get_tokenizer
from tests.integrations.graphs import open_saver
from tests.integrations.test_langchain_middleware import ToolCallingModel

PORT = "The staging port is 5433 — 端口 5433。"


@tool
def lookup(key: str) -> str:
    """Look a configuration key up."""
    return f"{key} = {PORT}"


def _script(turns: int) -> list[AIMessage]:
    replies: list[AIMessage] = []
    for turn in range(turns):
        replies.append(
            AIMessage(
                "",
                tool_calls=[{"name": "lookup", "args": {"key": f"k{turn}"}, "id": f"c{turn}"}],
            )
        )
        replies.append(AIMessage(f"answer {turn}: 数据 ok"))
    return replies


def _system_counts(model: ToolCallingModel) -> list[int]:
    return [sum(isinstance(m, SystemMessage) for m in sent) for sent in model.seen]


def test_create_agent_sends_one_system_message_with_builtin_long_session(tmp_path: Path) -> None:
    reports: list[ComposeResult] = []
    model = ToolCallingModel(responses=_script(3))
    middleware = ContextPolicyMiddleware(
        "builtin:long-session", on_compose=lambda _, result: reports.append(result)
    )
    agent = create_agent(
        model,
        [lookup],
        system_prompt="You answer configuration questions.",
        middleware=[middleware],
        checkpointer=open_saver(tmp_path / "agent.sqlite"),
    )
    config = {"configurable": {"thread_id": "t1"}}
    for turn in range(3):
        agent.invoke({"messages": [HumanMessage(f"What is k{turn}? 请回答")]}, config)
    assert len(model.seen) == 6
    assert _system_counts(model) == [1] * 6  # system prompt and framework merged
    report = reports[-1].report
    layer = report.layer("framework__context")
    assert (layer.merged_into, layer.messages, layer.sent) == ("system_prompt", 0, True)
    assert layer.tokens > 0
    first = model.seen[-1][0]
    assert "You answer configuration questions." in first.text
    assert "Facts recalled from earlier" in first.text  # the framework layer's text


def test_a_recalled_fact_rides_in_the_one_system_message(tmp_path: Path) -> None:
    team = tmp_path / "small.yaml"  # a window small enough that the first turns drop
    team.write_text(
        "version: 1\nname: small\nextends: builtin:long-session\nmodel: {context_window: 2400}\n",
        encoding="utf-8",
    )
    history: list[Any] = [HumanMessage(PORT), AIMessage("Noted.")]
    for turn in range(120):
        history += [
            HumanMessage(f"Filler question {turn} about the weather 天气 {turn}."),
            AIMessage(f"Filler answer {turn}: sunny, 晴天, nothing about ports."),
        ]
    reports: list[ComposeResult] = []
    model = ToolCallingModel(responses=[AIMessage("5433")])
    middleware = ContextPolicyMiddleware(team, on_compose=lambda _, r: reports.append(r))
    agent = create_agent(model, [lookup], system_prompt="P", middleware=[middleware])
    agent.invoke({"messages": [*history, HumanMessage("Which staging port? 哪个端口")]})
    assert _system_counts(model) == [1]
    recall = reports[0].report.layer("recall__context")
    assert recall.recalled and recall.tokens > 0
    assert (recall.merged_into, recall.messages, recall.sent) == ("system_prompt", 0, True)
    assert "5433" in model.seen[0][0].text
    merged = ("system_prompt", "framework__context", "compression__context", "recall__context")
    tokenizer = get_tokenizer("cl100k_base")
    layers = reports[0].report
    assert sum(layers.layer(n).tokens for n in merged) == tokenizer.count_message(model.seen[0][0])


def test_a_policy_key_keeps_several_system_messages(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: team\nextends: builtin:long-session\n"
        "model: {system_messages: separate}\n",
        encoding="utf-8",
    )
    model = ToolCallingModel(responses=_script(1))
    agent = create_agent(
        model,
        [lookup],
        system_prompt="You answer configuration questions.",
        middleware=[ContextPolicyMiddleware(team)],
    )
    agent.invoke({"messages": [HumanMessage("What is k0?")]})
    assert _system_counts(model) == [2, 2]  # system prompt, framework (recall: empty)


def test_compose_itself_keeps_one_message_per_layer_under_auto() -> None:
    engine = PolicyEngine.from_file("builtin:long-session")
    assert engine.policy.model.system_messages == "auto"
    result = engine.compose(
        process="react", system_prompt="S", state={"messages": [HumanMessage("hi")]}
    )
    assert sum(isinstance(m, SystemMessage) for m in result.messages) == 2
    host = engine.for_model_host()
    assert host.policy.model.system_messages == "merge"
    assert host.for_model_host() is host
    merged = host.compose(
        process="react", system_prompt="S", state={"messages": [HumanMessage("hi")]}
    )
    assert sum(isinstance(m, SystemMessage) for m in merged.messages) == 1
    assert merged.report.layer("framework__context").merged_into == "system_prompt"
    assert merged.report.layer("framework__context").messages == 0
    assert merged.report.to_dict()["layers"][1]["merged_into"] == "system_prompt"


def test_agent_node_sends_one_system_message(tmp_path: Path) -> None:
    engine = PolicyEngine.from_file("builtin:base", services={})
    model = ToolCallingModel(responses=[AIMessage("ok"), AIMessage("ok again")])
    graph = StateGraph(state_schema(engine))
    graph.add_node("analyst", agent_node(engine, name="analyst", system_prompt="P", model=model))
    graph.add_edge(START, "analyst")
    app = graph.compile(checkpointer=open_saver(tmp_path / "g.sqlite"))
    config = {"configurable": {"thread_id": "g"}}
    app.invoke({"messages": [HumanMessage("Why did rows drop?")], "todo": ["check"]}, config)
    app.invoke({"messages": [HumanMessage("And now? 现在呢")]}, config)
    assert _system_counts(model) == [1, 1]
    assert "Current plan:" in model.seen[0][0].text  # the todo layer, merged in


def test_a_skipped_collector_is_logged_once_and_in_the_warnings(caplog) -> None:
    engine = PolicyEngine(load_policy("builtin:base"))  # no knowledge service
    with caplog.at_level(logging.INFO, logger="ctxpolicy"):
        result = engine.compose(
            process="mapreduce_worker", system_prompt="S", query="Count rows 数一数"
        )
    skip = [r for r in caplog.records if "collector skipped" in r.getMessage()]
    assert len(skip) == 1 and skip[0].levelno == logging.WARNING
    assert skip[0].name == "ctxpolicy"
    assert skip[0].getMessage().startswith("knowledge__context: retriever collector skipped")
    assert skip[0].getMessage() in result.report.warnings
    assert not logging.getLogger("ctxpolicy").handlers  # the library installs none


def test_a_fallback_and_a_cut_are_logged_and_in_the_warnings(tmp_path: Path, caplog) -> None:
    team = tmp_path / "t.yaml"
    team.write_text(
        "version: 1\nname: t\nextends: builtin:base\n"
        "model: {context_window: 2000}\n"
        "layers:\n  checkpoint_messages: {overflow: summarize}\n"
        "  knowledge__context: {overflow: truncate_tail}\n"
        "processes:\n  react: {exclude: [compression__context]}\n",
        encoding="utf-8",
    )
    engine = PolicyEngine(load_policy(team))
    long_text = "行 " * 2000
    with caplog.at_level(logging.INFO, logger="ctxpolicy"):
        result = engine.compose(
            process="react",
            system_prompt="S",
            state={"messages": [HumanMessage("hi")]},
            contexts={"knowledge__context": long_text},
        )
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "ctxpolicy"]
    fallback = [m for m in messages if "fell back to drop_oldest" in m[1]]
    cut = [m for m in messages if m[1].startswith("knowledge__context: truncated")]
    assert [level for level, _ in fallback] == [logging.WARNING]
    assert [level for level, _ in cut] == [logging.INFO]
    for _, text in (*fallback, *cut):
        assert text in result.report.warnings


def test_a_refused_persist_is_logged(caplog) -> None:
    policy = load_policy("builtin:base")
    sb = StateBuilder({"messages": []}, policy)
    with caplog.at_level(logging.WARNING, logger="ctxpolicy"), pytest.raises(PersistenceError):
        sb.contexts.persist({"framework__context": "x"})
    [record] = [r for r in caplog.records if r.name == "ctxpolicy"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("persist refused: cannot persist 'framework__context'")
