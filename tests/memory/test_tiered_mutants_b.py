"""Exact behaviour of `TieredMemory`'s public methods: validation messages, defaults,
add/add_message/record/tasks, the L2 rules, promotion, reads (limits and orders),
stats and search."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.vectorstores import VectorStore
from langgraph.store.memory import InMemoryStore

from ctxpolicy.memory import TieredMemory
from ctxpolicy.memory.items import MemoryHit, MemoryItem
from ctxpolicy.memory.summaries import EXTRACTIVE_MAX_TOKENS
from ctxpolicy.memory.tiered import (
    _matched_terms,
    _newer_first,
    _preferred_statements,
    _unit_weight,
    item_to_document_metadata,
    unit_signals,
)
from ctxpolicy.recall.sqlite import SQLiteRecallIndex


def contents(items):
    return [i.content for i in items]


class _Recorder(VectorStore):
    """A vector store that records what is added (and finds nothing)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[dict[str, Any]], list[str]]] = []

    def add_texts(self, texts, metadatas=None, *, ids=None, **kwargs):
        self.calls.append((list(texts), list(metadatas or []), list(ids or [])))
        return list(ids or [])

    def similarity_search(self, query, k=4, **kwargs):
        return []

    @classmethod
    def from_texts(cls, texts, embedding, metadatas=None, **kwargs):
        raise NotImplementedError


# ------------------------------------------------------------------ construction


def test_defaults():
    mem = TieredMemory()
    assert (mem.l1_size, mem.l2_size, mem.l3_size) == (50, 100, 500)
    assert mem.l2_policy == "refresh"
    assert mem.namespace == ("ctxpolicy", "memory")
    assert mem.vector_store is None
    assert isinstance(mem.index, SQLiteRecallIndex)
    assert mem.total_added == 0
    data = mem.to_data()
    assert data["l2_threshold"] == 0.6
    assert data["summary_tokens"] == EXTRACTIVE_MAX_TOKENS
    assert mem.stats() == {"l1": 0, "l2": 0, "l3": 0, "l4": 0, "indexed": 0, "pending": 0}
    mem.add("x", importance=0.9)  # auto_promote by default
    assert mem.stats()["pending"] == 0 and len(mem.get_l2()) == 1


def test_smallest_sizes_are_accepted():
    mem = TieredMemory(1, 1, 1, summary_tokens=1, l2_threshold=0.0, namespace=("n",))
    assert (mem.l1_size, mem.l2_size, mem.l3_size) == (1, 1, 1)
    assert mem.namespace == ("n",)
    assert TieredMemory(l2_threshold=1.0).to_data()["l2_threshold"] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"l1_size": 0}, "l1_size must be an integer >= 1, got 0"),
        ({"l1_size": True}, "l1_size must be an integer >= 1, got True"),
        ({"l2_size": 2.0}, "l2_size must be an integer >= 1, got 2.0"),
        ({"l3_size": -1}, "l3_size must be an integer >= 1, got -1"),
        ({"summary_tokens": 0}, "summary_tokens must be an integer >= 1, got 0"),
        ({"l2_policy": "lru"}, "l2_policy must be one of refresh, seed; got 'lru'"),
        (
            {"namespace": ("a.b",)},
            "namespace must be a non-empty tuple of non-empty strings without '.', got ('a.b',)",
        ),
        (
            {"namespace": ()},
            "namespace must be a non-empty tuple of non-empty strings without '.', got ()",
        ),
        (
            {"namespace": ("a", "")},
            "namespace must be a non-empty tuple of non-empty strings without '.', got ('a', '')",
        ),
        (
            {"namespace": ["a"]},
            "namespace must be a non-empty tuple of non-empty strings without '.', got ['a']",
        ),
        (
            {"namespace": ("a", 1)},
            "namespace must be a non-empty tuple of non-empty strings without '.', got ('a', 1)",
        ),
    ],
)
def test_constructor_messages(kwargs, message):
    with pytest.raises(ValueError) as info:
        TieredMemory(**kwargs)
    assert str(info.value) == message


