"""Optional dense ranking (any langchain-core Embeddings, fused by RRF) and memory hits."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy import PolicyEngine
from ctxpolicy.recall.index import RecallHit
from ctxpolicy.recall.recaller import fuse_rankings
from ctxpolicy.recall.units import Unit

# a toy embedding: one dimension per concept, synonyms share it (what a real model learns)
CONCEPTS = {
    "database": 0,
    "db": 0,
    "postgres": 0,
    "production": 1,
    "prod": 1,
    "live": 1,
    "port": 2,
    "socket": 2,
    "connect": 2,
    "owner": 3,
    "maintainer": 3,
    "responsible": 3,
}


class ConceptEmbeddings(Embeddings):
    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * 5
        for word in text.lower().replace("?", " ").replace(".", " ").split():
            vector[CONCEPTS.get(word, 4)] += 1.0 if word in CONCEPTS else 0.05
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def filler(n: int) -> list:
    out = []
    for i in range(n):
        out.append(HumanMessage(f"status of batch job {i} please", id=f"h{i}"))
        out.append(AIMessage(f"batch job {i} finished in {i % 50} minutes", id=f"a{i}"))
    return out


def policy(tmp_path, long_session, embeddings: bool):
    extra = "embeddings: embed" if embeddings else ""
    return long_session(window=3000, recall=f"backend: memory\n{extra}", name=f"e{embeddings}")


def test_dense_ranking_finds_a_paraphrase_bm25_cannot(tmp_path, long_session) -> None:
    history = [
        HumanMessage("Note: the live postgres listens on 6432.", id="fact"),
        AIMessage("Noted.", id="ok"),
        *filler(200),
    ]
    question = HumanMessage("Which socket do I connect to for the prod db?", id="q")
    state = {"messages": [*history, question]}
    plain = PolicyEngine.from_file(policy(tmp_path, long_session, embeddings=False))
    result = plain.compose(process="react", system_prompt="s", state=state)
    assert "6432" not in "\n".join(str(m.content) for m in result.messages)
    dense = PolicyEngine.from_file(
        policy(tmp_path, long_session, embeddings=True), services={"embed": ConceptEmbeddings()}
    )
    result = dense.compose(process="react", system_prompt="s", state=state)
    assert "6432" in "\n".join(str(m.content) for m in result.messages)


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    def hits(*names: str) -> list[RecallHit]:
        return [RecallHit(Unit(n, i, 0, "user", None, 1, 1, n), 1.0) for i, n in enumerate(names)]

    fused = fuse_rankings([(1.0, hits("a", "b", "c")), (1.0, hits("c", "b", "d"))])
    assert [h.unit.message_id for h in fused][:2] == ["b", "c"] or [
        h.unit.message_id for h in fused
    ][:2] == ["c", "b"]
    assert fused[-1].unit.message_id == "d"
    only_bm25 = fuse_rankings([(1.0, hits("a", "b")), (0.0, hits("b", "a"))])
    assert [h.unit.message_id for h in only_bm25] == ["a", "b"]


class Item:
    def __init__(self, content: str, tier: str, item_id: str) -> None:
        self.content, self.tier, self.id = content, tier, item_id


class LongTermMemory:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, limit: int) -> list[Item]:
        self.calls.append((query, limit))
        return [Item("the billing team owns orders_v7 since March", "l4", "x1")]


def test_long_term_memory_hits_are_labelled_with_their_tier(tmp_path, long_session) -> None:
    memory = LongTermMemory()
    path = long_session(window=3000, recall="backend: memory\nmemory: ltm\nmemory_limit: 7")
    engine = PolicyEngine.from_file(path, services={"ltm": memory})
    state = {"messages": [*filler(50), HumanMessage("who owns orders_v7?", id="q")]}
    result = engine.compose(process="react", system_prompt="s", state=state)
    layer = result.report.layer("recall__context")
    assert memory.calls == [("who owns orders_v7?", 7)]
    (unit,) = [u for u in layer.recalled if u.source == "memory"]
    assert unit.label == "l4"
    text = "\n".join(str(m.content) for m in result.messages)
    assert "[memory l4] the billing team owns orders_v7 since March" in text


def test_a_real_tiered_memory_feeds_the_recall_layer_in_memory_order(long_session) -> None:
    from ctxpolicy.memory import TieredMemory

    memory = TieredMemory(l1_size=5, l2_size=10, l3_size=50)
    memory.add("The staging DB port of orders-api is 5433.")
    memory.add("The production DB port of orders-api is 6432.")
    memory.add("Correction: the production DB port of orders-api is now 7432.")
    for i in range(30):
        memory.add(f"batch {i} finished")
    path = long_session(window=3000, recall="backend: memory\nmemory: ltm", name="tm")
    engine = PolicyEngine.from_file(path, services={"ltm": memory})
    state = {"messages": [*filler(5), HumanMessage("production DB port of orders-api?", id="q")]}
    result = engine.compose(process="react", system_prompt="s", state=state)
    text = "\n".join(str(m.content) for m in result.messages)
    assert "7432" in text
    if "6432" in text:  # an older value only ever reads before the correction
        assert text.index("6432") < text.index("7432")
    units = result.report.layer("recall__context").recalled
    assert all(u.source == "memory" for u in units)
    assert len({(u.message_id, u.text) for u in units}) == len(units)


def test_dense_ranking_is_the_same_with_and_without_numpy(monkeypatch) -> None:
    import sys

    from ctxpolicy.recall.dense import DenseUnits

    history = [
        HumanMessage("Note: the live postgres listens on 6432.", id="fact"),
        *filler(40),
        HumanMessage("the maintainer of billing is Ana", id="owner"),
    ]
    with_numpy = DenseUnits(ConceptEmbeddings())
    assert with_numpy.sync(history) == len(history)
    assert with_numpy.sync([*history, HumanMessage("one more", id="n")]) == 1  # only the new
    fast = [h.unit.message_id for h in with_numpy.search("prod db socket?", limit=3)]
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now fails
    plain = DenseUnits(ConceptEmbeddings())
    plain.sync([*history, HumanMessage("one more", id="n")])
    slow = [h.unit.message_id for h in plain.search("prod db socket?", limit=3)]
    assert fast[0] == slow[0] == "fact"
    assert [h.unit.message_id for h in plain.search("who is responsible?", limit=1)] == ["owner"]
