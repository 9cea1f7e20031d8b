"""Exact behaviour of the fact heuristics (`ctxpolicy.memory.facts`) and of the offline
vector store (`ctxpolicy.memory.vectors`): scores, subject keys, boundaries, messages."""

from __future__ import annotations

import math

import pytest
from langchain_core.embeddings import Embeddings

from ctxpolicy.memory.facts import (
    clauses,
    content_bonus,
    content_signals,
    fact_score,
    is_chitchat,
    subject_keys,
)
from ctxpolicy.memory.vectors import HashingEmbeddings, LocalVectorStore, default_vector_store

# ------------------------------------------------------------------ fact_score


@pytest.mark.parametrize(
    ("piece", "expected"),
    [
        ("thanks", 0),  # chit-chat
        ("The API port is 8080.", 3),  # stated fact
        ("x is now 5", 6),  # correction (now in a statement) + stated fact
        ("The port is now open", 4),  # correction + a statement without a value
        ("Actually fine", 3),  # correction only
        ("see you now", 0),  # "now" outside a statement is no correction
        ("the port is open", 1),  # a statement
        ("port 8080", 1),  # a value
        ("Remember to deploy", 2),  # remember cue
        ("We decided to deploy", 2),  # decision
        ("the job failed", 2),  # error
        ("the deploy failed, remember we decided", 6),  # all three cues
        ("Is the port 8080?", 0),  # a question with a value scores nothing
        ("remember this?", 0),  # a question with a cue (2 < 3)
        ("the error is 5?", 3),  # a question still scores from 3 on
        ("Correction: the port is 9090?", 4),
    ],
)
def test_fact_score_exact_values(piece, expected):
    assert fact_score(piece) == expected


# ------------------------------------------------------------------ subject_keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The port is 8080", {"port"}),  # a one-word subject
        ("the api port is 8080", {"api port"}),  # words sorted, joined by one space
        ("There are 5.", set()),  # no subject of its own
        ("it is 5. the port is 8080", {"port"}),
        (
            "Is it 5? The port is 8080",
            {"port"},
        ),  # a question does not stop the scan  # an unusable subject does not stop
        ("the database port, there is 5", set()),  # "there is": no subject
        ("the q port is 5", {"port"}),  # one-letter words are left out
        ("port 80 is open", {"port"}),  # plain numbers are left out
        ("db port is 5", {"db port"}),  # two-letter words count
        (
            "alpha beta gamma delta epsilon zeta eta theta is 5",
            {"alpha beta delta epsilon eta gamma theta zeta"},
        ),  # 8 words: still a subject
        ("alpha beta gamma delta epsilon zeta eta theta iota is 5", set()),  # 9: too many
    ],
)
def test_subject_keys_exact(text, expected):
    assert subject_keys(text) == frozenset(expected)


def test_subject_keys_stop_at_the_limit():
    text = "aa is 1. bb is 2. cc is 3. dd is 4. ee is 5"
    assert subject_keys(text) == frozenset({"aa", "bb", "cc", "dd"})
    assert subject_keys("a port is 1. b host is 2. c user is 3", limit=1) == frozenset({"port"})
    assert subject_keys("a port is 1. b host is 2. c user is 3", limit=2) == frozenset(
        {"port", "host"}
    )


# ------------------------------------------------------------------ HashingEmbeddings


def test_hashing_embeddings_exact_sparse_vector():
    emb = HashingEmbeddings(size=64)
    # "alpha" hashes to dimension 26 with sign -, "gamma" to 53 with sign +
    got = emb.embed_sparse("alpha ALPHA gamma")
    assert got.keys() == {26, 53}
    assert got[26] == pytest.approx(-2 / math.sqrt(5))
    assert got[53] == pytest.approx(1 / math.sqrt(5))
    assert emb.embed_sparse("Alpha") == {26: -1.0}
    assert emb.embed_sparse("") == {}
    assert emb.embed_sparse("数据") == pytest.approx({61: -1 / math.sqrt(2), 40: -1 / math.sqrt(2)})
    vector = emb.embed_query("alpha gamma")
    assert len(vector) == 64
    assert vector[26] == pytest.approx(-1 / math.sqrt(2))
    assert vector[53] == pytest.approx(1 / math.sqrt(2))


def test_hashing_embeddings_default_size_and_minimum():
    assert HashingEmbeddings().size == 4096
    assert len(HashingEmbeddings().embed_query("x")) == 4096
    assert HashingEmbeddings(size=16).size == 16
    for bad in (15, 16.0, "64", True):
        with pytest.raises(ValueError, match=r"^size must be an integer >= 16, got "):
            HashingEmbeddings(size=bad)
    with pytest.raises(ValueError, match=r"^size must be an integer >= 16, got 4$"):
        HashingEmbeddings(size=4)


