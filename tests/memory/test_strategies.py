"""Strategies (token shares of the cap per source) and single-tier reads."""

from __future__ import annotations

import pytest

from ctxpolicy.memory import STRATEGY_SHARES, TieredMemory, pack_memory, select_memory
from ctxpolicy.memory.strategies import render_candidates, strategy_shares


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


def test_balanced_reads_search_hits_then_recent_then_working_set():
    mem = _memory()
    got = select_memory(mem, strategy="balanced", query="topic3")
    assert _tiers(got) == sorted(_tiers(got), key=["l4", "l1", "l2"].index)
    related = [c.item.content for c in got if c.tier == "l4"]
    assert related and all("topic3" in text for text in related)
    recent = [c.item.content for c in got if c.tier == "l1"]
    assert recent[0] == "step 39 topic4"  # newest first
    assert {c.item.id for c in got} >= {i.id for i in mem.get_l2()}


def test_balanced_is_the_default():
    mem = _memory()
    assert select_memory(mem, query="topic1") == select_memory(
        mem, strategy="balanced", query="topic1"
    )


def test_comprehensive_adds_l3_summaries():
    mem = _memory()
    got = select_memory(mem, strategy="comprehensive", query="topic3")
    assert any(c.tier == "l3" for c in got)
    assert len(got) > len(select_memory(mem, strategy="balanced", query="topic3"))


def test_shares_choose_the_sources():
    mem = _memory()
    got = select_memory(mem, query="topic3", shares={"l1": 0.5})
    assert set(_tiers(got)) == {"l1"}
    got = select_memory(mem, strategy="minimal", query="topic3", shares={"search": 1})
    assert set(_tiers(got)) == {"l4"}


@pytest.mark.parametrize(
    ("shares", "expected"),
    [
        ({"search": 0.5, "l1": 0.5}, {"search": 0.5, "l1": 0.5}),
        ({"search": 1.0, "l2": 1.0}, {"search": 0.5, "l2": 0.5}),  # scaled down
    ],
)
def test_shares_are_checked_and_scaled(shares, expected):
    assert strategy_shares("balanced", shares) == expected
    assert strategy_shares(None) == dict(STRATEGY_SHARES["balanced"])


@pytest.mark.parametrize(
    ("shares", "name"), [({"l4": 0.2}, "l4"), ({"l1": 1.5}, "l1"), ({"l2": True}, "l2")]
)
def test_bad_shares_name_the_source(shares, name):
    with pytest.raises(ValueError, match=name):
        strategy_shares(None, shares)


def _rich_memory(n: int = 200) -> TieredMemory:
    mem = TieredMemory(20, 30, 100)
    for i in range(n):
        mem.add(
            f"run {i}: the {('cache', 'queue', 'disk')[i % 3]} usage was {i * 13 % 97} %",
            kind="agent",
        )
    return mem


@pytest.mark.parametrize("strategy", ["balanced", "comprehensive"])
@pytest.mark.parametrize("cap", [120, 600, 2_000])
def test_pack_memory_fills_the_cap_and_never_exceeds_it(strategy, cap, counter):
    mem = _rich_memory()
    packed = pack_memory(
        mem, strategy=strategy, query="cache usage", cap_tokens=cap, count_tokens=counter
    )
    used = counter(render_candidates(packed))
    assert 0.8 * cap <= used <= cap
    # query-relevant hits come first in priority (all "cache" items before any other
    # "usage" item), and are read chronologically
    related = [c for c in packed if c.tier == "l4"]
    assert related and "cache" in related[0].item.content
    if any("cache" not in c.item.content for c in related):
        cache_ids = {h.id for h in mem.search("cache", 500)}
        assert cache_ids <= {c.item.id for c in packed}
    assert [c.item.seq for c in related] == sorted(c.item.seq for c in related)
    keys = [c.item.id for c in packed]
    assert len(keys) == len(set(keys))


def test_each_source_gets_its_share_first(counter):
    mem = _rich_memory()
    packed = pack_memory(
        mem,
        shares={"search": 0.5, "l1": 0.5},
        query="disk usage",
        cap_tokens=400,
        count_tokens=counter,
    )
    by_tier = {
        t: counter(render_candidates([c for c in packed if c.tier == t])) for t in ("l4", "l1")
    }
    assert by_tier["l4"] >= 150 and by_tier["l1"] >= 150


def test_unused_share_goes_to_the_other_sources(counter):
    mem = TieredMemory(5, 5, 10)
    for i in range(5):
        mem.add(f"recent item {i}", importance=0.1)
    packed = pack_memory(
        mem,
        strategy="balanced",
        query="nothing matches zzz",
        cap_tokens=1_000,
        count_tokens=counter,
    )
    assert {c.tier for c in packed} == {"l1"}
    assert len(packed) == 5


def test_pack_memory_limit_and_minimal(counter):
    mem = _rich_memory()
    assert (
        len(pack_memory(mem, query="cache", cap_tokens=5_000, count_tokens=counter, limit=4)) == 4
    )
    assert pack_memory(mem, strategy="minimal", cap_tokens=5_000, count_tokens=counter) == []
    assert pack_memory(mem, cap_tokens=0, count_tokens=counter) == []


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