# ------------------------------------------------------------------ add


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tags": "abc"}, "tags must be a sequence of strings, got 'abc'"),
        ({"tags": ["a", 1]}, "tags must be a sequence of strings, got ['a', 1]"),
        ({"metadata": [1]}, "metadata must be a mapping, got [1]"),
        ({"item_id": ""}, "item_id must be a non-empty string, got ''"),
        ({"item_id": 5}, "item_id must be a non-empty string, got 5"),
        ({"tier": "l3"}, "tier must be 'l1' or 'l2', got 'l3'"),
    ],
)
def test_add_messages(kwargs, message):
    mem = TieredMemory()
    with pytest.raises(ValueError) as info:
        mem.add("text", **kwargs)
    assert str(info.value) == message
    assert mem.total_added == 0 and mem.stats()["indexed"] == 0


@pytest.mark.parametrize("content", ["", "   ", None, 5])
def test_add_refuses_empty_or_non_string_content(content):
    with pytest.raises(ValueError) as info:
        TieredMemory().add(content)
    assert str(info.value) == f"content must be a non-empty string, got {content!r}"


def test_add_returns_the_stored_item_exactly():
    mem = TieredMemory()
    meta = {"subject": "x"}
    item = mem.add(
        "hello", importance=0.4, tags=["a", "b"], metadata=meta, kind="note", item_id="i"
    )
    assert (item.id, item.content, item.importance, item.seq) == ("i", "hello", 0.4, 0)
    assert (item.kind, item.tags, item.metadata) == ("note", ("a", "b"), {"subject": "x"})
    meta["subject"] = "changed"
    assert mem.original("i").metadata == {"subject": "x"}
    second = mem.add("world")
    assert second.seq == 1 and len(second.id) == 32 and second.id != "i"
    assert (second.kind, second.tags, second.metadata) == (None, (), {})
    assert mem.total_added == 2


def test_add_scores_a_tool_result_without_its_name_prefix():
    mem = TieredMemory()
    # "calc -> 42" reads as a stated fact; without the prefix it is only a value
    tool = mem.add("calc -> 42", kind="tool_success", metadata={"tool": "calc"})
    plain = mem.add("calc -> 42", kind="tool_success")
    assert tool.importance == pytest.approx(0.75)
    assert plain.importance == pytest.approx(0.85)
    assert mem.add("w", kind="user").importance == 0.9
    assert mem.add("z", metadata={"importance": 0.33}).importance == 0.33


def test_add_indexes_units_with_role_tool_and_key():
    index = SQLiteRecallIndex()
    mem = TieredMemory(namespace=("a", "b"), index=index)
    mem.add("alpha calc -> 42", metadata={"tool": "calc"}, kind="tool_success", item_id="x")
    mem.add("alpha plain", item_id="y", metadata={"tool": 3})
    units = sorted((h.unit for h in index.search("memory:a.b", ["alpha"], limit=5)), key=str)
    assert [(u.message_id, u.position, u.role, u.tool) for u in units] == [
        ("0:x", 0, "tool_success", "calc"),
        ("1:y", 1, "memory", None),
    ]
    assert index.search("memory:ctxpolicy.memory", ["alpha"], limit=5) == []


def test_add_to_l2_directly():
    mem = TieredMemory(2, 2, 5)
    a = mem.add("alpha", importance=0.2, tier="l2")  # below the threshold: taken anyway
    assert mem.get_l1() == [] and contents(mem.get_l2()) == ["alpha"]
    assert mem.stats() == {"l1": 0, "l2": 1, "l3": 0, "l4": 0, "indexed": 1, "pending": 0}
    assert [h.tier for h in mem.search("alpha")] == ["l2"]
    mem.add("beta", importance=0.9, tier="l2")
    mem.add("gamma", importance=0.5, tier="l2")  # full: evicts the least important
    assert contents(mem.get_l2()) == ["beta", "gamma"]
    mem.add("delta", importance=0.5, tier="l2")  # evicts the oldest of the least important
    assert contents(mem.get_l2()) == ["beta", "delta"]
    mem.add("beta again", importance=0.1, tier="l2", item_id=mem.get_l2()[0].id)
    assert contents(mem.get_l2()) == ["delta", "beta again"]  # same id: replaced, no eviction
    assert a.id not in {i.id for i in mem.get_l2()}


