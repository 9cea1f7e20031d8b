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


def test_seed_policy_full_l2_admits_only_items_beating_the_minimum_and_evicts_it():
    mem = TieredMemory(10, 2, 10, l2_policy="seed")
    mem.add("a", importance=0.7)
    mem.add("b", importance=0.8)
    mem.add("tie with min", importance=0.7)  # equal to min: not admitted
    assert contents(mem.get_l2()) == ["b", "a"]
    mem.add("c", importance=0.75)
    assert contents(mem.get_l2()) == ["b", "c"]  # "a" (the minimum) evicted
    mem.add("d", importance=0.95)
    assert contents(mem.get_l2()) == ["d", "b"]
    assert mem.stats()["l2"] == 2


def test_full_l2_is_not_frozen_ties_go_to_the_newer_item():
    # the old (seed) rule froze a full L2 of equals: the first value stated stayed forever
    mem = TieredMemory(10, 2, 10)
    assert mem.l2_policy == "refresh"
    mem.add("a", importance=0.7)
    mem.add("b", importance=0.8)
    mem.add("tie with min", importance=0.7)  # at least the minimum: evicts the oldest 0.7
    assert contents(mem.get_l2()) == ["b", "tie with min"]
    mem.add("below", importance=0.65)  # less than the minimum: refused
    assert contents(mem.get_l2()) == ["b", "tie with min"]
    mem.add("c", importance=0.9)
    assert contents(mem.get_l2()) == ["c", "b"]


def test_full_l2_of_equals_keeps_taking_newer_important_items():
    mem = TieredMemory(5, 3, 10)
    for i in range(10):
        mem.add(f"user turn {i}", kind="user")
    assert contents(mem.get_l2()) == ["user turn 9", "user turn 8", "user turn 7"]


def test_refresh_evicts_the_oldest_of_the_least_important():
    mem = TieredMemory(10, 3, 10)
    mem.add("old low", importance=0.7)
    mem.add("high", importance=0.9)
    mem.add("new low", importance=0.7)
    mem.add("newest", importance=0.7)
    assert contents(mem.get_l2()) == ["high", "newest", "new low"]


def test_l2_threshold_applies_to_refresh_too():
    mem = TieredMemory(10, 1, 10)
    mem.add("in", importance=0.61)
    mem.add("below threshold", importance=0.6)
    assert contents(mem.get_l2()) == ["in"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The deploy region is eu-west-3.", "Correction: the deploy region is now us-east-1."),
        ("the staging DB port is 5432", "Actually the staging DB port is 6543"),
        ("Remember: our API port is 8080.", "Update: our API port has changed to 9090."),
        ("The build owner is Priya.", "The build owner is Marcus now."),
        ("we settled on v3.2 as the pinned SDK version", "the pinned SDK version is v3.4"),
        (
            "The database port of payments-api is 20001.",
            "Correction: the database port of payments-api has changed, it is 30002 now.",
        ),
    ],
)
def test_a_newer_statement_about_the_same_subject_replaces_the_older_one_in_l2(old, new):
    mem = TieredMemory(3, 10, 10)
    mem.add(old, kind="user")
    mem.add("an unrelated note about lunch plans", kind="user")
    mem.add(new, kind="agent")  # less important by kind, but newer about the same subject
    l2 = contents(mem.get_l2())
    assert new in l2 and old not in l2
    replaced = next(i for i in mem.get_l2() if i.content == new)
    assert replaced.importance >= mem.add("x", kind="user").importance - 0.1  # inherits rank


def test_different_subjects_are_not_merged():
    mem = TieredMemory(3, 10, 10)
    mem.add("the staging database port of payments-api is 1111", kind="user")
    mem.add("the production database port of payments-api is 2222", kind="user")
    mem.add("the database port of orders-api is 3333", kind="user")
    assert len(mem.get_l2()) == 3


def test_subject_from_metadata_or_tag_wins_over_the_text():
    mem = TieredMemory(3, 10, 10)
    mem.add("blue", kind="user", metadata={"subject": "favourite colour"})
    mem.add("green now", kind="user", tags=["subject:Favourite Colour"])
    assert contents(mem.get_l2()) == ["green now"]


def test_seed_policy_keeps_both_values():
    mem = TieredMemory(3, 10, 10, l2_policy="seed")
    mem.add("The deploy region is eu-west-3.", kind="user")
    mem.add("Correction: the deploy region is now us-east-1.", kind="user")
    assert len(mem.get_l2()) == 2


