"""`MemorySessions.aggregate_context`: several sessions' whole contexts for one agent.

Seed 002's aggregation flow: ``aggregate_context([A, B, C])`` asks each session for its
context (its persisted ``__context`` layers, here read from real LangGraph threads, and
its memory), then merges, ranks and trims them to the layer's budget.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ctxpolicy.memory.sessions import MemorySessions, render_context
from ctxpolicy.state import Blackboard
from ctxpolicy.tokens import get_tokenizer

COUNT = get_tokenizer("cl100k_base").count


def _threads() -> Any:
    graph = StateGraph(Blackboard)
    graph.add_node("noop", lambda state: {})
    graph.add_edge(START, "noop")
    graph.add_edge("noop", END)
    app = graph.compile(checkpointer=InMemorySaver())
    values = {
        "A": {"compression__context": "A-SUMMARY the user migrated the billing DB."},
        "B": {
            "compression__context": "B-SUMMARY refunds are late since Monday.",
            "knowledge__context": "B-KNOWLEDGE refunds take 5 days.",
        },
        "C": {"compression__context": "A-SUMMARY  the user migrated the billing db."},  # repeat
    }
    for sid, update in values.items():
        config: Any = {"configurable": {"thread_id": sid}}
        app.invoke({"session_id": sid}, config)
        app.update_state(config, update)
    return lambda sid: app.get_state({"configurable": {"thread_id": sid}}).values


def _sessions() -> MemorySessions:
    sessions = MemorySessions(store=False)
    sessions.session("A").add("A-MEM the customer is on the enterprise plan", importance=0.95)
    sessions.session("B").add("B-MEM small talk about the weather", importance=0.2)
    sessions.session("C").add("C-MEM refund ticket T-7 was escalated", importance=0.7)
    return sessions


def test_merges_ranks_and_dedupes_whole_session_contexts() -> None:
    pieces = _sessions().aggregate_context(
        _threads(), ["A", "B", "C"], max_tokens=10_000, count_tokens=COUNT, query="refund"
    )
    sources = [
        (p.session_id, p.source, p.text.split()[0 if p.source.endswith("context") else 1])
        for p in pieces
    ]
    assert sources == [
        ("A", "memory:l1", "A-MEM"),  # 0.95 beats a persisted layer (0.8)
        ("A", "compression__context", "A-SUMMARY"),
        ("B", "compression__context", "B-SUMMARY"),
        ("B", "knowledge__context", "B-KNOWLEDGE"),
        ("C", "memory:l4", "C-MEM"),  # a search hit for "refund"; C's summary repeats A's
        ("B", "memory:l1", "B-MEM"),
    ]
    text = render_context(pieces)
    assert text.startswith("[A · memory:l1]\n- ")
    assert "[A · compression__context]\nA-SUMMARY" in text


def test_trimmed_to_the_budget_best_first() -> None:
    sessions = _sessions()
    threads = _threads()
    full = sessions.aggregate_context(
        threads, ["A", "B", "C"], max_tokens=10_000, count_tokens=COUNT
    )
    budget = COUNT(render_context(full[:3])) + 2  # boundary tokens may merge differently
    kept = sessions.aggregate_context(
        threads, ["A", "B", "C"], max_tokens=budget, count_tokens=COUNT
    )
    assert kept == full[:3]
    assert COUNT(render_context(kept)) <= budget
    assert sessions.aggregate_context(threads, ["A"], max_tokens=0, count_tokens=COUNT) == []


def test_layers_filter_mapping_contexts_and_closed_sessions() -> None:
    sessions = MemorySessions(store=False)
    contexts = {
        "X": {"compression__context": "X-SUMMARY", "todo__context": "X-TODO", "goal": "ignored"},
        "Y": {"compression__context": "  "},  # empty: nothing
    }
    pieces = sessions.aggregate_context(
        contexts, max_tokens=1000, count_tokens=COUNT, layers=["todo__context"]
    )
    assert [(p.session_id, p.source, p.text) for p in pieces] == [("X", "todo__context", "X-TODO")]
    with pytest.raises(ValueError, match="max_tokens"):
        sessions.aggregate_context(contexts, max_tokens=-1, count_tokens=COUNT)
    with pytest.raises(ValueError, match="session_id"):
        sessions.aggregate_context(contexts, ["a.b"], max_tokens=1, count_tokens=COUNT)
