"""Exact behaviour of `ctxpolicy.memory.tiered`'s helpers: L4 document metadata, plain
data (`to_data`/`from_data`, the old format), the LangGraph store round trip
(`from_store`, `load_stored`, `load_summaries`) and the vector-store fusion of `search`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langgraph.store.memory import InMemoryStore

from ctxpolicy.memory import tiered
from ctxpolicy.memory.items import MemoryItem
from ctxpolicy.memory.tiered import (
    TieredMemory,
    item_from_document,
    item_subjects,
    item_to_document_metadata,
    load_stored,
    load_summaries,
)
from ctxpolicy.recall.sqlite import SQLiteRecallIndex

# ------------------------------------------------------------------ document metadata


def _rich_item(*, metadata: dict[str, object]) -> MemoryItem:
    """An item with every field set (non-ASCII text, tags, a kind) and ``metadata``."""
    return MemoryItem(
        id="i1",
        content="héllo",
        importance=0.7,
        seq=3,
        kind="user",
        tags=("café", "b"),
        metadata=metadata,
    )


def test_item_to_document_metadata_is_flat_and_exact():
    item = _rich_item(metadata={"k": "é", "when": object})
    assert item_to_document_metadata(item) == {
        "item_id": "i1",
        "importance": 0.7,
        "seq": 3,
        "kind": "user",
        "tags": '["café", "b"]',
        "item_metadata": '{"k": "é", "when": "<class \'object\'>"}',
    }
    plain = MemoryItem(id="i2", content="x", importance=0.5, seq=0)
    assert item_to_document_metadata(plain) == {
        "item_id": "i2",
        "importance": 0.5,
        "seq": 0,
        "kind": "",
        "tags": "[]",
        "item_metadata": "{}",
    }


def test_item_from_document_round_trips_item_metadata():
    item = _rich_item(metadata={"k": "é", "n": 2})
    doc = Document(page_content="héllo", metadata=item_to_document_metadata(item), id="other")
    assert item_from_document(doc) == item


def test_item_from_document_id_precedence_and_fallback():
    def doc_id(meta, doc_id=None, text="hello"):
        return item_from_document(Document(page_content=text, metadata=meta, id=doc_id)).id

    assert doc_id({"item_id": "m"}, "d") == "m"
    assert doc_id({}, "d") == "d"
    assert doc_id({"item_id": ""}, "d") == "d"
    assert doc_id({}) == "46fb7408d4f285228f4af516ea25851b"  # blake2b-128 of the text
    assert doc_id({"item_id": 7}) == "7"


def test_item_from_document_neutral_defaults_for_foreign_documents():
    got = item_from_document(Document(page_content="hello", id="d1"))
    assert got == MemoryItem(
        id="d1", content="hello", importance=0.5, seq=-1, kind=None, tags=(), metadata={}
    )


def test_item_from_document_kind_tags_and_metadata():
    def make(**meta):
        return item_from_document(Document(page_content="t", metadata=meta, id="d"))

    assert make(kind="user").kind == "user"
    assert make(kind="tool_failure").kind == "tool_failure"
    assert make(kind="robot").kind is None
    assert make(kind="").kind is None
    assert make(tags='["a", 1]').tags == ("a", "1")  # strings, decoded from JSON
    assert make(tags=["x", "y"]).tags == ("x", "y")  # a list as is
    assert make(item_metadata='{"a": 1}').metadata == {"a": 1}  # no tags: metadata still read
    assert make(item_metadata={"b": 2}, tags="[]").metadata == {"b": 2}
    assert make(tags='["z"]').metadata == {}
    assert make(tags='["z"]').tags == ("z",)
    assert make(item_metadata="[1, 2]").metadata == {}  # not a mapping
    # undecodable fields give no tags and no metadata (and no error)
    broken = make(tags="not json", item_metadata='{"a": 1}')
    assert (broken.tags, broken.metadata) == ((), {})
    broken = make(tags='["ok"]', item_metadata="{nope")
    assert (broken.tags, broken.metadata) == ((), {})


@pytest.mark.parametrize(
    ("importance", "expected"),
    [(0.0, 0.0), (1.0, 1.0), (0.7, 0.7), (1, 1.0), (1.5, 0.5), (-0.1, 0.5), (True, 0.5)],
)
def test_item_from_document_importance(importance, expected):
    doc = Document(page_content="t", metadata={"importance": importance})
    got = item_from_document(doc).importance
    assert got == expected and type(got) is float


def test_item_from_document_importance_defaults():
    assert item_from_document(Document(page_content="t")).importance == 0.5
    bad = Document(page_content="t", metadata={"importance": "0.7"})
    assert item_from_document(bad).importance == 0.5


@pytest.mark.parametrize(("seq", "expected"), [(7, 7), (0, 0), (True, -1), ("3", -1), (2.0, -1)])
def test_item_from_document_seq(seq, expected):
    got = item_from_document(Document(page_content="t", metadata={"seq": seq})).seq
    assert got == expected and type(got) is int


def test_item_from_document_seq_default():
    assert item_from_document(Document(page_content="t")).seq == -1


def test_item_subjects_from_metadata_tags_or_text():
    def subjects(content, **kw):
        return item_subjects(MemoryItem(id="i", content=content, importance=0.5, seq=0, **kw))

    assert subjects("blue", metadata={"subject": "Deploy  Region"}) == {"deploy region"}
    assert subjects("x", tags=("subject:Region deploy", "other")) == {"deploy region"}
    assert subjects("x", metadata={"subject": "b a"}, tags=("subject:c",)) == {"a b", "c"}
    assert subjects("the api port is 8080") == {"api port"}
    assert subjects("the api port is 8080", metadata={"subject": "  "}) == {"api port"}
    assert subjects("the api port is 8080", metadata={"subject": "!!"}) == {"api port"}


# ------------------------------------------------------------------ plain data


def _small_memory() -> TieredMemory:
    mem = TieredMemory(2, 3, 4)
    mem.add("The deploy region is eu-west-3.", kind="user")
    mem.add("alpha note", importance=0.1)
    mem.add("beta note", importance=0.1)
    return mem


def test_to_data_exact():
    mem = TieredMemory(2, 3, 4, l2_threshold=0.5, summary_tokens=30, auto_promote=False)
    a = mem.add("alpha", importance=0.9, item_id="a")
    b = mem.add("beta", importance=0.2, item_id="b")
    c = mem.add("gamma", importance=0.8, item_id="c")
    mem.promote()
    d = mem.add("delta", importance=0.7, item_id="d")
    assert mem.to_data() == {
        "format": "ctxpolicy.memory/2",
        "l1_size": 2,
        "l2_size": 3,
        "l3_size": 4,
        "l2_threshold": 0.5,
        "l2_policy": "refresh",
        "summary_tokens": 30,
        "seq": 4,
        "l1": [c.to_data(), d.to_data()],
        "l2": [a.to_data(), c.to_data()],
        "l3": [a.to_data()],
        "pending": [b.to_data()],
        "unoffered": ["d"],
        "archive": [a.to_data()],
        "l4_count": 1,
        "versions": {},
    }


def test_from_data_checks_the_format_and_fields():
    message = r"^data must be TieredMemory.to_data\(\) output \('ctxpolicy.memory/2'\)$"
    with pytest.raises(ValueError, match=message):
        TieredMemory.from_data([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        TieredMemory.from_data({"format": "ctxpolicy.memory/9"})
    good = _small_memory().to_data()
    for value in (-1, True, "3", None):
        data = {**good, "seq": value}
        with pytest.raises(
            ValueError,
            match=rf"^memory data field 'seq' must be an integer >= 0, got {value!r}$",
        ):
            TieredMemory.from_data(data)
    for value in ("x", ["nope"], ["a", "zz"]):
        data = {**good, "unoffered": value}
        with pytest.raises(
            ValueError, match=r"^memory data field 'unoffered' must list ids of L1/pending items$"
        ):
            TieredMemory.from_data(data)
    with pytest.raises(ValueError, match=r"^memory data field 'pending' must be a list$"):
        TieredMemory.from_data({**good, "pending": None})


def test_from_data_defaults_for_missing_fields():
    data = _small_memory().to_data()
    for key in ("unoffered", "l4_count", "l2_threshold", "l2_policy", "summary_tokens"):
        del data[key]
    mem = TieredMemory.from_data(data)
    out = mem.to_data()
    assert out["unoffered"] == []
    assert out["l4_count"] == 0 and mem.stats()["l4"] == 0
    assert out["l2_threshold"] == 0.6
    assert out["l2_policy"] == "refresh"
    assert out["summary_tokens"] == tiered.EXTRACTIVE_MAX_TOKENS
    bad_count = {**_small_memory().to_data(), "l4_count": "7"}
    assert TieredMemory.from_data(bad_count).stats()["l4"] == 0
    assert TieredMemory.from_data({**data, "l4_count": 7}).stats()["l4"] == 7


def test_from_data_keeps_the_given_threshold_and_options():
    data = TieredMemory(2, 3, 4, l2_threshold=0.3).to_data()
    summarizer_calls = []

    def summarizer(text):
        summarizer_calls.append(text)
        return "S:" + text

    index = SQLiteRecallIndex()
    store = InMemoryStore()
    vectors = _FakeVectors()
    mem = TieredMemory.from_data(
        data,
        summarizer=summarizer,
        vector_store=vectors,
        store=store,
        namespace=("ns", "x"),
        index=index,
    )
    assert mem.to_data()["l2_threshold"] == 0.3
    assert mem.namespace == ("ns", "x")
    assert mem.index is index and mem.vector_store is vectors
    mem.add("a just above the threshold", importance=0.31)
    assert [i.content for i in mem.get_l2()] == ["a just above the threshold"]
    for word in ("b", "c"):
        mem.add(word, importance=0.1)
    assert summarizer_calls == ["a just above the threshold"]
    assert [t for t, _ in vectors.added] == ["S:a just above the threshold"]
    assert [e.value["content"] for e in store.search(("ns", "x", "summaries"))] == [
        "S:a just above the threshold"
    ]
    manual = TieredMemory.from_data(data, auto_promote=False)
    manual.add("x", importance=0.9)
    assert manual.get_l2() == [] and manual.stats()["pending"] == 1
    auto = TieredMemory.from_data(data)
    auto.add("x", importance=0.9)
    assert len(auto.get_l2()) == 1 and auto.stats()["pending"] == 0


def test_from_data_restores_l2_subjects_for_refresh():
    mem = TieredMemory(1, 5, 5)
    mem.add("The deploy region is eu-west-3.", kind="user")
    mem.add("other", importance=0.1)
    restored = TieredMemory.from_data(json.loads(json.dumps(mem.to_data())))
    restored.add("Correction: the deploy region is now us-east-1.", kind="agent")
    assert [i.content for i in restored.get_l2()] == [
        "Correction: the deploy region is now us-east-1."
    ]
    assert restored.get_l2()[0].importance == 1.0  # inherited from the older statement
    seed = TieredMemory(1, 5, 5, l2_policy="seed")
    seed.add("The deploy region is eu-west-3.", kind="user")
    restored = TieredMemory.from_data(seed.to_data())
    restored.add("Correction: the deploy region is now us-east-1.", kind="user")
    assert len(restored.get_l2()) == 2


def _old_data(**l4_doc: Any) -> dict[str, Any]:
    return {
        "format": "ctxpolicy.memory/1",
        "l1_size": 2,
        "l2_size": 2,
        "l3_size": 2,
        "seq": 1,
        "l1": [],
        "l2": [],
        "l3": [],
        "pending": [],
        "unoffered": [],
        "l4": [{"content": "alpha summary", **l4_doc}],
        "l4_count": 1,
    }


def test_old_format_l4_documents_become_the_archive():
    meta = {"item_id": "a", "importance": 0.8, "seq": 0, "kind": "user", "tags": '["t"]'}
    mem = TieredMemory.from_data(_old_data(id="doc-a", metadata=meta))
    assert mem.original("a") == MemoryItem(
        id="a", content="alpha summary", importance=0.8, seq=0, kind="user", tags=("t",)
    )
    assert [h.id for h in mem.search("alpha", 3)] == ["a"]
    by_doc_id = TieredMemory.from_data(_old_data(id="doc-b", metadata={"seq": 0}))
    assert by_doc_id.original("doc-b").content == "alpha summary"
    no_l4 = _old_data(id="x", metadata={})
    del no_l4["l4"]
    assert TieredMemory.from_data(no_l4).stats()["indexed"] == 0
    with pytest.raises(ValueError, match=r"^memory data field 'l4' must be a list$"):
        TieredMemory.from_data({**no_l4, "l4": "nope"})


# ------------------------------------------------------------------ LangGraph store


def _stored_memory(store, namespace=("t", "a"), **kwargs) -> TieredMemory:
    mem = TieredMemory(1, 5, 5, store=store, namespace=namespace, **kwargs)
    mem.add("alpha first note", importance=0.9, tags=["x"], metadata={"k": 1}, kind="user")
    mem.add("beta second note", importance=0.2)
    mem.add("gamma third note", importance=0.3)
    return mem


def test_load_summaries_and_load_stored():
    store = InMemoryStore()
    mem = TieredMemory(1, 5, 5, store=store, namespace=("t", "a"), summarizer=str.upper)
    a = mem.add("alpha first note", importance=0.9, tags=["x"], metadata={"k": 1}, kind="user")
    b = mem.add("beta second note", importance=0.2)
    mem.add("gamma", importance=0.2)
    summaries = list(load_summaries(store, namespace=("t", "a")))
    assert summaries == [
        MemoryItem(
            id=a.id,
            content="ALPHA FIRST NOTE",
            importance=0.9,
            seq=0,
            kind="user",
            tags=("x",),
            metadata={"k": 1},
        ),
        MemoryItem(id=b.id, content="BETA SECOND NOTE", importance=0.2, seq=1),
    ]
    pairs = list(load_stored(store, namespace=("t", "a")))
    assert [(s.content, f.content) for s, f in pairs] == [
        ("ALPHA FIRST NOTE", "alpha first note"),
        ("BETA SECOND NOTE", "beta second note"),
    ]
    assert list(load_summaries(store, namespace=("t", "other"))) == []


def test_load_stored_pages_through_the_store(monkeypatch):
    monkeypatch.setattr(tiered, "_STORE_PAGE", 2)
    store = InMemoryStore()
    mem = TieredMemory(1, 5, 10, store=store, namespace=("p",))
    for i in range(6):
        mem.add(f"note {i}", importance=0.1, item_id=f"n{i}")
    assert sorted(s.id for s, _ in load_stored(store, namespace=("p",))) == [
        f"n{i}" for i in range(5)
    ]


def test_an_entry_without_full_text_gives_its_summary_twice():
    store = InMemoryStore()
    store.put(
        ("t", "a", "summaries"),
        "old",
        {"id": "old", "content": "old summary", "importance": 0.5, "seq": 0},
    )
    ((summary, full),) = load_stored(store, namespace=("t", "a"))
    assert summary == full and full.content == "old summary"
    mem = TieredMemory.from_store(store, namespace=("t", "a"))
    assert mem.original("old").content == "old summary"


def test_from_store_defaults():
    mem = TieredMemory.from_store(InMemoryStore())
    assert (mem.l1_size, mem.l2_size, mem.l3_size) == (50, 100, 500)
    assert mem.l2_policy == "refresh"
    assert mem.namespace == ("ctxpolicy", "memory")
    assert mem.vector_store is None
    assert mem.stats() == {"l1": 0, "l2": 0, "l3": 0, "l4": 0, "indexed": 0, "pending": 0}
    mem.add("x", importance=0.9)  # auto_promote by default
    assert contents_of(mem.get_l2()) == ["x"] and mem.stats()["pending"] == 0
    explicit = TieredMemory.from_store(InMemoryStore(), auto_promote=True)
    explicit.add("y", importance=0.9)
    assert contents_of(explicit.get_l2()) == ["y"]


def contents_of(items):
    return [i.content for i in items]


def test_from_store_restores_l3_archive_and_sequence():
    store = InMemoryStore()
    old = _stored_memory(store)
    mem = TieredMemory.from_store(store, namespace=("t", "a"), l3_size=1)
    assert [i.content for i in mem.get_l3()] == ["beta second note"]
    assert mem.total_added == 3  # L1 ("gamma") and L2 ("alpha") come back too
    assert [i.content for i in mem.get_l1()] == ["gamma third note"]
    assert [i.content for i in mem.get_l2()] == ["alpha first note"]
    assert mem.stats() == {"l1": 1, "l2": 1, "l3": 1, "l4": 2, "indexed": 3, "pending": 0}
    assert mem.original(old.get_l3()[0].id).content == "alpha first note"
    assert [h.content for h in mem.search("alpha first", 3)] == ["alpha first note"]
    two = TieredMemory.from_store(store, namespace=("t", "a"), l3_size=5)
    assert [i.content for i in two.get_l3()] == ["alpha first note", "beta second note"]
    assert two.add("next").seq == 3


def test_from_store_passes_its_options_on():
    store = InMemoryStore()
    _stored_memory(store)
    index = SQLiteRecallIndex()
    vectors = _FakeVectors()
    mem = TieredMemory.from_store(
        store,
        namespace=("t", "a"),
        l1_size=1,
        l2_size=2,
        l3_size=3,
        summarizer=lambda text: "S:" + text,
        vector_store=vectors,
        auto_promote=False,
        l2_policy="seed",
        index=index,
    )
    assert (mem.l1_size, mem.l2_size, mem.l3_size) == (1, 2, 3)
    assert mem.l2_policy == "seed" and mem.index is index and mem.vector_store is vectors
    assert vectors.added == []  # not reindexed
    assert [i.content for i in mem.get_l2()] == ["alpha first note"]  # restored
    mem.add("delta", importance=0.9)
    mem.add("epsilon", importance=0.9)
    # pending: gamma (restored L1) and delta left L1, delta and epsilon not offered
    assert mem.stats()["l2"] == 1 and mem.stats()["pending"] == 4
    mem.promote()
    assert [i.content for i in mem.get_l3()][-1] == "S:delta"
    assert [t for t, _ in vectors.added] == ["S:gamma third note", "S:delta"]
    assert [e.value["content"] for e in store.search(("t", "a", "summaries"))][-1] == "S:delta"


def test_from_store_reindex_adds_the_stored_summaries_a_page_at_a_time(monkeypatch):
    monkeypatch.setattr(tiered, "_STORE_PAGE", 2)
    store = InMemoryStore()
    mem = TieredMemory(1, 5, 10, store=store, namespace=("r",))
    for i in range(6):
        mem.add(f"note {i}", importance=0.1, item_id=f"n{i}", kind="user")
    vectors = _FakeVectors()
    TieredMemory.from_store(store, namespace=("r",), vector_store=vectors, reindex=True)
    assert vectors.batches == [["n0", "n1"], ["n2", "n3"], ["n4"]]
    assert [t for t, _ in vectors.added] == [f"note {i}" for i in range(5)]
    assert vectors.added[0][1] == item_to_document_metadata(mem.original("n0"))
    again = TieredMemory.from_store(store, namespace=("r",), reindex=True)  # no vector store
    assert again.stats()["l4"] == 5
    restored = TieredMemory.from_store(store, namespace=("r",), l3_size=10)
    found = [h.id for h in restored.search("note", 10)]
    assert sorted(found) == [f"n{i}" for i in range(6)]  # each once (n5: restored L1)


# ------------------------------------------------------------------ vector store fusion


class _FakeVectors(VectorStore):
    """A vector store answering every query with ``results`` (recording ``k`` and adds)."""

    def __init__(self, results: list[Document] | None = None) -> None:
        self.results = results or []
        self.added: list[tuple[str, dict[str, Any]]] = []
        self.batches: list[list[str]] = []
        self.ks: list[int] = []

    def add_texts(self, texts, metadatas=None, *, ids=None, **kwargs):
        texts = list(texts)
        self.added.extend(zip(texts, metadatas or [{}] * len(texts), strict=True))
        self.batches.append(list(ids or []))
        return list(ids or [])

    def similarity_search(self, query, k=4, **kwargs):
        self.ks.append(k)
        return self.results[:k]

    @classmethod
    def from_texts(cls, texts, embedding, metadatas=None, **kwargs):
        raise NotImplementedError


def _rrf(*ranks: int) -> float:
    return sum(1.0 / (60 + r + 1) for r in ranks)


def _doc(content: str, **meta: Any) -> Document:
    return Document(page_content=content, metadata=meta, id=meta.get("item_id"))


def test_fusion_scores_are_reciprocal_rank_sums():
    vectors = _FakeVectors()
    mem = TieredMemory(5, 5, 5, vector_store=vectors)
    a = mem.add("kiwi alpha", importance=0.5)  # seq 0
    b = mem.add("kiwi kiwi beta", importance=0.5)  # seq 1
    lexical = [h.id for h in TieredMemory.search(_plain_copy(mem), "kiwi", 5)]
    assert set(lexical) == {a.id, b.id}
    vectors.results = [_doc("kiwi alpha", item_id=a.id, seq=0)]
    hits = mem.search("kiwi", 5)
    rank_a = lexical.index(a.id)
    rank_b = lexical.index(b.id)
    assert [h.id for h in hits] == [a.id, b.id]
    assert hits[0].score == pytest.approx(_rrf(rank_a, 0))
    assert hits[1].score == pytest.approx(_rrf(rank_b))
    assert [h.content for h in hits] == ["kiwi alpha", "kiwi kiwi beta"]
    assert vectors.ks == [200]


def _plain_copy(mem: TieredMemory) -> TieredMemory:
    """The same memory without its vector store (bm25 only)."""
    return TieredMemory.from_data(mem.to_data())


def test_fusion_ranks_by_score_and_adds_dense_only_results():
    vectors = _FakeVectors()
    mem = TieredMemory(5, 5, 5, vector_store=vectors)
    a = mem.add("kiwi alpha", importance=0.9, kind="user", tags=["t"])  # seq 0
    b = mem.add("kiwi kiwi kiwi beta", importance=0.5)  # seq 1
    c = mem.add("papaya gamma", importance=0.8, kind="user", metadata={"m": 1})  # seq 2
    lexical = [h.id for h in _plain_copy(mem).search("kiwi", 5)]
    vectors.results = [
        _doc("kiwi alpha", item_id=a.id, seq=0),
        _doc("foreign one", item_id="f1"),  # no seq: a foreign document
        _doc("kiwi kiwi kiwi beta", item_id=b.id, seq=1),
        _doc("summary of gamma", item_id=c.id, seq=2),  # no bm25 hit: the archived item
        Document(page_content="foreign two"),
        _doc("foreign three", item_id="f3", seq=99),  # unknown id with a seq
    ]
    hits = {h.id: h for h in mem.search("kiwi", 10)}
    scores = {
        a.id: _rrf(lexical.index(a.id), 0),
        "f1": _rrf(1),
        b.id: _rrf(lexical.index(b.id), 2),
        c.id: _rrf(3),
        item_from_document(Document(page_content="foreign two")).id: _rrf(4),
        "f3": _rrf(5),
    }
    assert hits.keys() == scores.keys()
    for key, score in scores.items():
        assert hits[key].score == pytest.approx(score), key
    ordered = [h.id for h in mem.search("kiwi", 10)]
    assert ordered == sorted(scores, key=lambda k: -scores[k])
    assert ordered[2:] == ["f1", c.id, ordered[4], "f3"]
    gamma = hits[c.id]
    assert (gamma.content, gamma.importance, gamma.kind, gamma.metadata) == (
        "summary of gamma",
        0.8,
        "user",
        {"m": 1},
    )
    assert gamma.seq == 2 and gamma.whole is True and gamma.tier == "l4"
    foreign = hits["f1"]
    assert (foreign.content, foreign.importance, foreign.seq, foreign.kind) == (
        "foreign one",
        0.5,
        -1,
        None,
    )
    assert foreign.whole is True and foreign.key == "f1"


def test_fusion_of_an_archived_item_at_seq_zero_without_a_bm25_hit():
    vectors = _FakeVectors()
    mem = TieredMemory(5, 5, 5, vector_store=vectors)
    a = mem.add("papaya", importance=0.9, kind="user", tags=["t"])  # seq 0
    mem.add("kiwi", importance=0.5)
    vectors.results = [_doc("a summary", item_id=a.id, seq=0)]
    hits = mem.search("kiwi", 5)
    dense = next(h for h in hits if h.id == a.id)
    assert (dense.content, dense.importance, dense.kind, dense.tags) == (
        "a summary",
        0.9,
        "user",
        ("t",),
    )
    assert dense.whole is True and dense.score == pytest.approx(_rrf(0))


def test_fusion_merges_a_dense_result_with_the_bm25_hit_of_seq_zero():
    vectors = _FakeVectors()
    mem = TieredMemory(5, 5, 5, vector_store=vectors)
    a = mem.add("kiwi alpha", importance=0.5)  # seq 0
    vectors.results = [_doc("kiwi alpha", item_id=a.id, seq=0)]
    (hit,) = mem.search("kiwi", 5)
    assert hit.id == a.id and hit.score == pytest.approx(_rrf(0, 0))


def test_fusion_skips_versions_replaced_by_a_later_add():
    vectors = _FakeVectors()
    mem = TieredMemory(5, 5, 5, vector_store=vectors)
    mem.add("kiwi old", item_id="k", importance=0.5)  # seq 0
    mem.add("kiwi new", item_id="k", importance=0.5)  # seq 1
    other = mem.add("papaya", importance=0.5)  # seq 2
    vectors.results = [
        _doc("kiwi old", item_id="k", seq=0),  # superseded
        _doc("papaya", item_id=other.id, seq=2),
        _doc("kiwi new", item_id="k", seq=1),
    ]
    hits = mem.search("kiwi", 5)
    assert [h.content for h in hits] == ["kiwi new", "papaya"]
    assert hits[0].score == pytest.approx(_rrf(0, 2))
    assert hits[1].score == pytest.approx(_rrf(1))


def test_search_pool_grows_with_the_limit_and_l1_for_tier_filters():
    vectors = _FakeVectors()
    mem = TieredMemory(3, 5, 5, vector_store=vectors)
    for word in ("kiwi a", "kiwi b", "kiwi c", "kiwi d"):
        mem.add(word, importance=0.1)
    mem.search("kiwi", 5)
    mem.search("kiwi", 134)
    mem.search("kiwi", 135)
    mem.search("kiwi", 200)
    mem.search("kiwi", 5, tiers=("l4",))
    assert vectors.ks == [200, 201, 202, 300, 203]
