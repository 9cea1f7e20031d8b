"""`MemorySessions.aggregate` and `aggregate_context`: exact rankings, budgets and errors.

Written against the surviving mutants of ``ctxpolicy/memory/sessions.py`` (docs/mutation.md).
Token counts are characters (``len``) so budgets are exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxpolicy.memory import MemorySessions
from ctxpolicy.memory.sessions import ContextPiece, render_context

pytestmark = pytest.mark.langgraph


def _show(found: list[Any]) -> list[tuple[str, str]]:
    return [(c.tier, c.item.content) for c in found]


def _world() -> MemorySessions:
    """Session a: an old "kiwi" item (now in L3), three L1 items; session b: one item."""
    sessions = MemorySessions(store=False, l1_size=3)
    memory = sessions.session("a")
    memory.add("kiwi fruit stock", importance=0.5, item_id="kiwi")
    memory.add("p zero", importance=0.5)
    memory.add("p one", importance=0.2)
    memory.add("p two", importance=0.5)
    sessions.session("b").add("b only", importance=0.1)
    return sessions


# ---------------------------------------------------------------- aggregate, ranked


def test_aggregate_ranks_by_importance_then_tier_then_newest() -> None:
    sessions = _world()
    assert _show(sessions.aggregate(["a"], tier="l1")) == [
        ("l1", "p two"),
        ("l1", "p zero"),
        ("l1", "p one"),
    ]
    sessions.distribute("q shared", session_ids=["a"], importance=0.5)
    mixed = sessions.aggregate(["a"], shares={"l1": 0.5, "l2": 0.5})
    assert _show(mixed) == [
        ("l1", "p two"),
        ("l1", "p zero"),
        ("l2", "q shared"),
        ("l1", "p one"),
    ]
    assert _show(sessions.aggregate(["a"], shares={"l2": 1.0})) == [("l2", "q shared")]
    assert _show(sessions.aggregate(["a"], tier="l2")) == [("l2", "q shared")]
    assert _show(sessions.aggregate(["a"], tier="l1", limit=1)) == [("l1", "p two")]
    assert _show(sessions.aggregate(["a", "a"], tier="l1", limit=2)) == [
        ("l1", "p two"),
        ("l1", "p zero"),
    ]


def test_aggregate_passes_session_ids_query_and_strategy() -> None:
    sessions = _world()
    assert _show(sessions.aggregate(["b"], tier="l1")) == [("l1", "b only")]
    assert _show(sessions.aggregate(tier="l1")) == [
        ("l1", "p two"),
        ("l1", "p zero"),
        ("l1", "p one"),
        ("l1", "b only"),
    ]
    kiwi = sessions.aggregate(["a"], query="kiwi")
    assert ("l4", "kiwi fruit stock") in _show(kiwi)
    assert "kiwi fruit stock" not in [c.item.content for c in sessions.aggregate(["a"])]
    full = sessions.aggregate(["a"], strategy="comprehensive")
    assert ("l3", "kiwi fruit stock") in _show(full)
    assert "l3" not in {c.tier for c in sessions.aggregate(["a"], strategy="balanced")}
    assert sessions.aggregate(["a"], strategy="minimal") == []
    assert sessions.aggregate([]) == []
    assert _show(sessions.aggregate(count_tokens=len, tier="l1")) == _show(
        sessions.aggregate(tier="l1")
    )
    assert _show(sessions.aggregate(count_tokens=len)) == _show(sessions.aggregate())


def test_aggregate_errors_name_the_problem() -> None:
    sessions = _world()
    with pytest.raises(KeyError) as info:
        sessions.aggregate(["nope", "a", "zz"])
    assert info.value.args == ("no open session(s): 'nope', 'zz'",)
    with pytest.raises(ValueError) as info_value:
        sessions.aggregate(max_tokens=10)
    assert str(info_value.value) == "count_tokens is required with max_tokens"
    with pytest.raises(ValueError) as info_value:
        sessions.aggregate(["a"], tier="l1", max_tokens=10)
    assert str(info_value.value) == "count_tokens is required with max_tokens"


# ---------------------------------------------------------------- aggregate, packed


def test_aggregate_with_a_tier_packs_by_rank() -> None:
    sessions = _world()
    budget = len("- p two\n- p zero")
    packed = sessions.aggregate(["a"], tier="l1", max_tokens=budget, count_tokens=len)
    assert _show(packed) == [("l1", "p zero"), ("l1", "p two")]  # reading order: oldest first
    assert sessions.aggregate(["a"], tier="l1", max_tokens=0, count_tokens=len) == []


def test_aggregate_by_shares_takes_the_sessions_in_turn() -> None:
    sessions = MemorySessions(store=False)
    sessions.session("a").add("a-old", importance=0.5)
    sessions.session("a").add("a-new", importance=0.5)
    sessions.session("b").add("b-only", importance=0.1)
    budget = len("- a-new\n- b-only")
    packed = sessions.aggregate(shares={"l1": 1.0}, max_tokens=budget, count_tokens=len)
    assert _show(packed) == [("l1", "b-only"), ("l1", "a-new")]
    everything = sessions.aggregate(shares={"l1": 1.0}, max_tokens=1000, count_tokens=len)
    assert _show(everything) == [("l1", "b-only"), ("l1", "a-old"), ("l1", "a-new")]
    one = sessions.aggregate(shares={"l1": 1.0}, max_tokens=1000, count_tokens=len, limit=1)
    assert _show(one) == [("l1", "a-new")]


def test_aggregate_by_shares_passes_query_strategy_and_the_cap() -> None:
    sessions = _world()
    kiwi = sessions.aggregate(
        ["a"], shares={"search": 1.0}, query="kiwi", max_tokens=1000, count_tokens=len
    )
    assert _show(kiwi) == [("l4", "kiwi fruit stock")]
    full = sessions.aggregate(["a"], strategy="comprehensive", max_tokens=1000, count_tokens=len)
    assert ("l3", "kiwi fruit stock") in _show(full)
    balanced = sessions.aggregate(["a"], max_tokens=1000, count_tokens=len)
    assert "l3" not in {c.tier for c in balanced}

    many = MemorySessions(store=False, l1_size=5, l2_size=5, l3_size=5)
    for n in range(110):
        many.session("z").add(f"zebra sighting {n}", importance=0.1)
    found = many.aggregate(
        shares={"search": 1.0}, query="zebra", max_tokens=24 * 200, count_tokens=len
    )
    assert len(found) == 110  # more than the default pool of 96 search hits


# ---------------------------------------------------------------- aggregate_context


def _piece_rows(pieces: list[ContextPiece]) -> list[tuple[str, str, str, float]]:
    return [(p.session_id, p.source, p.text, p.importance) for p in pieces]


def test_context_pieces_rank_layers_before_equal_memory_and_newer_memory_first() -> None:
    sessions = MemorySessions(store=False)
    memory = sessions.session("A")
    memory.add("older memory", importance=0.8)
    memory.add("newer memory", importance=0.8)
    contexts = {
        "A": {
            "compression__context": "  A summary  ",
            "todo__context": "A todo",
            "goal": "not a layer",
            "count__context": 5,
            "list__context": ["x"],
            "blank__context": " ",
        }
    }
    pieces = sessions.aggregate_context(contexts, max_tokens=10_000, count_tokens=len)
    assert _piece_rows(pieces) == [
        ("A", "compression__context", "A summary", 0.8),
        ("A", "todo__context", "A todo", 0.8),
        ("A", "memory:l4", "- newer memory", 0.8),  # search hits of the newest item's text
        ("A", "memory:l4", "- older memory", 0.8),
    ]
    assert render_context(pieces[:1]) == "[A · compression__context]\nA summary"


def test_context_importance_ranks_layers_against_memory() -> None:
    sessions = MemorySessions(store=False)
    sessions.session("A").add("memory note", importance=0.5)
    contexts = {"A": {"x__context": "layer text"}}
    low = sessions.aggregate_context(
        contexts, max_tokens=1000, count_tokens=len, context_importance=0.0
    )
    assert _piece_rows(low) == [
        ("A", "memory:l4", "- memory note", 0.5),
        ("A", "x__context", "layer text", 0.0),
    ]
    high = sessions.aggregate_context(
        contexts, max_tokens=1000, count_tokens=len, context_importance=1
    )
    assert [p.source for p in high] == ["x__context", "memory:l4"]
    for bad in (1.5, -0.1):
        with pytest.raises(ValueError) as info:
            sessions.aggregate_context(
                contexts, max_tokens=1000, count_tokens=len, context_importance=bad
            )
        assert str(info.value) == f"context_importance must be in [0, 1], got {bad!r}"
    with pytest.raises(ValueError) as info:
        sessions.aggregate_context(contexts, max_tokens=-1, count_tokens=len)
    assert str(info.value) == "max_tokens must be >= 0, got -1"
    assert sessions.aggregate_context(contexts, max_tokens=0, count_tokens=len) == []


def test_context_session_order_and_sources() -> None:
    sessions = MemorySessions(store=False)
    sessions.session("A").add("open memory", importance=0.8)
    contexts = {"Y": {"y__context": "Y text"}, "X": {"x__context": "X text"}}
    default = sessions.aggregate_context(contexts, max_tokens=1000, count_tokens=len)
    assert _piece_rows(default) == [
        ("Y", "y__context", "Y text", 0.8),
        ("X", "x__context", "X text", 0.8),
        ("A", "memory:l4", "- open memory", 0.8),
    ]
    chosen = sessions.aggregate_context(
        contexts, ["X", "Y", "X"], max_tokens=1000, count_tokens=len
    )
    assert [p.session_id for p in chosen] == ["X", "Y"]
    asked: list[str] = []

    def state_of(sid: str) -> dict[str, str] | None:
        asked.append(sid)
        return {"z__context": f"{sid} state"} if sid == "A" else None

    from_function = sessions.aggregate_context(state_of, max_tokens=1000, count_tokens=len)
    assert asked == ["A"]
    assert _piece_rows(from_function) == [
        ("A", "z__context", "A state", 0.8),
        ("A", "memory:l4", "- open memory", 0.8),
    ]
    named = sessions.aggregate_context(state_of, ["Q", "A"], max_tokens=1000, count_tokens=len)
    assert asked == ["A", "Q", "A"]
    assert [p.source for p in named] == ["z__context", "memory:l4"]


def test_context_layers_filter_and_repeats() -> None:
    sessions = MemorySessions(store=False)
    contexts = {
        "A": {"a__context": "Same  Text", "b__context": "kept b"},
        "B": {"a__context": "same text", "c__context": "kept c"},
    }
    pieces = sessions.aggregate_context(contexts, max_tokens=1000, count_tokens=len)
    assert _piece_rows(pieces) == [
        ("A", "a__context", "Same  Text", 0.8),
        ("A", "b__context", "kept b", 0.8),
        ("B", "c__context", "kept c", 0.8),
    ]
    only = sessions.aggregate_context(
        contexts, max_tokens=1000, count_tokens=len, layers=["c__context", "b__context"]
    )
    assert [p.text for p in only] == ["kept b", "kept c"]
    assert sessions.aggregate_context(contexts, max_tokens=1000, count_tokens=len, layers=[]) == []


def test_context_memory_uses_query_and_strategy() -> None:
    sessions = MemorySessions(store=False, l1_size=1)
    memory = sessions.session("A")
    memory.add("kiwi fruit stock", importance=0.5)
    memory.add("newest thing", importance=0.5)
    plain = sessions.aggregate_context({}, max_tokens=1000, count_tokens=len)
    assert [(p.source, p.text) for p in plain] == [("memory:l4", "- newest thing")]
    kiwi = sessions.aggregate_context({}, max_tokens=1000, count_tokens=len, query="kiwi")
    assert [(p.source, p.text) for p in kiwi] == [
        ("memory:l1", "- newest thing"),  # equal importance: newer first
        ("memory:l4", "- kiwi fruit stock"),
    ]
    full = sessions.aggregate_context(
        {}, max_tokens=1000, count_tokens=len, strategy="comprehensive"
    )
    assert ("memory:l3", "- kiwi fruit stock") in [(p.source, p.text) for p in full]


def test_context_budget_counts_the_separator() -> None:
    sessions = MemorySessions(store=False)
    contexts = {"A": {"a__context": "first", "b__context": "second", "c__context": "x" * 50}}
    one = "[A · a__context]\nfirst"
    two = "[A · b__context]\nsecond"
    budget = len(one) + 2 + len(two)
    kept = sessions.aggregate_context(contexts, max_tokens=budget, count_tokens=len)
    assert [p.text for p in kept] == ["first", "second"]
    fewer = sessions.aggregate_context(contexts, max_tokens=budget - 1, count_tokens=len)
    assert [p.text for p in fewer] == ["first"]
    wide = sessions.aggregate_context(
        contexts, max_tokens=budget, count_tokens=len, separator="\n\n\n"
    )
    assert [p.text for p in wide] == ["first"]