def test_default_vector_store_is_local_hashing():
    store = default_vector_store()
    assert isinstance(store, LocalVectorStore)
    assert isinstance(store.embeddings, HashingEmbeddings)
    assert store.embeddings.size == 4096
    store.add_texts(["red apples"], ids=["1"])
    assert [d.id for d in store.similarity_search("apples")] == ["1"]


# ------------------------------------------------------------------ LocalVectorStore


class _Fixed(Embeddings):
    """Embeddings from a lookup table (to control dot products exactly)."""

    def __init__(self, table, *, short=False):
        self.table = table
        self.short = short

    def embed_documents(self, texts):
        vectors = [list(self.table[t]) for t in texts]
        return vectors[:-1] if self.short else vectors

    def embed_query(self, text):
        return list(self.table[text])


def test_local_store_max_postings_validation():
    emb = HashingEmbeddings(size=64)
    assert len(LocalVectorStore(emb, max_postings=None)) == 0
    assert len(LocalVectorStore(emb, max_postings=1)) == 0
    for bad in (0, -3, 2.5, "3", True):
        with pytest.raises(
            ValueError, match=r"^max_postings must be None or an integer >= 1, got "
        ):
            LocalVectorStore(emb, max_postings=bad)
    with pytest.raises(ValueError, match=r"^max_postings must be None or an integer >= 1, got 0$"):
        LocalVectorStore(emb, max_postings=0)


def _recency_store(n, **kwargs):
    texts = [f"shared {i}" for i in range(n)]
    ids = [str(i) for i in range(n)]
    return LocalVectorStore.from_texts(texts, HashingEmbeddings(size=1 << 20), ids=ids, **kwargs)


def test_max_postings_looks_at_the_newest_documents_only():
    store = _recency_store(3, max_postings=1)
    assert [d.id for d in store.similarity_search("shared", k=10)] == ["2"]
    store = _recency_store(3, max_postings=2)
    assert {d.id for d in store.similarity_search("shared", k=10)} == {"1", "2"}
    exact = _recency_store(3, max_postings=None)
    assert {d.id for d in exact.similarity_search("shared", k=10)} == {"0", "1", "2"}
    direct = LocalVectorStore(HashingEmbeddings(size=1 << 20), max_postings=1)
    direct.add_texts(["shared a", "shared b"], ids=["a", "b"])
    assert [d.id for d in direct.similarity_search("shared", k=10)] == ["b"]


def test_default_max_postings_is_1024():
    store = _recency_store(1025)
    found = store.similarity_search("shared", k=2000)
    assert len(found) == 1024
    assert "0" not in {d.id for d in found}
    plain = LocalVectorStore(HashingEmbeddings(size=1 << 20))
    plain.add_texts([f"shared {i}" for i in range(1025)])
    assert len(plain.similarity_search("shared", k=2000)) == 1024


def test_similarity_search_default_k_is_4():
    store = _recency_store(6, max_postings=None)
    assert len(store.similarity_search("shared")) == 4
    assert len(store.similarity_search_with_score("shared")) == 4
    assert len(store.similarity_search("shared", k=2)) == 2
    assert len(store.similarity_search("shared", 5)) == 5
    assert store.similarity_search("shared", k=0) == []
    assert store.similarity_search("shared", k=-1) == []


def test_similarity_scores_are_cosine_sums_over_dimensions():
    store = LocalVectorStore.from_texts(
        ["red apples", "green pears"], HashingEmbeddings(), ids=["1", "2"]
    )
    ((doc, score),) = store.similarity_search_with_score("red apples", k=5)
    assert doc.id == "1" and score == pytest.approx(1.0)
    ((doc, score),) = store.similarity_search_with_score("apples", k=5)
    assert score == pytest.approx(1 / math.sqrt(2))
    # a query word no document has does not stop the scoring of the next ones
    ((doc, score),) = store.similarity_search_with_score("unknownword apples", k=5)
    assert doc.id == "1" and score == pytest.approx(0.5)
    ((doc, rel),) = store.similarity_search_with_relevance_scores("red apples", k=1)
    assert doc.id == "1" and rel == pytest.approx(1.0)


def test_zero_and_negative_scores_are_left_out():
    table = {"q": [1.0, 1.0], "zero": [1.0, -1.0], "neg": [-1.0, -1.0], "pos": [1.0, 0.0]}
    store = LocalVectorStore(_Fixed(table))
    store.add_texts(["zero", "neg", "pos"], ids=["z", "n", "p"])
    assert [(d.id, s) for d, s in store.similarity_search_with_score("q", k=5)] == [("p", 1.0)]


