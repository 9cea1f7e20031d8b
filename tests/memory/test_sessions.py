"""Sessions: per-session memory, aggregation, distribution, BaseStore persistence."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from ctxpolicy.memory import MemorySessions, TieredMemory

from .conftest import count_cl100k

pytestmark = pytest.mark.langgraph  # BaseStore persistence uses langgraph's InMemoryStore


def test_sessions_have_private_l1_l2():
    sessions = MemorySessions(store=False)
    sessions.session("a").add("only in a", kind="user")
    assert sessions.session("b").get_l1() == []
    assert sessions.session("a") is sessions.session("a")
    assert sessions.session_ids == ("a", "b")


def test_session_ids_are_validated():
    sessions = MemorySessions(store=False)
    for bad in ("", "a.b", 3):
        with pytest.raises(ValueError, match="session_id"):
            sessions.session(bad)  # type: ignore[arg-type]


def test_default_store_is_a_langgraph_in_memory_store():
    assert isinstance(MemorySessions().store, InMemoryStore)
    assert MemorySessions(store=False).store is None


def test_distribute_broadcasts_one_item_to_every_open_session():
    sessions = MemorySessions(store=False)
    for sid in ("a", "b", "c"):
        sessions.session(sid)
    delivered = sessions.distribute("deploy freeze starts at 18:00", kind="user")
    assert set(delivered) == {"a", "b", "c"}
    assert len({item.id for item in delivered.values()}) == 1
    for sid in ("a", "b", "c"):  # into L2 (the target of distribute); L1 stays private
        assert [i.content for i in sessions.session(sid).get_l2()] == [
            "deploy freeze starts at 18:00"
        ]
        assert sessions.session(sid).get_l1() == []


def test_distribute_filtered_and_to_named_sessions():
    sessions = MemorySessions(store=False)
    sessions.session("ops").add("ops note", tags=["ops"])
    sessions.session("dev")
    got = sessions.distribute(
        "pager rotation changed",
        where=lambda sid, mem: any("ops" in i.tags for i in mem.get_l1()),
    )
    assert set(got) == {"ops"}
    got = sessions.distribute("new session hello", session_ids=["dev", "qa"])
    assert set(got) == {"dev", "qa"} and "qa" in sessions
    with pytest.raises(ValueError, match="where"):
        sessions.distribute("x", where=3)  # type: ignore[arg-type]


def test_aggregate_merges_ranks_dedupes_and_trims():
    sessions = MemorySessions(store=False)
    sessions.session("a").add("a: minor detail", importance=0.2)
    sessions.session("a").add("a: user goal is to ship v2", kind="user", importance=0.9)
    sessions.session("b").add("b: tool failed with 500", kind="tool_failure")
    sessions.distribute("shared: release on Friday", importance=0.95)
    merged = sessions.aggregate(strategy="balanced")
    contents = [c.item.content for c in merged]
    assert contents[0] == "shared: release on Friday"  # ranked by importance
    assert contents.count("shared: release on Friday") == 1  # distributed once, counted once
    assert contents.index("a: user goal is to ship v2") < contents.index("b: tool failed with 500")
    assert contents[-1] == "a: minor detail"
    trimmed = sessions.aggregate(strategy="balanced", max_tokens=20, count_tokens=count_cl100k)
    rendered = "\n".join(
        f"- [{c.item.kind}] {c.item.content}" if c.item.kind else f"- {c.item.content}"
        for c in trimmed
    )
    assert 0 < len(trimmed) < len(merged)
    assert count_cl100k(rendered) <= 20
    assert len(sessions.aggregate(["a"], tier="l1")) == 2  # its own: L1 is private
    assert len(sessions.aggregate(["a"], tier="l2")) >= 1  # the shared one is in L2
    assert len(sessions.aggregate(limit=2)) == 2


def test_aggregate_with_a_budget_packs_by_shares_across_sessions():
    sessions = MemorySessions(store=False)
    for sid in ("a", "b"):
        for i in range(40):
            sessions.session(sid).add(
                f"{sid}: the queue depth was {i * 7} at step {i}", kind="agent"
            )
    packed = sessions.aggregate(
        strategy="balanced", query="queue depth", max_tokens=400, count_tokens=count_cl100k
    )
    text = "\n".join(f"- [{c.item.kind}] {c.item.content}" for c in packed)
    assert 0.8 * 400 <= count_cl100k(text) <= 400
    assert {c.item.content[0] for c in packed} == {"a", "b"}  # both sessions contribute
    only_recent = sessions.aggregate(shares={"l1": 1.0}, max_tokens=400, count_tokens=count_cl100k)
    assert {c.tier for c in only_recent} == {"l1"}


def test_aggregate_errors():
    sessions = MemorySessions(store=False)
    with pytest.raises(KeyError, match="nope"):
        sessions.aggregate(["nope"])
    with pytest.raises(ValueError, match="count_tokens"):
        sessions.aggregate(max_tokens=10)


def test_l3_l4_persist_through_base_store_round_trip():
    store = InMemoryStore()
    mem = TieredMemory(2, 2, 3, store=store, namespace=("agent", "s1"))
    for i in range(10):
        mem.add(f"observation {i} about quasar{i}", importance=0.1)
    assert len(store.search(("agent", "s1", "summaries"), limit=100)) == 8

    restored = TieredMemory.from_store(store, namespace=("agent", "s1"), l3_size=3)
    assert [i.to_data() for i in restored.get_l3()] == [i.to_data() for i in mem.get_l3()]
    assert [i.id for i in restored.search("quasar2", 1)] == [i.id for i in mem.search("quasar2", 1)]
    assert restored.search("quasar2", 1)[0].content == "observation 2 about quasar2"
    # L1/L2 are written through too: the restored memory holds what the old one held
    assert [i.to_data() for i in restored.get_l1()] == [i.to_data() for i in mem.get_l1()]
    assert restored.get_l2() == mem.get_l2() == []  # importance 0.1: nothing entered L2
    # sequence numbers continue after the stored ones; new summaries keep flowing to the store
    assert restored.add("next").seq == 10
    assert TieredMemory.from_store(store, namespace=("other",)).get_l3() == []


def test_restore_reads_every_page_of_a_store_with_more_than_one_page_of_summaries():
    store = InMemoryStore()
    mem = TieredMemory(1, 1, 3, store=store, namespace=("agent", "many"))
    for i in range(1002):  # 1,001 summaries: two full pages of 500 and one of 1
        mem.add(f"observation {i} about quasar{i}", importance=0.1)
    restored = TieredMemory.from_store(store, namespace=("agent", "many"), l3_size=3)
    assert restored.stats()["l4"] == 1001 and restored.stats()["indexed"] == 1002  # + L1
    assert [i.seq for i in restored.get_l3()] == [998, 999, 1000]
    for n in (0, 499, 500, 999, 1000):  # first and last of each page
        (hit,) = restored.search(f"quasar{n}", 1)
        assert hit.content == f"observation {n} about quasar{n}"
    assert restored.add("next").seq == 1002


def test_full_text_survives_the_store_and_a_buried_line_is_found_again():
    store = InMemoryStore()
    mem = TieredMemory(2, 2, 3, store=store, namespace=("agent", "s2"))
    lines = [f"10:00:{i:02d} INFO worker ok batch={i}" for i in range(100)]
    lines[63] = "10:01:03 INFO worker config: replica count = 7 (rev 12)"
    mem.add("run_logs -> " + "\n".join(lines), kind="tool_success", item_id="dump")
    for i in range(5):
        mem.add(f"later step {i}", importance=0.1)
    stored = store.get(("agent", "s2", "summaries"), "dump").value
    assert stored["full_content"].count("\n") == 99 and len(stored["content"]) < 600
    restored = TieredMemory.from_store(store, namespace=("agent", "s2"))
    (hit,) = restored.search("replica count", 1)
    assert hit.id == "dump" and hit.content == lines[63]
    assert restored.original("dump").content == mem.original("dump").content
    assert restored.stats()["indexed"] == 6  # the summarized ones and L1's (stored too)


def test_sessions_restore_their_l3_l4_from_the_store():
    store = InMemoryStore()
    first = MemorySessions(store=store, l1_size=1)
    first.session("s").add("the launch code is tangerine", importance=0.1)
    first.session("s").add("filler", importance=0.1)
    second = MemorySessions(store=store, l1_size=1)
    assert [i.content for i in second.session("s").search("launch code", 1)] == [
        "the launch code is tangerine"
    ]
    assert second.session("other").get_l3() == []


def test_close_session():
    sessions = MemorySessions(store=False)
    sessions.session("a")
    sessions.close("a")
    assert "a" not in sessions
    with pytest.raises(KeyError):
        sessions.close("a")