def test_add_to_l2_directly_keeps_subjects_for_refresh_only():
    mem = TieredMemory(3, 5, 5)
    mem.add("The deploy region is eu-west-3.", importance=0.9, tier="l2")
    mem.add("Correction: the deploy region is now us-east-1.", importance=0.7)
    assert contents(mem.get_l2()) == ["Correction: the deploy region is now us-east-1."]
    assert mem.get_l2()[0].importance == 0.9
    seed = TieredMemory(3, 5, 5, l2_policy="seed")
    seed.add("The deploy region is eu-west-3.", importance=0.9, tier="l2")
    seed.add("Correction: the deploy region is now us-east-1.", importance=0.7)
    assert len(seed.get_l2()) == 2


def test_l1_overflow_moves_items_to_pending_when_not_promoting():
    mem = TieredMemory(2, 5, 5, auto_promote=False)
    mem.add("a", importance=0.1)
    mem.add("b", importance=0.1)
    assert mem.stats()["pending"] == 2  # offered to L2 not yet
    mem.add("c", importance=0.1)
    assert mem.stats() == {"l1": 2, "l2": 0, "l3": 0, "l4": 0, "indexed": 3, "pending": 4}
    assert mem.promote() == 1  # one summary, nothing above the threshold
    assert mem.stats() == {"l1": 2, "l2": 0, "l3": 1, "l4": 1, "indexed": 3, "pending": 0}
    assert mem.promote() == 0


# ------------------------------------------------------------------ L2 rules


def test_seed_policy_threshold_and_return_counts():
    mem = TieredMemory(5, 2, 5, l2_policy="seed", auto_promote=False)
    mem.add("at threshold", importance=0.6)
    assert mem.promote() == 0 and mem.get_l2() == []
    mem.add("above", importance=0.61)
    mem.add("high", importance=0.9)
    assert mem.promote() == 2
    mem.add("equal to min", importance=0.61)
    assert mem.promote() == 0
    mem.add("beats min", importance=0.62)
    assert mem.promote() == 1
    assert contents(mem.get_l2()) == ["high", "beats min"]
    assert mem.stats()["l2"] == 2


def test_refresh_policy_return_counts():
    mem = TieredMemory(5, 5, 5, auto_promote=False)
    mem.add("The deploy region is eu-west-3.", importance=0.9)
    assert mem.promote() == 1
    mem.add("Correction: the deploy region is now us-east-1.", importance=0.5)
    assert mem.promote() == 1  # a supersession counts once
    mem.add("at threshold", importance=0.6)
    assert mem.promote() == 0


def test_supersession_keeps_the_higher_importance_of_the_new_item():
    mem = TieredMemory(5, 5, 5)
    mem.add("The deploy region is eu-west-3.", importance=0.7)
    mem.add("Correction: the deploy region is now us-east-1.", importance=0.95)
    (item,) = mem.get_l2()
    assert item.importance == 0.95 and "us-east-1" in item.content


def test_get_l2_orders_by_importance_then_newest():
    mem = TieredMemory(5, 5, 5)
    mem.add("a", importance=0.7)
    mem.add("b", importance=0.9)
    mem.add("c", importance=0.7)
    assert contents(mem.get_l2()) == ["b", "c", "a"]


# ------------------------------------------------------------------ reads


def test_get_l1_and_get_l3_limits_keep_the_newest_oldest_first():
    mem = TieredMemory(3, 5, 4)
    for i in range(9):
        mem.add(f"item {i}", importance=0.1)
    assert contents(mem.get_l1()) == ["item 6", "item 7", "item 8"]
    assert contents(mem.get_l1(1)) == ["item 8"]
    assert contents(mem.get_l1(2)) == ["item 7", "item 8"]
    assert contents(mem.get_l1(3)) == ["item 6", "item 7", "item 8"]
    assert [i.seq for i in mem.get_l3()] == [2, 3, 4, 5]
    assert [i.seq for i in mem.get_l3(1)] == [5]
    assert [i.seq for i in mem.get_l3(3)] == [3, 4, 5]
    assert [i.seq for i in mem.get_l3(4)] == [2, 3, 4, 5]
    assert [i.seq for i in mem.get_l3(5)] == [2, 3, 4, 5]


