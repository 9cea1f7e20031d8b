"""The offline L4 default: hashing embeddings and the local vector store."""

from __future__ import annotations

import pytest

from ctxpolicy.memory import TieredMemory
from ctxpolicy.memory.vectors import HashingEmbeddings, LocalVectorStore


def test_hashing_embeddings_are_deterministic_and_normalized():
    emb = HashingEmbeddings(size=64)
    a = emb.embed_query("Hello hello world")
    assert a == HashingEmbeddings(size=64).embed_query("hello HELLO world")
    assert abs(sum(v * v for v in a) - 1.0) < 1e-9
    assert emb.embed_query("") == [0.0] * 64
    assert emb.embed_documents(["x", "y"]) == [emb.embed_query("x"), emb.embed_query("y")]
    assert len(emb.embed_query("数据库迁移")) == 64


def test_hashing_embeddings_validate_size():
    with pytest.raises(ValueError, match="size"):
        HashingEmbeddings(size=4)


def test_local_store_search_replace_delete():
    store = LocalVectorStore.from_texts(
        ["red apples", "green pears", "red cars"], HashingEmbeddings(), ids=["1", "2", "3"]
    )
    assert [d.id for d in store.similarity_search("apples", k=1)] == ["1"]
    assert {d.id for d in store.similarity_search("red", k=5)} == {"1", "3"}
    store.add_texts(["blue boats"], ids=["1"])  # same id replaces
    assert len(store) == 3
    assert store.similarity_search("apples") == []
    assert store.delete(["3"]) is True
    assert store.delete(["3"]) is False
    assert [d.page_content for d in store.get_by_ids(["1", "2", "9"])] == [
        "blue boats",
        "green pears",
    ]
    assert store.similarity_search("red", k=0) == []
    store.delete()
    assert len(store) == 0


def test_readding_an_id_keeps_one_copy_in_l2():
    mem = TieredMemory(5, 2, 5)
    mem.add("v1", importance=0.9, item_id="x")
    mem.add("other", importance=0.8)
    mem.add("v2", importance=0.7, item_id="x")
    assert [i.content for i in mem.get_l2()] == ["other", "v2"]
