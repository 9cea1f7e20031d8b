"""Promotion, eviction and capacity rules of every tier."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.memory import TieredMemory


def contents(items):
    return [i.content for i in items]


# ------------------------------------------------------------------ L1


def test_l1_is_a_ring_buffer_of_the_most_recent_items():
    mem = TieredMemory(3, 5, 10)
    for i in range(7):
        mem.add(f"item {i}", importance=0.1)
    assert contents(mem.get_l1()) == ["item 4", "item 5", "item 6"]
    assert contents(mem.get_l1(2)) == ["item 5", "item 6"]
    assert contents(mem.get_l1(99)) == ["item 4", "item 5", "item 6"]
    assert mem.stats()["l1"] == 3


def test_l1_limit_must_be_positive():
    mem = TieredMemory()
    with pytest.raises(ValueError, match="limit"):
        mem.get_l1(0)


# ------------------------------------------------------------------ L2


def test_l2_takes_items_above_threshold_while_not_full():
    mem = TieredMemory(10, 3, 10)
    mem.add("low", importance=0.6)  # not > 0.6
    mem.add("high", importance=0.61)
    mem.add("user says hi", kind="user")
    assert contents(mem.get_l2()) == ["user says hi", "high"]


def test_full_l2_admits_only_items_beating_the_minimum_and_evicts_it():
    mem = TieredMemory(10, 2, 10)
    mem.add("a", importance=0.7)
    mem.add("b", importance=0.8)
    mem.add("tie with min", importance=0.7)  # equal to min: not admitted
    assert contents(mem.get_l2()) == ["b", "a"]
    mem.add("c", importance=0.75)
    assert contents(mem.get_l2()) == ["b", "c"]  # "a" (the minimum) evicted
    mem.add("d", importance=0.95)
    assert contents(mem.get_l2()) == ["d", "b"]
    assert mem.stats()["l2"] == 2


def test_full_l2_rule_is_the_seed_rule_even_below_threshold():
    # the seed: once full, importance > min(importance in L2) is enough
    mem = TieredMemory(10, 1, 10, l2_threshold=0.0)
    mem.add("first", importance=0.1)
    mem.add("second", importance=0.2)
    assert contents(mem.get_l2()) == ["second"]


def test_l2_keeps_items_evicted_from_l1():
    mem = TieredMemory(2, 5, 10)
    mem.add("important", importance=0.9)
    for i in range(5):
        mem.add(f"noise {i}", importance=0.1)
    assert "important" not in contents(mem.get_l1())
    assert contents(mem.get_l2()) == ["important"]


# ------------------------------------------------------------------ L3 / L4


def test_items_evicted_from_l1_are_summarized_into_l3_with_capacity():
    mem = TieredMemory(2, 5, 3)
    for i in range(8):
        mem.add(f"event number {i}. More detail follows here.", importance=0.1)
    # 6 evicted (0..5); L3 keeps the 3 most recent summaries
    l3 = mem.get_l3()
    assert len(l3) == 3
    assert [i.seq for i in l3] == [3, 4, 5]
    assert mem.stats()["l4"] == 6


def test_extractive_summary_is_deterministic_and_short():
    long_text = "First sentence is short. " + "word " * 400
    mem = TieredMemory(1, 5, 5)
    mem.add(long_text, importance=0.1)
    mem.add("next", importance=0.1)
    (summary,) = mem.get_l3()
    assert summary.content == "First sentence is short."
    assert summary.id == mem.search("first sentence", 1)[0].id


def test_callable_summarizer_is_used_for_l3():
    mem = TieredMemory(1, 5, 5, summarizer=lambda text: f"S({text})")
    mem.add("alpha")
    mem.add("beta")
    assert contents(mem.get_l3()) == ["S(alpha)"]


def test_chat_model_summarizer_is_used_for_l3():
    model = GenericFakeChatModel(messages=iter([AIMessage("the user asked about the weather")]))
    mem = TieredMemory(1, 5, 5, summarizer=model)
    mem.add("What's the weather in Paris tomorrow, and should I bring an umbrella?")
    mem.add("next")
    assert contents(mem.get_l3()) == ["the user asked about the weather"]


def test_l4_search_finds_evicted_items_by_meaning_of_words():
    mem = TieredMemory(2, 5, 2)
    mem.add("deployed the payment service to production", importance=0.1)
    mem.add("the cat sat on the mat", importance=0.1)
    mem.add("database migration failed with a timeout", importance=0.1)
    mem.add("filler one", importance=0.1)
    mem.add("filler two", importance=0.1)
    hits = mem.search("why did the database migration fail", 1)
    assert contents(hits) == ["database migration failed with a timeout"]
    assert hits[0].importance == 0.1
    assert mem.search("   ", 3) == []


def test_l4_is_unlimited_while_l3_is_bounded():
    mem = TieredMemory(1, 1, 2)
    for i in range(20):
        mem.add(f"fact {i} zebra{i}", importance=0.1)
    assert len(mem.get_l3()) == 2
    assert contents(mem.search("zebra3", 1)) == ["fact 3 zebra3"]


def test_external_vector_store_plugs_in():
    from langchain_core.embeddings import Embeddings

    from ctxpolicy.memory.vectors import LocalVectorStore

    class CharEmbeddings(Embeddings):
        def embed_documents(self, texts):
            return [self.embed_query(t) for t in texts]

        def embed_query(self, text):
            return [float(text.count(c)) for c in "abcdefghijklmnopqrstuvwxyz"]

    store = LocalVectorStore(CharEmbeddings())
    mem = TieredMemory(1, 1, 1, vector_store=store)
    mem.add("zzz zzz", importance=0.1)
    mem.add("aaa", importance=0.1)
    mem.add("bbb", importance=0.1)
    assert mem.vector_store is store
    assert len(store) == 2
    assert contents(mem.search("zz", 1)) == ["zzz zzz"]


# ------------------------------------------------------------------ promote()


def test_promote_runs_due_promotions_when_auto_promote_is_off():
    calls = []

    def summarizer(text):
        calls.append(text)
        return text.upper()

    mem = TieredMemory(2, 5, 5, summarizer=summarizer, auto_promote=False)
    for i in range(4):
        mem.add(f"item {i}", importance=0.9)
    assert mem.get_l2() == [] and mem.get_l3() == [] and calls == []
    assert mem.stats()["pending"] == 6  # 4 to offer to L2 + 2 evicted to summarize
    assert mem.promote() == 4 + 2
    assert contents(mem.get_l3()) == ["ITEM 0", "ITEM 1"]
    assert len(mem.get_l2()) == 4
    assert mem.promote() == 0


# ------------------------------------------------------------------ messages


def test_add_message_scores_by_message_type():
    mem = TieredMemory()
    user = mem.add_message(HumanMessage("hi"))
    ok = mem.add_message(ToolMessage("42", tool_call_id="c1", name="calc"))
    bad = mem.add_message(ToolMessage("boom", tool_call_id="c2", name="calc", status="error"))
    ai = mem.add_message(AIMessage("", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c1"}]))
    assert mem.add_message(AIMessage("")) is None
    assert (user.kind, user.importance) == ("user", 0.9)
    assert (ok.kind, ok.importance, ok.content) == ("tool_success", 0.7, "calc -> 42")
    assert (bad.kind, bad.importance) == ("tool_failure", 0.8)
    assert ai.kind == "agent" and ai.content == 'calls calc({"x": 1})'


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"l1_size": 0}, "l1_size"),
        ({"l2_size": -1}, "l2_size"),
        ({"l3_size": 1.5}, "l3_size"),
        ({"l1_size": True}, "l1_size"),
        ({"l2_threshold": 2.0}, "l2_threshold"),
        ({"namespace": ()}, "namespace"),
        ({"summarizer": 42}, "summarizer"),
    ],
)
def test_bad_constructor_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TieredMemory(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"importance": 1.2}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"importance": float("nan")}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"kind": "robot"}, "kind"),
        ({"tags": "abc"}, "tags"),
        ({"metadata": ["x"]}, "metadata"),
        ({"metadata": {"importance": 3}}, "importance"),
        ({"item_id": ""}, "item_id"),
    ],
)
def test_bad_add_arguments_name_the_argument(kwargs, name):
    mem = TieredMemory()
    with pytest.raises(ValueError, match=name):
        mem.add("text", **kwargs)
    assert mem.total_added == 0


def test_empty_content_is_refused():
    with pytest.raises(ValueError, match="content"):
        TieredMemory().add("   ")


def test_search_validates_arguments():
    mem = TieredMemory()
    with pytest.raises(ValueError, match="limit"):
        mem.search("x", 0)
    with pytest.raises(TypeError, match="query"):
        mem.search(None, 1)  # type: ignore[arg-type]


def test_reads_are_safe_while_another_thread_writes():
    import threading

    mem = TieredMemory(50, 20, 50)
    errors: list[BaseException] = []
    done = threading.Event()

    def write():
        try:
            for i in range(3_000):
                mem.add(f"event {i} alpha{i % 17}", importance=(i % 10) / 10)
        finally:
            done.set()

    def read():
        try:
            while not done.is_set():
                mem.get_l1()
                mem.get_l2()
                mem.get_l3()
                mem.search("alpha3", 3)
                mem.to_data()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert mem.total_added == 3_000