def test_add_texts_checks_lengths_and_keeps_metadata():
    store = LocalVectorStore(HashingEmbeddings(size=64))
    with pytest.raises(ValueError, match=r"^texts, metadatas and ids must have the same length$"):
        store.add_texts(["a", "b"], metadatas=[{}], ids=["1", "2"])
    with pytest.raises(ValueError, match=r"^texts, metadatas and ids must have the same length$"):
        store.add_texts(["a", "b"], ids=["1"])
    assert len(store) == 0
    ids = store.add_texts(["alpha", "gamma"], metadatas=[{"n": 1}, {"n": 2}], ids=["a", "g"])
    assert ids == ["a", "g"]
    assert [d.metadata for d in store.get_by_ids(["g", "a"])] == [{"n": 2}, {"n": 1}]
    assert [d.id for d in store.all_documents()] == ["a", "g"]
    generated = store.add_texts(["delta"])
    assert len(generated) == 1 and len(generated[0]) == 32
    assert [d.page_content for d in store.all_documents()] == ["alpha", "gamma", "delta"]


def test_add_texts_refuses_embeddings_that_lose_vectors():
    table = {"a": [1.0, 0.0], "b": [0.0, 1.0]}
    store = LocalVectorStore(_Fixed(table, short=True))
    with pytest.raises(ValueError, match="zip"):
        store.add_texts(["a", "b"], ids=["1", "2"])


def test_from_texts_keeps_metadatas_and_delete_all_returns_true():
    store = LocalVectorStore.from_texts(
        ["red apples", "green pears"], HashingEmbeddings(), [{"c": "r"}, {"c": "g"}], ids=["1", "2"]
    )
    assert [d.metadata for d in store.all_documents()] == [{"c": "r"}, {"c": "g"}]
    assert store.delete() is True
    assert store.all_documents() == []
    assert store.similarity_search("apples") == []


# ------------------------------------------------------------------ chit-chat and bonus


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ok thanks", True),
        ("thanks, great!", True),
        ("", False),
        ("thanks " * 11, False),  # more than 10 words
        ("ok " * 5 + "x" * 80, False),  # longer than 80 characters
        ("thanks for the port", False),
        ("understood " * 7 + "yes", True),  # 80 characters
        ("understood " * 7 + "yess", False),  # 81 characters
        (" ".join(["ok"] * 10), True),  # 10 words
        (" ".join(["ok"] * 11), False),
    ],
)
def test_is_chitchat(text, expected):
    assert is_chitchat(text) is expected


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("The API port is 8080.", "agent", 0.15),
        ("the port is open", "agent", 0.05),
        ("port 8080", "agent", 0.05),
        ("hello world", "agent", 0.0),
        ("thanks", "agent", None),
        ("thanks 42", "agent", 0.05),
        ("Remember: the job failed, we decided", "tool_failure", 0.2),
        ("Remember: the job failed, we decided", "agent", 0.3),
        ("is the port 8080?", "agent", 0.05),
        ("Actually is the port 8080?", "agent", 0.25),
        ("The port is 8080. Remember it. " + "filler words here. " * 40, "agent", 0.05),
    ],
)
def test_content_bonus_exact(text, kind, expected):
    got = content_bonus(text, kind=kind)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


def test_subject_keys_more_forms():
    assert subject_keys("we settled on 8080 as the API port") == frozenset({"api port"})
    text = "Correction: the database port of payments-api has changed, it is 30002 now."
    assert subject_keys(text) == frozenset({"api database payments port"})
    assert subject_keys("the port is 1. the port is 2") == frozenset({"port"})
    short = "the port is 8080" + " " * 584  # 600 characters: still short
    assert subject_keys(short) == frozenset({"port"})
    assert subject_keys(short + " ") == frozenset()  # a dump gets no subject


def test_delete_by_id():
    store = LocalVectorStore.from_texts(
        ["red apples", "red cars"], HashingEmbeddings(size=64), ids=["1", "2"]
    )
    assert store.delete(["1", "9"]) is True
    assert store.delete(["1"]) is False
    assert [d.id for d in store.similarity_search("red", k=5)] == ["2"]
    assert store.embeddings.embed_documents(["red"]) == [store.embeddings.embed_query("red")]


def test_clauses_and_the_short_text_boundary():
    assert clauses("a. b; c\nd") == ["a.", "b", "c", "d"]
    assert clauses("a\n \nb") == ["a", "b"]  # a blank piece is no clause
    assert content_signals("x" * 600).short is True
    assert content_signals("x" * 601).short is False