@pytest.mark.parametrize("limit", [0, -1, True, 1.0, "2"])
def test_read_limits_are_checked(limit):
    mem = TieredMemory()
    mem.add("x")
    for read in (mem.get_l1, mem.get_l3, mem.tasks):
        with pytest.raises(ValueError) as info:
            read(limit)
        assert str(info.value) == f"limit must be an integer >= 1, got {limit!r}"
    with pytest.raises(ValueError) as info:
        mem.search("x", limit)
    assert str(info.value) == f"limit must be an integer >= 1, got {limit!r}"


def test_stats_count_each_tier():
    mem = TieredMemory(2, 1, 2)
    mem.add("a", importance=0.9)
    for word in ("b", "c", "d", "e"):
        mem.add(word, importance=0.1)
    assert mem.stats() == {"l1": 2, "l2": 1, "l3": 2, "l4": 3, "indexed": 5, "pending": 0}


def test_original_is_the_newest_version():
    mem = TieredMemory()
    mem.add("v1", item_id="k")
    mem.add("v2", item_id="k")
    assert mem.original("k").content == "v2" and mem.original("k").seq == 1
    assert mem.original("nope") is None
    assert mem.has("k") and not mem.has("nope")


# ------------------------------------------------------------------ messages


def test_add_message_exact_items():
    mem = TieredMemory()
    user = mem.add_message(HumanMessage("the cache TTL is 300 s", id="u1"), importance=0.3)
    assert (user.id, user.content, user.kind, user.importance) == (
        "u1",
        "the cache TTL is 300 s",
        "user",
        0.3,
    )
    assert user.metadata == {"role": "human", "message_id": "u1"}
    # a known id saying the same returns the stored item (tests/memory/test_edits.py:
    # saying something else replaces it)
    assert mem.add_message(HumanMessage("the cache TTL is 300 s", id="u1")) == user
    assert mem.add_message(AIMessage("  ", id="a0")) is None
    assert not mem.has("a0")
    assert mem.total_added == 1


def test_record_tool_steps_become_tasks_with_calls_and_parents():
    mem = TieredMemory(5, 5, 5)
    batch = [
        HumanMessage("please compute", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c1"}]),
        ToolMessage("42", tool_call_id="c1", name="calc", id="t1"),
        AIMessage("the answer is 42", id="a2"),
    ]
    added = mem.record(batch)
    assert [i.id for i in added] == ["h1", "a1", "t1", "a2"]
    call = added[1]
    assert call.content == 'calls calc({"x": 1})' and call.kind == "agent"
    assert call.metadata["tool_calls"] == [
        {"id": "c1", "name": "calc", "args": {"x": 1}, "parent_task_id": "h1"}
    ]
    step = added[2]
    assert (step.content, step.kind) == ("calc -> 42", "tool_success")
    assert step.metadata["task"] == {
        "task_id": "c1",
        "action": "calc",
        "parameters": {"x": 1},
        "result": "42",
        "success": True,
        "parent_task_id": "h1",
        "metadata": {"message_id": "t1"},
    }
    assert "task" not in added[3].metadata and "tool_calls" not in added[3].metadata
    (task,) = mem.tasks()
    assert (task.task_id, task.action, task.parent_task_id) == ("c1", "calc", "h1")
    assert mem.record(batch) == []


def test_record_without_a_human_message_has_no_parent():
    mem = TieredMemory(5, 5, 5)
    (call,) = mem.record(
        [AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])]
    )
    assert call.metadata["tool_calls"] == [
        {"id": "c1", "name": "f", "args": {}, "parent_task_id": None}
    ]


def test_record_a_parent_known_from_an_earlier_batch_is_kept():
    mem = TieredMemory(5, 5, 5)
    mem.record([HumanMessage("first", id="h1")])
    batch = [
        HumanMessage("first", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {"y": 2}, "id": "c1"}]),
    ]
    (call,) = mem.record(batch)
    assert call.metadata["tool_calls"][0]["parent_task_id"] == "h1"


