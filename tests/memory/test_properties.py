"""Invariants of the tiers and of the collector's cap, checked on random histories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.memory import TieredMemory
from ctxpolicy.memory.collector import collect_memory

from .conftest import count_cl100k, make_request

_importance = st.floats(0, 1, allow_nan=False)
_sizes = st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8))


def _reference_l2(importances, size, threshold=0.6):
    """Seed 004's promotion rule, written the slow obvious way."""
    l2: list[tuple[float, int]] = []
    for seq, imp in enumerate(importances):
        if len(l2) < size:
            if imp > threshold:
                l2.append((imp, seq))
        elif imp > min(l2)[0]:
            l2.remove(min(l2))
            l2.append((imp, seq))
    return sorted(l2, key=lambda e: (-e[0], -e[1]))


@settings(max_examples=150, deadline=None)
@given(importances=st.lists(_importance, max_size=60), sizes=_sizes)
def test_tiers_follow_the_seed_rules(importances, sizes):
    l1, l2, l3 = sizes
    mem = TieredMemory(l1, l2, l3)
    for i, imp in enumerate(importances):
        mem.add(f"item {i}", importance=imp)
    n = len(importances)
    assert [i.seq for i in mem.get_l1()] == list(range(max(0, n - l1), n))
    assert [(i.importance, i.seq) for i in mem.get_l2()] == _reference_l2(importances, l2)
    evicted = max(0, n - l1)
    assert [i.seq for i in mem.get_l3()] == list(range(max(0, evicted - l3), evicted))
    assert mem.stats()["l4"] == evicted


_contents = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=120
).filter(lambda s: s.strip())


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.tuples(_contents, _importance), min_size=1, max_size=40),
    cap=st.integers(0, 300),
    spec=st.sampled_from(
        [
            {"strategy": "balanced"},
            {"strategy": "comprehensive"},
            {"tier": "l1"},
            {"tier": "l2"},
            {"tier": "l3"},
            {"tier": "l4", "limit": 10},
        ]
    ),
    query=st.none() | _contents,
)
def test_collected_text_never_exceeds_the_cap(items, cap, spec, query):
    mem = TieredMemory(5, 5, 10)
    for content, imp in items:
        mem.add(content, importance=imp)
    text = collect_memory(
        make_request({"type": "memory", **spec}, services={"memory": mem}, cap=cap, query=query)
    )
    assert text is None or (text and count_cl100k(text) <= cap)
