"""End to end: a policy with a memory layer and a tools layer through `PolicyEngine`."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.memory import MemorySessions, TieredMemory
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer


@tool
def read_file(path: str, start: int = 1) -> str:
    """Read a source file from the repository."""
    return ""


def _policy(strategy: str, window: int = 2_000) -> Policy:
    return Policy.model_validate(
        {
            "version": 1,
            "name": "memory-e2e",
            "model": {"context_window": window},
            "order": [
                "system_prompt",
                "tools__context",
                "memory__context",
                "checkpoint_messages",
                "query",
            ],
            "processes": {"react": {"query": "runtime"}},
            "budget": {"ratios": {"tools__context": 0.1, "memory__context": 0.2}},
            "layers": {
                "tools__context": {"collector": {"type": "tools"}},
                "memory__context": {"collector": {"type": "memory", "strategy": strategy}},
            },
        }
    )


def _memory(n: int) -> TieredMemory:
    mem = TieredMemory()
    for i in range(n):
        mem.add(
            f"step {i}: inspected module{i}.py, found issue {i}",
            kind="user" if i % 2 else "tool_success",
        )
    return mem


@pytest.mark.parametrize("n", [10, 1_000])
def test_memory_and_tools_layers_compose_within_their_caps(n):
    engine = PolicyEngine(
        _policy("balanced"), services={"memory": _memory(n), "tools": [read_file]}
    )
    result = engine.compose(system_prompt="You fix bugs.", query="what was wrong in module3.py?")
    kinds = [type(m) for m in result.messages]
    assert kinds == [SystemMessage, SystemMessage, SystemMessage, HumanMessage]
    assert (
        result.messages[1].content
        == "- read_file(path: string, start?: integer = 1): Read a source file from the repository."
    )
    memory_text = result.messages[2].content
    assert f"step {n - 1}:" in memory_text  # most recent item
    if n > 50:
        assert "module3.py" in memory_text  # found by the L4 search for the query
    layers = {layer.name: layer for layer in result.report.layers}
    count = get_tokenizer("cl100k_base").count
    assert count(memory_text) <= layers["memory__context"].base_cap
    assert layers["memory__context"].cuts == ()  # the collector packed it; the engine cut nothing


def test_memory_layer_size_is_constant_in_history_length():
    sizes = []
    for n in (100, 2_000):
        engine = PolicyEngine(
            _policy("comprehensive"), services={"memory": _memory(n), "tools": [read_file]}
        )
        report = engine.compose(system_prompt="s", query="module7").report
        sizes.append({layer.name: layer.tokens for layer in report.layers}["memory__context"])
    assert sizes[0] <= 360 and sizes[1] <= 360


def test_minimal_strategy_leaves_the_layer_out_and_sessions_plug_in():
    engine = PolicyEngine(
        _policy("minimal"), services={"memory": _memory(20), "tools": [read_file]}
    )
    assert len(engine.compose(system_prompt="s", query="q").messages) == 3
    sessions = MemorySessions(store=False)
    sessions.session("a").add("alpha says hello", kind="user")
    sessions.session("b").add("beta says hi", kind="user")
    engine = PolicyEngine(_policy("balanced"), services={"memory": sessions, "tools": [read_file]})
    text = (
        engine.compose(system_prompt="s", query="q", state={"session_ids": ["b"]})
        .messages[2]
        .content
    )
    assert text == "- [user] beta says hi"


def test_seed_002_loom_sources_policy_fills_its_memory_tiers_and_tools():
    from pathlib import Path

    from ctxpolicy.loading import load_policy

    path = Path(__file__).resolve().parents[2] / "policies" / "loom-sources.yaml"
    mem = TieredMemory(l1_size=20)
    for i in range(500):
        mem.add(
            f"interaction {i}: ticket T-{i} about invoice{i % 50}",
            kind="user" if i % 3 else "subtask",
        )
    engine = PolicyEngine(
        load_policy(path),
        services={
            "memory": mem,
            "tools": [read_file],
            "knowledge": lambda q: [],
            "skills": {"triage": "Sort tickets by urgency."},
        },
    )
    result = engine.compose(
        system_prompt="You are Loom.",
        query="what happened with invoice7?",
        state={"active_skills": ["triage"], "messages": [AIMessage("done", name="loom")]},
    )
    layers = {layer.name: layer for layer in result.report.layers}
    for name in ("recent__context", "important__context", "semantic__context", "tools__context"):
        assert layers[name].included and layers[name].tokens > 0, name
        assert layers[name].tokens <= layers[name].base_cap
    text = "\n".join(str(m.content) for m in result.messages)
    assert "interaction 499:" in text  # L1
    assert "invoice7" in text  # L4 related