def test_record_a_tool_result_in_a_later_batch_still_becomes_a_task():
    mem = TieredMemory(5, 5, 5)
    mem.add("junk calls", metadata={"tool_calls": [{"name": "x"}, "junk", {"id": ""}]})
    mem.record(
        [
            HumanMessage("please compute", id="h1"),
            AIMessage("", id="a1", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c1"}]),
        ]
    )
    (step,) = mem.record(
        [ToolMessage("boom", tool_call_id="c1", name="calc", id="t1", status="error")]
    )
    assert step.metadata["task"] == {
        "task_id": "c1",
        "action": "calc",
        "parameters": {"x": 1},
        "result": "boom",
        "success": False,
        "parent_task_id": "h1",
        "metadata": {"message_id": "t1"},
    }
    assert step.kind == "tool_failure"
    # a call that left L1 is no longer known: its late result is a plain item
    small = TieredMemory(1, 5, 5)
    small.record([AIMessage("", id="a1", tool_calls=[{"name": "calc", "args": {}, "id": "c1"}])])
    small.add("pushes the call out of L1")
    (late,) = small.record([ToolMessage("7", tool_call_id="c1", name="calc", id="t1")])
    assert "task" not in late.metadata


def _record_steps(mem: TieredMemory, n: int) -> None:
    for i in range(n):
        mem.record(
            [
                HumanMessage(f"request {i}", id=f"h{i}"),
                AIMessage("", id=f"a{i}", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}]),
                ToolMessage(f"result {i}", tool_call_id=f"c{i}", name="f", id=f"t{i}"),
            ]
        )


def test_tasks_newest_first_limited_then_oldest_first():
    mem = TieredMemory(50, 5, 5)
    _record_steps(mem, 4)
    assert [t.task_id for t in mem.tasks()] == ["c0", "c1", "c2", "c3"]
    assert [t.task_id for t in mem.tasks(2)] == ["c2", "c3"]
    assert [t.task_id for t in mem.tasks(1)] == ["c3"]
    assert [t.task_id for t in mem.tasks(4)] == ["c0", "c1", "c2", "c3"]
    assert [t.task_id for t in mem.tasks(9)] == ["c0", "c1", "c2", "c3"]
    # a newer version of an item without a task hides the older one's task
    mem.add("replaced", item_id="t1")
    assert [t.task_id for t in mem.tasks()] == ["c0", "c2", "c3"]
    assert TieredMemory().tasks() == []


