"""Seed 004 §5.2 strategies and single-tier reads."""

from __future__ import annotations

import pytest

from ctxpolicy.memory import TieredMemory, select_memory


def _memory() -> TieredMemory:
    mem = TieredMemory(12, 4, 30)
    for i in range(40):
        kind = "user" if i % 10 == 0 else "subtask"
        mem.add(f"step {i} topic{i % 7}", kind=kind)
    return mem


def _tiers(candidates):
    return [c.tier for c in candidates]


def test_minimal_selects_nothing():
    assert select_memory(_memory(), strategy="minimal") == []


def test_balanced_is_recent_five_then_three_related_then_working_set():
    mem = _memory()
    got = select_memory(mem, strategy="balanced", query="topic3")
    assert [c.item.content for c in got[:5]] == [
        f"step {i} topic{i % 7}" for i in range(39, 34, -1)
    ]
    l2 = [c.item.content for c in got if c.tier == "l2"]
    assert l2 == [i.content for i in mem.get_l2() if i.content in l2]
    assert {c.item.id for c in got} >= {i.id for i in mem.get_l2()}
    related = [c for c in got if c.tier == "l4"]
    assert 1 <= len(related) <= 3
    assert all("topic3" in c.item.content for c in related)
    assert _tiers(got) == sorted(_tiers(got), key=["l1", "l4", "l2"].index)


def test_balanced_is_the_default():
    mem = _memory()
    assert select_memory(mem, query="topic1") == select_memory(
        mem, strategy="balanced", query="topic1"
    )


def test_comprehensive_reads_more_and_adds_l3_summaries():
    mem = _memory()
    got = select_memory(mem, strategy="comprehensive", query="topic3")
    assert len([c for c in got if c.tier == "l1"]) == 10
    assert len([c for c in got if c.tier == "l4"]) <= 5
    assert any(c.tier == "l3" for c in got)
    assert len(got) > len(select_memory(mem, strategy="balanced", query="topic3"))


def test_candidates_are_deduplicated_by_id_and_content():
    mem = TieredMemory(5, 5, 5)
    mem.add("same text", kind="user")
    mem.add("Same   TEXT", kind="user")
    mem.add("other", kind="user")
    got = select_memory(mem, strategy="comprehensive", query="same text")
    keys = [c.item.content.casefold().split() for c in got]
    assert len(keys) == len({tuple(k) for k in keys}) == 2
    ids = [c.item.id for c in got]
    assert len(ids) == len(set(ids))


def test_l4_query_falls_back_to_newest_l1_item():
    mem = TieredMemory(1, 1, 5)
    mem.add("kiwi harvest report", importance=0.1)
    mem.add("unrelated note", importance=0.1)
    mem.add("kiwi question", importance=0.1)
    got = select_memory(mem, tier="l4")
    assert [c.item.content for c in got] == ["kiwi harvest report"]


@pytest.mark.parametrize(("tier", "expected"), [("l1", 10), ("l2", 4), ("l3", 20)])
def test_single_tier_default_limits(tier, expected):
    assert len(select_memory(_memory(), tier=tier)) == expected


def test_single_tier_limit_and_strategy_limit():
    mem = _memory()
    assert len(select_memory(mem, tier="l1", limit=3)) == 3
    assert len(select_memory(mem, tier="l4", query="topic2", limit=2)) == 2
    assert len(select_memory(mem, strategy="comprehensive", query="topic2", limit=7)) == 7


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"strategy": "balanced", "tier": "l1"}, "either"),
        ({"strategy": "lavish"}, "strategy"),
        ({"tier": "l9"}, "tier"),
        ({"limit": 0}, "limit"),
    ],
)
def test_select_validates(kwargs, name):
    with pytest.raises(ValueError, match=name):
        select_memory(_memory(), **kwargs)
