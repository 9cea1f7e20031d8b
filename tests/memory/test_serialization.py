"""Plain-data round trip of `TieredMemory` and `MemorySessions`."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.memory import MemorySessions, TieredMemory
from ctxpolicy.memory.items import ITEM_KINDS

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40
).filter(lambda s: s.strip())
_op = st.fixed_dictionaries(
    {
        "content": _text,
        "importance": st.none() | st.floats(0, 1, allow_nan=False),
        "kind": st.none() | st.sampled_from(ITEM_KINDS),
        "tags": st.lists(st.text(max_size=5), max_size=3),
        "metadata": st.dictionaries(
            st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2
        ),
    }
)


def _state(mem: TieredMemory):
    return (
        [i.to_data() for i in mem.get_l1()],
        [i.to_data() for i in mem.get_l2()],
        [i.to_data() for i in mem.get_l3()],
        mem.stats(),
        mem.total_added,
    )


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(_op, max_size=30),
    sizes=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6)),
    auto=st.booleans(),
    query=_text,
)
def test_round_trip_preserves_every_tier(ops, sizes, auto, query):
    mem = TieredMemory(*sizes, auto_promote=auto)
    for op in ops:
        mem.add(**op)
    data = mem.to_data()
    assert json.loads(json.dumps(data)) == data  # plain, JSON-compatible data
    restored = TieredMemory.from_data(json.loads(json.dumps(data)), auto_promote=auto)
    assert restored.to_data() == data
    assert _state(restored) == _state(mem)
    assert [i.id for i in restored.search(query, 3)] == [i.id for i in mem.search(query, 3)]
    # both continue identically
    for m in (mem, restored):
        m.add("one more item", importance=0.99, item_id="fixed")
        m.promote()
    assert _state(restored) == _state(mem)


def test_from_data_rejects_foreign_data():
    with pytest.raises(ValueError, match="to_data"):
        TieredMemory.from_data({"l1": []})
    data = TieredMemory().to_data()
    data["l1"] = "nope"
    with pytest.raises(ValueError, match="'l1'"):
        TieredMemory.from_data(data)
    data = TieredMemory().to_data()
    data["l1_size"] = 0
    with pytest.raises(ValueError, match="l1_size"):
        TieredMemory.from_data(data)


def test_sessions_round_trip():
    sessions = MemorySessions(store=False, l1_size=3)
    sessions.session("a").add("alpha", kind="user")
    sessions.distribute("shared", session_ids=["a", "b"], importance=0.95)
    data = sessions.to_data()
    restored = MemorySessions.from_data(json.loads(json.dumps(data)), store=False)
    assert restored.session_ids == ("a", "b")
    assert restored.to_data() == data
    with pytest.raises(ValueError, match="to_data"):
        MemorySessions.from_data({"sessions": []}, store=False)


def test_round_trip_keeps_the_index_and_every_item_searchable():
    from langchain_core.messages import HumanMessage, ToolMessage

    mem = TieredMemory(2, 3, 2)
    dump = "\n".join(
        ["10:00:00 INFO boot"] * 30 + ["10:00:31 INFO config: cache TTL = 300"] + ["x ok"] * 30
    )
    mem.add_message(ToolMessage(dump, tool_call_id="c", name="logs", id="t1"))
    for i in range(6):
        mem.add_message(HumanMessage(f"question {i} about the weather", id=f"u{i}"))
    data = json.loads(json.dumps(mem.to_data()))
    assert data["format"] == "ctxpolicy.memory/2" and data["l2_policy"] == "refresh"
    restored = TieredMemory.from_data(data)
    assert restored.search("cache TTL", 1)[0].content == "10:00:31 INFO config: cache TTL = 300"
    assert restored.stats() == mem.stats()
    assert restored.original("t1") == mem.original("t1")
    # a resumed node records the same turn again: nothing is added twice
    again = [ToolMessage(dump, tool_call_id="c", name="logs", id="t1")] + [
        HumanMessage(f"question {i} about the weather", id=f"u{i}") for i in range(7)
    ]
    assert [i.id for i in restored.record(again)] == ["u6"]
    assert restored.total_added == mem.total_added + 1


def test_l2_policy_and_summary_budget_round_trip():
    mem = TieredMemory(1, 2, 3, l2_policy="seed", summary_tokens=20)
    mem.add("a " * 200 + "The port is 8080.", importance=0.1)
    mem.add("next", importance=0.1)
    restored = TieredMemory.from_data(mem.to_data())
    assert restored.l2_policy == "seed"
    assert restored.to_data() == mem.to_data()
    assert len(mem.get_l3()[0].content) <= 20 * 4


def test_previous_data_format_still_loads():
    old = {
        "format": "ctxpolicy.memory/1",
        "l1_size": 2,
        "l2_size": 2,
        "l3_size": 2,
        "l2_threshold": 0.6,
        "seq": 3,
        "l1": [
            {
                "id": "b",
                "content": "beta note",
                "importance": 0.5,
                "seq": 1,
                "kind": None,
                "tags": [],
                "metadata": {},
            },
            {
                "id": "c",
                "content": "gamma note",
                "importance": 0.9,
                "seq": 2,
                "kind": "user",
                "tags": [],
                "metadata": {},
            },
        ],
        "l2": [
            {
                "id": "c",
                "content": "gamma note",
                "importance": 0.9,
                "seq": 2,
                "kind": "user",
                "tags": [],
                "metadata": {},
            }
        ],
        "l3": [
            {
                "id": "a",
                "content": "alpha summary",
                "importance": 0.5,
                "seq": 0,
                "kind": None,
                "tags": [],
                "metadata": {},
            }
        ],
        "pending": [],
        "unoffered": [],
        "l4": [
            {
                "id": "a",
                "content": "alpha summary",
                "metadata": {
                    "item_id": "a",
                    "importance": 0.5,
                    "seq": 0,
                    "kind": "",
                    "tags": "[]",
                    "item_metadata": "{}",
                },
            }
        ],
        "l4_count": 1,
    }
    mem = TieredMemory.from_data(old)
    assert [h.id for h in mem.search("alpha", 3)] == ["a"]
    assert [i.id for i in mem.get_l2()] == ["c"]
    assert mem.stats()["indexed"] == 3