def test_task_summaries_in_l3():
    mem = TieredMemory(1, 5, 5)
    mem.record(
        [
            HumanMessage("go", id="h1"),
            AIMessage("", id="a1", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c1"}]),
            ToolMessage("The answer is 42.", tool_call_id="c1", name="calc", id="t1"),
            ToolMessage("", tool_call_id="c1", name="calc", id="t2"),
        ]
    )
    mem.add("last", importance=0.1)
    l3 = {i.id: i for i in mem.get_l3()}
    step = l3["t1"]
    assert step.content == "calc(x=1) -> ok: The answer is 42."
    assert step.metadata["task_summary"] == {
        "task_id": "c1",
        "action": "calc",
        "param_summary": "x=1",
        "result_summary": "The answer is 42.",
        "success": True,
        "parent_task_id": "h1",
        "tags": [],
        "importance": step.importance,
    }
    assert step.metadata["task"]["result"] == "The answer is 42."
    assert l3["t2"].content == "calc(x=1) -> ok:"
    assert l3["t2"].metadata["task_summary"]["result_summary"] == ""
    assert l3["h1"].content == "go" and "task_summary" not in l3["h1"].metadata


def test_an_empty_summary_keeps_the_full_text():
    mem = TieredMemory(1, 5, 5, summarizer=lambda text: "")
    mem.add("alpha", importance=0.1)
    mem.add("beta", importance=0.1)
    assert contents(mem.get_l3()) == ["alpha"]


def test_summaries_go_to_the_vector_store_and_the_store():
    vectors = _Recorder()
    store = InMemoryStore()
    mem = TieredMemory(
        1, 5, 5, vector_store=vectors, store=store, namespace=("s",), summarizer=str.upper
    )
    a = mem.add("alpha", importance=0.1, item_id="a", tags=["t"])
    mem.add("beta", importance=0.1, item_id="b")
    mem.add("gamma", importance=0.1, item_id="c")
    summary_a = mem.get_l3()[0]
    assert summary_a.content == "ALPHA" and summary_a.id == "a"
    assert vectors.calls == [
        (["ALPHA"], [item_to_document_metadata(summary_a)], ["a"]),
        (["BETA"], [item_to_document_metadata(mem.get_l3()[1])], ["b"]),
    ]
    entry = store.get(("s", "summaries"), "a")
    assert entry.value == {**summary_a.to_data(), "full_content": "alpha"}
    assert a.content == "alpha"
    assert mem.stats()["l4"] == 2


# ------------------------------------------------------------------ search


def test_search_arguments():
    mem = TieredMemory()
    mem.add("the kiwi is green", item_id="k")
    with pytest.raises(TypeError) as info:
        mem.search(None)  # type: ignore[arg-type]
    assert str(info.value) == "query must be a string, got None"
    with pytest.raises(ValueError) as info:
        mem.search("kiwi", 1, tiers=["l9"])
    assert str(info.value) == "tiers must be among l1, l2, l3, l4; got ['l9']"
    assert mem.search("") == [] and mem.search("  \n") == []
    assert mem.search("the") == []  # only stop words: no terms
    assert [h.id for h in mem.search("kiwi")] == ["k"]
    assert [h.id for h in mem.search("kiwi", tiers=("l1", "l2", "l3", "l4"))] == ["k"]
    assert mem.search("kiwi", tiers=()) == []
    assert mem.search("kiwi", tiers=("l4",)) == []


def test_search_default_limit_is_five():
    mem = TieredMemory(10, 5, 5)
    for i in range(7):
        mem.add(f"kiwi number {i}", importance=0.1)
    assert len(mem.search("kiwi")) == 5
    assert len(mem.search("kiwi", 6)) == 6
    assert len(mem.search("kiwi", 1)) == 1


def test_search_hit_fields():
    mem = TieredMemory(1, 5, 5)
    mem.add("kiwi alpha", importance=0.4, kind="note", tags=["t"], metadata={"m": 1}, item_id="k")
    mem.add("other", importance=0.1)
    (hit,) = mem.search("kiwi")
    assert (hit.id, hit.content, hit.importance, hit.seq, hit.kind) == (
        "k",
        "kiwi alpha",
        0.4,
        0,
        "note",
    )
    assert (hit.tags, hit.metadata, hit.tier, hit.part, hit.whole) == (
        ("t",),
        {"m": 1},
        "l3",
        0,
        True,
    )
    assert hit.score > 0


def test_search_tiers_of_an_older_version_in_l2():
    mem = TieredMemory(1, 5, 5)
    mem.add("kiwi one", importance=0.9, item_id="k")
    mem.add("kiwi two", importance=0.1, item_id="k")  # newer version, not in L2 by itself
    mem.add("filler", importance=0.1)
    hits = mem.search("kiwi", 5)
    assert [(h.content, h.tier) for h in hits] == [("kiwi two", "l3")]


def test_search_prefers_answers_to_questions():
    mem = TieredMemory(10, 5, 5)
    mem.add("what is the api port?", importance=0.5)
    mem.add("the api port is 8080", importance=0.5)
    assert contents(mem.search("api port", 2)) == ["the api port is 8080", "what is the api port?"]


# ------------------------------------------------------------------ ranking helpers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the port is 8080", (True, True, False, False)),
        ("what is the port?", (False, False, False, True)),
        ("Actually the port is open", (True, False, True, False)),
        ("the port is now 9090", (True, True, True, False)),
        ("the  port\n is 8080 ", (True, True, False, False)),
        ("port 8080", (False, False, False, False)),
    ],
)
def test_unit_signals(text, expected):
    assert unit_signals(text) == expected


def test_matched_terms_ignore_a_plural_s_either_way():
    assert _matched_terms("Ports and hosts", ["port", "host", "hostss", "cat"]) == {
        "port",
        "host",
        "hostss",
    }
    assert _matched_terms("port and cats", ["ports", "cat", "cats", "dog", "ducks"]) == {
        "ports",
        "cat",
        "cats",
    }
    assert _matched_terms("portal", ["port"]) == frozenset()