def test_full_l2_rule_is_the_seed_rule_even_below_threshold():
    # the seed rule: once full, importance > min(importance in L2) is enough
    mem = TieredMemory(10, 1, 10, l2_threshold=0.0, l2_policy="seed")
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
    # a limit keeps the most recent summaries, still oldest first
    assert [i.seq for i in mem.get_l3(2)] == [4, 5]
    assert [i.seq for i in mem.get_l3(1)] == [5]
    assert [i.seq for i in mem.get_l3(99)] == [3, 4, 5]


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


def test_add_message_scores_by_message_type_and_content():
    mem = TieredMemory()
    user = mem.add_message(HumanMessage("please look into the billing module"))
    ok = mem.add_message(ToolMessage("done", tool_call_id="c1", name="calc"))
    bad = mem.add_message(ToolMessage("boom", tool_call_id="c2", name="calc", status="error"))
    ai = mem.add_message(AIMessage("", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c1"}]))
    assert mem.add_message(AIMessage("")) is None
    assert (user.kind, user.importance) == ("user", 0.9)
    assert (ok.kind, ok.importance, ok.content) == ("tool_success", 0.7, "calc -> done")
    assert (bad.kind, bad.importance) == ("tool_failure", 0.8)
    assert ai.kind == "agent" and ai.content == 'calls calc({"x": 1})'
    assert ok.metadata["tool"] == "calc"
    # content counts: a number in a tool result, small talk from the user
    number = mem.add_message(ToolMessage("42", tool_call_id="c3", name="calc"))
    thanks = mem.add_message(HumanMessage("thanks!"))
    assert number.importance > ok.importance and thanks.importance < 0.5


def test_add_message_is_idempotent_by_message_id():
    mem = TieredMemory(2, 5, 5)
    first = mem.add_message(HumanMessage("the deploy region is eu-west-3", id="m1"))
    for i in range(4):
        mem.add_message(AIMessage(f"step {i}", id=f"a{i}"))
    again = mem.add_message(HumanMessage("the deploy region is eu-west-3", id="m1"))
    assert again == first and first.id == "m1"
    assert mem.total_added == 5
    assert mem.has("m1") and not mem.has("m9")


def test_id_less_messages_are_keyed_by_their_text():
    mem = TieredMemory()
    mem.add_message(HumanMessage("same words"))
    mem.add_message(HumanMessage("same words"))
    mem.add_message(AIMessage("same words"))  # another type: another message
    assert mem.total_added == 2


def test_record_adds_each_message_once_across_turns():
    mem = TieredMemory(3, 5, 5)
    turn1 = [HumanMessage("hi there", id="u1"), AIMessage("hello, what can I do?", id="a1")]
    assert [i.id for i in mem.record(turn1)] == ["u1", "a1"]
    turn2 = [*turn1, HumanMessage("the cache TTL is 300 s", id="u2"), AIMessage("", id="a2")]
    assert [i.id for i in mem.record(turn2)] == ["u2"]  # a2 has no text
    assert mem.record(turn2) == []
    assert mem.total_added == 3


# ------------------------------------------------------------------ search


def _dump(fact_line: str, at: int, lines: int = 100) -> str:
    out = [
        f"12:{i % 60:02d}:07 INFO api [web-0{i % 9}] req-{1000 + i} latency_ms={i * 7} status=200"
        for i in range(lines)
    ]
    out.insert(at, fact_line)
    return "\n".join(out)


def test_a_fact_buried_in_a_tool_output_is_found_after_it_left_l1():
    mem = TieredMemory(5, 10, 50)
    line = "12:31:07 INFO api [web-03] config-loader: database port = 43210 (source=consul)"
    mem.add_message(ToolMessage(_dump(line, 57), tool_call_id="c1", name="query_logs", id="t1"))
    for i in range(30):
        mem.add_message(HumanMessage(f"unrelated question number {i} about lunch", id=f"u{i}"))
    assert all(i.id != "t1" for i in mem.get_l1())
    (hit,) = mem.search("what is the database port?", 1)
    assert hit.content == line and hit.id == "t1"
    assert hit.tier in ("l3", "l4") and not hit.whole and hit.part > 0
    assert mem.original("t1").content.startswith("query_logs -> ")
    assert len(mem.original("t1").content.splitlines()) == 101


def test_search_hits_carry_their_tier():
    mem = TieredMemory(2, 1, 2)
    mem.add("zebra only in l4", importance=0.1)  # its summary is pushed out of L3 (size 2)
    mem.add("zebra summarized in l3", importance=0.1)
    mem.add("zebra important", importance=0.9)  # in L2 (and L3): L2 is named
    mem.add("zebra recent", importance=0.1)
    mem.add("filler", importance=0.1)
    tiers = {h.content: h.tier for h in mem.search("zebra", 10)}
    assert tiers == {
        "zebra only in l4": "l4",
        "zebra summarized in l3": "l3",
        "zebra important": "l2",
        "zebra recent": "l1",
    }
    assert [h.tier for h in mem.search("zebra", 10, tiers=("l1",))] == ["l1"]
    with pytest.raises(ValueError, match="tiers"):
        mem.search("zebra", 1, tiers=("l9",))


def test_search_never_returns_a_corrected_value_alone():
    mem = TieredMemory(2, 5, 5)
    mem.add("The deploy region of checkout is eu-west-3.", kind="user")
    for i in range(20):
        mem.add(f"the checkout deploy pipeline run {i} looked fine", kind="agent")
    mem.add("Correction: the deploy region of checkout is now us-east-1.", kind="agent")
    for i in range(5):
        mem.add(f"filler {i}", importance=0.1)
    for limit in (1, 2, 3, 10):
        text = " ".join(h.content for h in mem.search("deploy region of checkout", limit))
        assert "us-east-1" in text, limit
    first = mem.search("deploy region of checkout", 2)
    assert "us-east-1" in first[0].content and "eu-west-3" in first[1].content


def test_search_leaves_out_versions_replaced_by_a_later_add_of_the_same_id():
    mem = TieredMemory(1, 5, 5)
    mem.add("kiwi version one", item_id="k")
    mem.add("kiwi version two", item_id="k")
    mem.add("filler")
    assert contents(mem.search("kiwi version", 5)) == ["kiwi version two"]


def test_l3_summary_keeps_fact_lines_and_points_at_the_full_text():
    text = (
        "Checked the staging cluster today. "
        + "Everything looked normal and nothing unusual happened over the whole morning. " * 8
        + "The cache TTL is 300 s. Decided to keep the retry budget at 5."
    )
    mem = TieredMemory(1, 5, 5)
    item = mem.add(text, importance=0.1)
    mem.add("next", importance=0.1)
    (summary,) = mem.get_l3()
    assert summary.id == item.id and summary.content != text
    assert summary.content.startswith("Checked the staging cluster today.")
    assert "The cache TTL is 300 s." in summary.content
    assert "Decided to keep the retry budget at 5." in summary.content
    assert mem.original(item.id).content == text
    assert mem.original("nope") is None


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
        ({"l2_policy": "lru"}, "l2_policy"),
        ({"summary_tokens": 0}, "summary_tokens"),
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


def test_close_closes_only_an_owned_index():
    from ctxpolicy.recall.sqlite import SQLiteRecallIndex

    shared = SQLiteRecallIndex()
    mem = TieredMemory(index=shared, namespace=("agent", "a"))
    other = TieredMemory(index=shared, namespace=("agent", "b"))
    mem.add("alpha in a")
    other.add("alpha in b")
    assert [h.content for h in mem.search("alpha")] == ["alpha in a"]  # one thread each
    mem.close()
    assert [h.content for h in other.search("alpha")] == ["alpha in b"]
    own = TieredMemory()
    own.add("x1")
    own.close()
    with pytest.raises(Exception, match="closed"):
        own.search("x1")


def test_a_tier_filtered_search_brings_the_newer_statement_along():
    mem = TieredMemory(3, 5, 5)
    mem.add("The deploy region of billing is eu-west-3.", kind="user")
    for i in range(5):
        mem.add(f"filler {i}", importance=0.1)
    mem.add("Actually the deploy region of billing is now ap-south-1.", kind="user")
    hits = mem.search("deploy region of billing", 5, tiers=("l3", "l4"))
    assert [h.tier for h in hits] == ["l1", "l3"]  # the correction (in L1) comes along
    assert "ap-south-1" in hits[0].content and "eu-west-3" in hits[1].content
    from ctxpolicy.memory import select_memory

    got = select_memory(mem, tier="l4", query="deploy region of billing")
    assert "ap-south-1" in got[0].item.content
