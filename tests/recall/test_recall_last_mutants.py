"""Behaviour tests for the last surviving mutants of the recall area."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage

from ctxpolicy.policy import RecallCollectorSpec
from ctxpolicy.recall.dense import DenseUnits
from ctxpolicy.recall.recaller import Recaller, RecallRequest
from ctxpolicy.recall.select import DEFAULT_HEADER
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import Unit


def _unit(message_id: str, position: int, text: str) -> Unit:
    return Unit(message_id, position, 0, "user", None, 1, 1, text)


def _ids(hits: list) -> list[str]:
    return [hit.unit.message_id for hit in hits]


def test_sqlite_negative_limit_finds_nothing() -> None:
    index = SQLiteRecallIndex()
    index.add_messages("t", [(0, "m0", [_unit("m0", 0, "zebra crossing")])])
    assert _ids(index.search("t", ["zebra"], limit=1)) == ["m0"]
    assert index.search("t", ["zebra"], limit=-1) == []
    assert index.search("t", ["zebra", "crossing"], limit=-1) == []


def test_sqlite_single_term_search_sees_a_unit_added_after_a_miss() -> None:
    # a one-term search is not ranked through the (cached) posting counts: a miss on an
    # empty index must not hide the unit added right after
    index = SQLiteRecallIndex()
    assert index.search("t", ["zebra"], limit=5) == []
    index.add_messages("t", [(0, "m0", [_unit("m0", 0, "zebra crossing")])])
    assert _ids(index.search("t", ["zebra"], limit=5)) == ["m0"]


def test_sqlite_zero_limit_search_does_not_count_postings() -> None:
    # a zero-limit search returns at once: it must not count (and cache) the terms'
    # postings, which would hide units added right after it
    index = SQLiteRecallIndex()
    assert index.search("t", ["zebra", "crossing"], limit=0) == []
    index.add_messages("t", [(0, "m0", [_unit("m0", 0, "zebra crossing")])])
    assert _ids(index.search("t", ["zebra", "crossing"], limit=5)) == ["m0"]


class _CountingEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, float(len(text))] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [1.0, 0.0]


def test_dense_zero_limit_search_does_not_embed_the_query() -> None:
    embeddings = _CountingEmbeddings()
    store = DenseUnits(embeddings)
    store.sync([HumanMessage("the zebra crossing is on Main Street", id="m0")])
    assert store.units
    assert store.search("zebra", limit=0) == []
    assert embeddings.queries == []
    assert len(store.search("zebra", limit=1)) == 1
    assert embeddings.queries == ["zebra"]


def _request(history: list, query: str, **kw: object) -> RecallRequest:
    fields: dict[str, object] = {
        "layer": "recall__context",
        "query": query,
        "history": history,
        "kept_from": 1,
        "prompt_text": "",
        "cap_tokens": 100,
        "count_tokens": lambda text: max(1, text.count("\n")),
        "thread_id": "t",
        "services": {},
    }
    fields.update(kw)
    return RecallRequest(**fields)  # type: ignore[arg-type]


def test_recall_drops_a_hit_whose_message_is_no_longer_first_in_the_history() -> None:
    # the repeated packing reuses the first search; a hit at the history's first position
    # whose message the history no longer holds there is not recalled
    recaller = Recaller(RecallCollectorSpec(type="recall"))
    tail = HumanMessage("unrelated words here", id="m1")
    first = [HumanMessage("the vault path is kv-x9", id="m0"), tail]
    result = recaller.recall(_request(first, "vault path?"))
    assert result.text == f"{DEFAULT_HEADER}\n[#0 user] the vault path is kv-x9"
    assert [unit.message_id for unit in result.units] == ["m0"]
    replaced = [HumanMessage("something else entirely", id="x0"), tail]
    again = recaller.recall(_request(replaced, "vault path?", repeat=True))
    assert again.text is None
    assert again.units == ()