def test_unit_weight_exact_factors():
    plain = MemoryItem(id="i", content="x", importance=0.5, seq=0)
    tool = MemoryItem(id="i", content="x", importance=1.0, seq=0, metadata={"tool": "calc"})
    assert _unit_weight("what is the port?", 1, plain, ["port"]) == pytest.approx(0.9)
    assert _unit_weight("the port is 8080", 1, plain, ["port", "host"]) == pytest.approx(1.3)
    assert _unit_weight("Actually the port is 8080", 1, plain, ["port"]) == pytest.approx(2.34)
    assert _unit_weight("Actually the port is open", 1, plain, []) == pytest.approx(1.2)
    # the first unit of a tool result is read without its "name -> " prefix
    assert _unit_weight("calc -> 42", 0, tool, ["calc"]) == pytest.approx(1.8)
    assert _unit_weight("calc -> 42", 1, tool, ["calc"]) == pytest.approx(2.34)


def _hit(content, seq, part=0):
    return MemoryHit(
        id=f"i{seq}", content=content, importance=0.5, seq=seq, part=part, whole=part == 0
    )


_HITS = [
    _hit("the port is 8080", 0),
    _hit("what is the port?", 6),
    _hit("the port is 9090", 5),
    _hit("port is open now", 7),
    _hit("the port is 7070", 8),
    _hit("unrelated words", 9),
]


def test_preferred_statements_answers_then_corrections_then_newest():
    assert _preferred_statements(_HITS) == [4, 2, 0, 3]
    parts = [_hit("the port is 1", 3, part=1), _hit("the port is 2", 3, part=2)]
    assert _preferred_statements(parts) == [1, 0]
    fixes = [_hit("the port is 5", 9), _hit("actually the port is 6", 2)]
    assert _preferred_statements(fixes) == [1, 0]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (1, ["the port is 7070"]),
        (2, ["the port is 7070", "port is open now"]),
        (3, ["the port is 7070", "the port is 9090", "the port is 8080"]),
        (4, ["the port is 7070", "the port is 9090", "the port is 8080", "port is open now"]),
        (
            6,
            [
                "the port is 7070",
                "the port is 9090",
                "the port is 8080",
                "port is open now",
                "what is the port?",
                "unrelated words",
            ],
        ),
    ],
)
def test_newer_first_puts_at_most_two_newer_statements_before_a_hit(limit, expected):
    assert contents(_newer_first(_HITS, ["port"], limit)) == expected


def test_newer_first_takes_only_primary_hits_for_themselves():
    primary = [True, False, False, False, False, True]
    assert contents(_newer_first(_HITS, ["port"], 6, primary=primary)) == [
        "the port is 7070",
        "the port is 9090",
        "the port is 8080",
        "unrelated words",
    ]
    assert _newer_first(_HITS, ["port"], 6, primary=[False] * 6) == []
    assert _newer_first([], ["port"], 3) == []


def test_a_newer_statement_supersedes_every_l2_item_about_its_subject():
    mem = TieredMemory(5, 5, 5)
    mem.add("The deploy region is eu-west-3.", importance=0.7, tier="l2")
    mem.add("the deploy region is eu-west-1", importance=0.8, tier="l2")  # both kept
    assert [i.importance for i in mem.get_l2()] == [0.8, 0.7]
    mem.add("Correction: the deploy region is now us-east-1.", importance=0.65)
    assert [(i.content, i.importance) for i in mem.get_l2()] == [
        ("Correction: the deploy region is now us-east-1.", 0.8)
    ]
    mem.add("The deploy region is ap-south-1.", importance=0.1)
    assert [(i.content, i.importance) for i in mem.get_l2()] == [
        ("The deploy region is ap-south-1.", 0.8)
    ]


def test_refresh_full_l2_refuses_a_less_important_item():
    mem = TieredMemory(5, 1, 5, auto_promote=False)
    mem.add("kept", importance=0.8)
    mem.add("less", importance=0.7)
    assert mem.promote() == 1
    assert contents(mem.get_l2()) == ["kept"]


