"""Loom's seven context sources (seed 002) through a real LangGraph graph.

``policies/loom-sources.yaml`` runs through `agent_node` with `state_schema(engine)` (no
hand-written schema), a SQLite checkpointer and a scripted fake model: user input,
agent outputs (decaying by age), memory (L1, L2, L4), knowledge, the system prompt,
tools loaded on demand and skills activated on demand all reach the model's prompt,
in the policy's order, each within its cap.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from ctxpolicy.collectors.agent_outputs import decay_weight, select_outputs
from ctxpolicy.integrations.langgraph import agent_node, init_context_engine, state_schema
from ctxpolicy.loading import load_policy
from ctxpolicy.memory import TieredMemory
from ctxpolicy.state import StateBuilder, policy_state_fields, state_keys
from ctxpolicy.validation import check_policy
from tests.integrations.fakes import RecordingChatModel

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "loom-sources.yaml"

#: The policy's order of the sources, each with a marker the test puts in that source.
MARKERS = {
    "system_prompt": "PROMPT-MARK",
    "tools__context": "lookup_invoice",
    "skills__context": "SKILL-MARK",
    "agent_output__context": "OUTPUT-MARK-3",
    "important__context": "IMPORTANT-MARK",
    "recent__context": "RECENT-MARK",
    "semantic__context": "SEMANTIC-MARK",
    "knowledge__context": "KNOWLEDGE-MARK",
    "query": "QUERY-MARK",
}


@tool
def lookup_invoice(invoice_id: str) -> str:
    """Look an invoice up by id."""
    return invoice_id


def _memory() -> TieredMemory:
    memory = TieredMemory(l1_size=3)
    # Leaves L1 early: found by the L4 search for the query's words.
    memory.add("SEMANTIC-MARK refund policy allows 30 days", importance=0.3)
    memory.add("IMPORTANT-MARK the customer is on the enterprise plan", importance=0.95)
    for n in range(3):
        memory.add(f"RECENT-MARK step {n}", importance=0.2)
    return memory


def _retriever() -> Any:
    return RunnableLambda(lambda query: [Document(page_content=f"KNOWLEDGE-MARK refunds: {query}")])


def _engine(tools_loaded: list[str]) -> Any:
    def load_tools() -> list[Any]:  # loaded on demand: only when the layer is collected
        tools_loaded.append("tools")
        return [lookup_invoice]

    return init_context_engine(
        POLICY,
        services={
            "memory": _memory(),
            "knowledge": _retriever(),
            "tools": load_tools,
            "skills": {
                "billing": {
                    "description": "SKILL-MARK billing",
                    "instructions": "Explain charges line by line.",
                },
                "refunds": {"instructions": "SKILL-MARK refunds", "triggers": ["refund"]},
                "poetry": "Write a sonnet.",
            },
        },
    )


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


def test_policy_is_valid_without_warnings() -> None:
    policy = load_policy(POLICY)
    # the fields a collector reads, the services it falls back to in state, and what a
    # memory layer reads (the sessions of the call, its strategy)
    assert policy_state_fields(policy) == (
        "active_skills",
        "context_strategy",
        "memory",
        "messages",
        "session_id",
        "session_ids",
        "skills",
    )
    assert check_policy(policy) == []  # no error, no warning


def test_state_schema_declares_the_keys_the_sources_read() -> None:
    engine = _engine([])
    schema = state_schema(engine)
    assert {"active_skills", "messages"} <= state_keys(schema)
    # StateBuilder accepts them, with and without the schema.
    StateBuilder({"active_skills": ["billing"]}, engine.policy, schema=schema)
    StateBuilder({"active_skills": ["billing"]}, engine.policy)


def test_every_source_reaches_the_prompt_in_order_and_within_its_cap(tmp_path: Path) -> None:
    tools_loaded: list[str] = []
    engine = _engine(tools_loaded)
    model = RecordingChatModel(responses=[AIMessage("done")])
    reports: list[Any] = []
    graph = StateGraph(state_schema(engine))
    graph.add_node(
        "agent",
        agent_node(
            engine,
            name="agent",
            system_prompt="PROMPT-MARK You are the billing agent.",
            model=model,
            tools=None,
            on_compose=lambda _name, result: reports.append(result.report),
        ),
    )
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    connection = sqlite3.connect(str(tmp_path / "cp.db"), check_same_thread=False)
    try:
        app = graph.compile(checkpointer=SqliteSaver(connection))
        history: list[BaseMessage] = [HumanMessage("earlier question", id="h0")]
        history += [AIMessage(f"OUTPUT-MARK-{n}", name="agent", id=f"a{n}") for n in range(4)]
        config: Any = {"configurable": {"thread_id": "loom-1"}}
        final = app.invoke(
            {
                "messages": history,
                "assigned_task": "QUERY-MARK why was the refund for invoice 7 late?",
                "active_skills": ["billing", "unknown-skill"],
            },
            config,
        )
        stored = app.get_state(config).values
    finally:
        connection.close()
    assert stored["active_skills"] == ["billing", "unknown-skill"]  # kept by the checkpoint
    assert final["messages"][-1].content == "done"
    assert tools_loaded == ["tools"]

    prompt = "\n".join(_text(m) for m in model.seen[0])
    positions = [prompt.find(marker) for marker in MARKERS.values()]
    assert all(p >= 0 for p in positions), dict(zip(MARKERS, positions, strict=True))
    assert positions == sorted(positions)  # the policy's order
    assert "Write a sonnet" not in prompt  # a skill nobody activated costs nothing
    assert "SKILL-MARK refunds" in prompt  # activated by the query ("refund")

    report = reports[0]
    policy = engine.policy
    for name in MARKERS:
        layer = report.layer(name)
        assert layer.included, name
        assert layer.tokens > 0, name
        assert layer.cap is None or layer.tokens <= layer.cap, name
        ratio = policy.budget.ratios[name] if name != "system_prompt" else 0.12
        assert layer.base_cap == int(ratio * report.available_tokens), name
        assert layer.tokens <= layer.base_cap, name  # within its ratio, not only its cap


def test_agent_outputs_decay_by_age_and_fit_a_small_cap(tmp_path: Path) -> None:
    messages = [AIMessage(f"output {n} " + "word " * 200, name="agent") for n in range(8)]
    chosen = select_outputs(messages, half_life=2, min_weight=0.05, limit=20)
    assert [round(w, 4) for *_, w in chosen] == [round(decay_weight(a, 2), 4) for a in range(8)]
    assert decay_weight(2, 2) == 0.5
    chosen = select_outputs(messages, half_life=1, min_weight=0.2, limit=20)
    assert len(chosen) == 3  # 1, 0.5, 0.25; 0.125 is below min_weight

    text = tmp_path / "p.yaml"
    text.write_text(
        "version: 1\nname: outputs\nmodel: {context_window: 4000, tokenizer: cl100k_base}\n"
        "budget: {ratios: {agent_output__context: 0.1}}\n"
        "order: [system_prompt, agent_output__context, checkpoint_messages, query]\n"
        "layers:\n  agent_output__context:\n    collector: {type: agent_outputs}\n"
        "processes:\n  react: {checkpoint_messages: false, query: runtime}\n"
    )
    engine = init_context_engine(text)
    result = engine.compose(
        process="react", system_prompt="s", state={"messages": messages}, query="q"
    )
    layer = result.report.layer("agent_output__context")
    assert 0 < layer.tokens <= (layer.cap or 0)
    body = next(_text(m) for m in result.messages if "output 7" in _text(m))
    lines = body.splitlines()
    assert lines[-1].startswith("- [agent] output 7")  # newest last, the largest share
    assert len(lines[-1]) > len(lines[0])
    assert not result.report.layer("agent_output__context").cuts


@pytest.mark.parametrize("active", [None, "billing", ["billing"]])
def test_skills_are_activated_on_demand(tmp_path: Path, active: Any) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "version: 1\nname: skills\nmodel: {context_window: 8000, tokenizer: cl100k_base}\n"
        "budget: {ratios: {skills__context: 0.2}}\n"
        "order: [system_prompt, skills__context, checkpoint_messages, query]\n"
        "layers:\n  skills__context:\n    collector: {type: skills, match_query: false}\n"
        "processes:\n  react: {checkpoint_messages: false, query: runtime}\n"
    )
    engine = init_context_engine(policy, services={"skills": {"billing": "BILL-SKILL"}})
    state = {} if active is None else {"active_skills": active}
    result = engine.compose(process="react", system_prompt="s", state=state, query="billing")
    prompt = "\n".join(_text(m) for m in result.messages)
    assert ("BILL-SKILL" in prompt) is (active is not None)
