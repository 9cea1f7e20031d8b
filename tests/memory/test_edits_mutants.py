"""Edges of memory edits that mutation testing found unpinned (see docs/mutation.md).

Each test names what it holds; `tests/memory/test_edits.py` has the main cases.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from ctxpolicy.memory import TieredMemory
from ctxpolicy.memory.vectors import HashingEmbeddings, LocalVectorStore
from tests.memory.test_edits import NEW, OLD, deploy, drop_live, texts


def said(text: str, key: str) -> HumanMessage:
    return HumanMessage(text, id=key)


def test_an_edit_of_a_message_still_in_l1_leaves_the_summaries_alone() -> None:
    vectors = LocalVectorStore(HashingEmbeddings())
    memory = TieredMemory(l1_size=2, vector_store=vectors)
    memory.record([said("the cluster is eu-1", "a"), said("the team is blue", "b"), deploy()])
    assert memory.stats()["l4"] == 1  # "a" left L1; deploy is in L1
    memory.record([deploy(NEW)])  # the old version leaves L1 unsummarized
    assert memory.stats()["l4"] == 1
    assert [d.id for d in vectors.all_documents()] == ["a"]
    assert texts(memory.get_l1()) == ["the team is blue", NEW]


def test_an_edit_of_a_message_waiting_for_promotion_leaves_the_summaries_alone() -> None:
    memory = TieredMemory(l1_size=1, auto_promote=False)
    memory.record([said("the cluster is eu-1", "a"), said("the team is blue", "b")])
    memory.promote()  # "a" summarized
    assert memory.stats()["l4"] == 1
    memory.record([deploy(), AIMessage("On it.", id="ok")])  # b and deploy wait
    memory.record([deploy(NEW)])
    assert memory.stats()["l4"] == 1


def test_an_edit_of_a_summarized_message_takes_one_summary_out_of_the_vector_store() -> None:
    vectors = LocalVectorStore(HashingEmbeddings())
    memory = TieredMemory(l1_size=1, vector_store=vectors)
    memory.record([deploy(), said("the team is blue", "b"), said("the cluster is eu-1", "c")])
    assert memory.stats()["l4"] == 2  # deploy and b
    memory.record([deploy(NEW)])  # c leaves L1
    assert sorted(d.id for d in vectors.all_documents()) == ["b", "c"]
    assert memory.stats()["l4"] == 2


def test_an_edit_waiting_to_be_offered_to_l2_is_offered_once() -> None:
    memory = TieredMemory(l1_size=10, auto_promote=False)
    memory.record([deploy()])
    assert memory.stats()["pending"] == 1  # not offered to L2 yet
    memory.record([deploy(NEW)])
    assert memory.stats()["pending"] == 1  # the new version only
    memory.promote()
    assert texts(memory.get_l2()) == [NEW]


def test_an_edit_to_say_nothing_leaves_no_version_behind() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    assert memory.record([deploy("")]) == []
    assert not memory.has("deploy")
    assert "deploy" not in memory.to_data()["versions"]


def test_recording_a_non_message_names_its_type() -> None:
    memory = TieredMemory(l1_size=10)
    with pytest.raises(TypeError, match="message must be a BaseMessage, got int"):
        memory.record([5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="message must be a BaseMessage, got str"):
        memory.add_message("hello")  # type: ignore[arg-type]


def test_a_store_entry_with_a_fingerprint_that_is_no_string_matches_by_id() -> None:
    store = InMemoryStore()
    memory = TieredMemory(l1_size=1, store=store, namespace=("t",))
    memory.record([deploy(), said("the team is blue", "b")])  # deploy summarized, stored
    entry = store.get(("t", "summaries"), "deploy")
    assert entry is not None
    value: dict[str, Any] = {**entry.value, "fingerprint": 7}
    store.put(("t", "summaries"), "deploy", value)
    drop_live(store, ("t",))  # only the summary entry speaks for "deploy"
    again = TieredMemory.from_store(store, namespace=("t",), l1_size=1)
    assert again.is_recorded(deploy()) and again.is_recorded(deploy(NEW))  # by id
    assert OLD in texts(again.get_l3())