def test_record_skips_messages_without_text():
    mem = TieredMemory()
    assert mem.record([AIMessage("", id="a1"), HumanMessage("hi", id="h1")])[0].id == "h1"
    assert mem.total_added == 1 and not mem.has("a1")


def test_close_closes_an_owned_index_only():
    shared = SQLiteRecallIndex()
    mem = TieredMemory(index=shared)
    mem.add("kiwi")
    mem.close()
    assert [h.content for h in mem.search("kiwi")] == ["kiwi"]
    own = TieredMemory()
    own.add("kiwi")
    own.close()
    with pytest.raises(Exception, match="closed"):
        own.search("kiwi")


def test_promote_summarizes_pending_items_oldest_first():
    mem = TieredMemory(1, 5, 5, auto_promote=False, summarizer=str.upper)
    for word in ("a", "b", "c", "d"):
        mem.add(word, importance=0.9)
    assert mem.promote() == 4 + 3
    assert contents(mem.get_l3()) == ["A", "B", "C"]
    assert contents(mem.get_l2()) == ["d", "c", "b", "a"]


def test_refresh_full_l2_takes_a_tie_and_evicts_the_oldest_least_important():
    mem = TieredMemory(10, 3, 5)
    mem.add("old low", importance=0.7)
    mem.add("high", importance=0.9)
    mem.add("mid", importance=0.8)
    mem.add("tie", importance=0.7)  # equal to the minimum: taken, "old low" evicted
    assert contents(mem.get_l2()) == ["high", "mid", "tie"]
    mem.add("new mid", importance=0.8)  # evicts "tie" (the least important)
    assert contents(mem.get_l2()) == ["high", "new mid", "mid"]


def test_replacing_one_of_two_l2_items_about_a_subject_keeps_the_other_superseded_later():
    mem = TieredMemory(5, 5, 5)
    mem.add("The deploy region is eu-west-3.", importance=0.7, tier="l2", item_id="a")
    mem.add("the deploy region is eu-west-1", importance=0.8, tier="l2", item_id="b")
    mem.add("lunch notes", importance=0.75, tier="l2", item_id="a")  # "a" no longer about it
    mem.add("Correction: the deploy region is now us-east-1.", importance=0.65)
    assert [(i.content, i.importance) for i in mem.get_l2()] == [
        ("Correction: the deploy region is now us-east-1.", 0.8),
        ("lunch notes", 0.75),
    ]


def test_search_ranks_best_first_and_marks_units_of_longer_items():
    mem = TieredMemory(5, 5, 5)
    lines = [f"12:00:{i:02d} INFO line {i} status=200 latency={i * 7}" for i in range(40)]
    mem.add("kiwi report header\n" + "\n".join(lines), item_id="dump")
    mem.add("kiwi banana", item_id="kb")
    mem.add("kiwi", item_id="k")
    hits = mem.search("kiwi", 3)
    assert [(h.id, h.part, h.whole) for h in hits] == [
        ("k", 0, True),
        ("kb", 0, True),
        ("dump", 0, False),
    ]
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[2].content == "kiwi report header"
    assert [h.id for h in mem.search("kiwi banana", 1)] == ["kb"]


def test_preferred_statements_read_a_tool_result_without_its_name():
    tool = MemoryHit(id="t", content="calc -> 42", importance=0.5, seq=1, metadata={"tool": "calc"})
    assert _preferred_statements([tool]) == []  # "42" states nothing
    stated = MemoryHit(
        id="s", content="calc -> the port is 42", importance=0.5, seq=2, metadata={"tool": "calc"}
    )
    assert _preferred_statements([tool, stated]) == [1]


def test_newer_first_hits_at_the_same_position_are_not_newer():
    same = [
        MemoryHit(id="f1", content="the port is 1", importance=0.5, seq=-1),
        MemoryHit(id="f2", content="the port is 2", importance=0.5, seq=-1),
    ]
    assert [h.id for h in _newer_first(same, ["port"], 2)] == ["f1", "f2"]
    assert [h.id for h in _newer_first(same, ["port"], 1)] == ["f1"]
