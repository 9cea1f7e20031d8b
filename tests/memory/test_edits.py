"""A message edited under its id replaces the version the memory recorded, in every tier.

LangGraph's ``add_messages`` replaces a message by id: "time travel" forks from the
checkpoint before the model's reply and updates the human message under its id. The
memory must then hold the new text in L1, L2, L3 and its search index, and neither show
nor find the old one (a fact the user corrected); also after `to_data`/`from_data` and
`from_store`, while data written before fingerprints were kept keeps matching by id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from ctxpolicy import PolicyEngine
from ctxpolicy.memory import TieredMemory
from ctxpolicy.memory.messages import message_key
from ctxpolicy.memory.vectors import HashingEmbeddings, LocalVectorStore
from ctxpolicy.recall.ingest import message_fingerprint
from tests.memory.test_owned_memory import POLICY as OWNED_MEMORY_POLICY

OLD = "Deploy the nightly load to replica walrus-3."
NEW = "Deploy the nightly load to replica narwhal-5."


def drop_live(store: InMemoryStore, namespace: tuple[str, ...]) -> None:
    """Remove a memory's L1/L2 entries: the store of a version that kept only summaries."""
    for entry in store.search((*namespace, "live"), limit=1000):
        store.delete(entry.namespace, entry.key)


def deploy(text: str = OLD) -> HumanMessage:
    return HumanMessage(text, id="deploy")


def filler(count: int, start: int = 0) -> list[BaseMessage]:
    """``count`` turns that say nothing about the replica."""
    out: list[BaseMessage] = []
    for i in range(start, start + count):
        out.append(HumanMessage(f"How did batch {i} go?", id=f"h{i}"))
        out.append(AIMessage(f"Batch {i} finished without errors.", id=f"a{i}"))
    return out


def texts(items: Any) -> list[str]:
    return [i.content for i in items]


def indexed_units(memory: TieredMemory, word: str) -> list[str]:
    """The units of the memory's search index (not only what `search` returns) that
    contain ``word``."""
    thread = "memory:" + ".".join(memory.namespace)
    return [h.unit.text for h in memory.index.search(thread, [word], limit=20)]


def test_an_edit_replaces_the_old_version_in_l1_and_search() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([HumanMessage("Set up the nightly load.", id="setup"), deploy()])
    assert memory.is_recorded(deploy()) and not memory.is_recorded(deploy(NEW))
    (item,) = memory.record([deploy(NEW)])
    # one copy of the id, the new text as the newest item
    assert texts(memory.get_l1()) == ["Set up the nightly load.", NEW]
    assert item.id == "deploy" and item.seq == 2 and memory.original("deploy") == item
    assert memory.search("walrus", 5) == []
    assert indexed_units(memory, "walrus") == []  # the old units are gone from the index
    assert texts(memory.search("which replica", 5)) == [NEW]
    assert memory.is_recorded(deploy(NEW)) and not memory.is_recorded(deploy())
    assert memory.stats()["indexed"] == 2


def test_an_edit_that_no_longer_enters_l2_does_not_leave_the_old_version_there() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    assert texts(memory.get_l2()) == [OLD]  # a user statement: important
    memory.record([deploy("ok, thanks")])  # small talk: below the L2 threshold
    assert memory.get_l2() == []
    assert texts(memory.get_l1()) == ["ok, thanks"]


def test_an_edit_replaces_the_version_in_l2() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    memory.record([deploy(NEW)])
    assert [(i.id, i.content) for i in memory.get_l2()] == [("deploy", NEW)]


def test_an_edit_of_a_message_that_left_l1_replaces_its_summary() -> None:
    store = InMemoryStore()
    vectors = LocalVectorStore(HashingEmbeddings())
    memory = TieredMemory(l1_size=2, store=store, vector_store=vectors, namespace=("t",))
    memory.record([deploy(), *filler(1)])
    assert texts(memory.get_l3()) == [OLD]  # deploy left L1: summarized
    assert [d.id for d in vectors.all_documents()] == ["deploy"]
    assert memory.stats()["l4"] == 1
    memory.record([deploy(NEW)])  # pushes h0 out of L1
    # the old version's summary does not stay (in L3, the store, the vector store)
    assert texts(memory.get_l3()) == ["How did batch 0 go?"]
    assert store.get(("t", "summaries"), "deploy") is None
    assert [d.id for d in vectors.all_documents()] == ["h0"]
    assert memory.stats()["l4"] == 1
    assert memory.search("walrus", 5) == []
    assert indexed_units(memory, "walrus") == []
    memory.record(filler(1, start=1))  # the new version leaves L1 in turn
    assert texts(memory.get_l3()) == [
        "How did batch 0 go?",
        "Batch 0 finished without errors.",
        NEW,
    ]
    stored = store.get(("t", "summaries"), "deploy")
    assert stored is not None and stored.value["full_content"] == NEW
    assert stored.value["fingerprint"] == message_fingerprint(deploy(NEW))


class KeepingVectorStore(LocalVectorStore):
    """A vector store whose ``delete`` is not implemented (langchain-core's default)."""

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        raise NotImplementedError


def test_a_vector_store_that_cannot_delete_keeps_the_old_summary_but_search_passes_over_it() -> (
    None
):
    vectors = KeepingVectorStore(HashingEmbeddings())
    memory = TieredMemory(l1_size=2, vector_store=vectors)
    memory.record([deploy(), *filler(1)])
    memory.record([deploy(NEW)])
    assert [d.page_content for d in vectors.all_documents()] == [OLD, "How did batch 0 go?"]
    assert memory.search("walrus", 5) == []
    assert texts(memory.search("which replica", 5)) == [NEW]


def test_an_edit_of_a_message_waiting_for_promotion_is_not_summarized() -> None:
    memory = TieredMemory(l1_size=1, auto_promote=False)
    memory.record([deploy(), AIMessage("On it.", id="ok")])  # deploy left L1, not promoted
    memory.record([deploy(NEW)])
    memory.promote()
    assert texts(memory.get_l3()) == ["On it."]
    assert texts(memory.get_l1()) == [NEW]
    assert texts(memory.get_l2()) == [NEW]


def test_an_edited_tool_result_replaces_its_task_record() -> None:
    call = {"name": "lookup", "args": {"q": "replica"}, "id": "c1"}
    memory = TieredMemory(l1_size=10)
    memory.record(
        [
            HumanMessage("which replica?", id="q"),
            AIMessage("", tool_calls=[call], id="ask"),
            ToolMessage("walrus-3", tool_call_id="c1", name="lookup", id="r"),
        ]
    )
    memory.record([ToolMessage("narwhal-5", tool_call_id="c1", name="lookup", id="r")])
    assert [t.result for t in memory.tasks()] == ["narwhal-5"]
    assert memory.search("walrus", 5) == []


def test_an_edit_recorded_twice_is_recorded_once() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    assert len(memory.record([deploy(NEW)])) == 1
    assert memory.record([deploy(NEW)]) == []
    assert memory.add_message(deploy(NEW)) == memory.original("deploy")
    assert memory.total_added == 2
    # an edit back is an edit too: the recorded fingerprint is the newest one
    assert texts(memory.record([deploy()])) == [OLD]
    assert texts(memory.get_l1()) == [OLD]
    assert memory.search("narwhal", 5) == []


def test_add_message_replaces_an_edited_message() -> None:
    memory = TieredMemory(l1_size=10)
    first = memory.add_message(deploy())
    edited = memory.add_message(deploy(NEW))
    assert first is not None and edited is not None
    assert (edited.id, edited.content, edited.seq) == ("deploy", NEW, 1)
    assert texts(memory.get_l1()) == [NEW]
    # a message edited to say nothing leaves nothing behind
    assert memory.add_message(deploy("  ")) is None
    assert not memory.has("deploy") and memory.get_l1() == [] and memory.get_l2() == []


def test_recording_the_whole_history_replaces_an_earlier_edit() -> None:
    memory = TieredMemory(l1_size=10)
    history = [deploy(), *filler(2)]
    memory.record(history)
    edited = [deploy(NEW), *history[1:]]  # the later messages unchanged
    (item,) = memory.record(edited)  # every message compared, the edit found
    assert item.content == NEW
    assert texts(memory.get_l1()) == [*(m.text for m in history[1:]), NEW]
    assert memory.search("walrus", 5) == []


def test_id_less_messages_are_keyed_by_content_so_an_edit_is_a_new_message() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([HumanMessage(OLD)])
    memory.record([HumanMessage(NEW)])
    assert texts(memory.get_l1()) == [OLD, NEW]
    assert memory.is_recorded(HumanMessage(OLD)) and memory.is_recorded(HumanMessage(NEW))
    assert memory.record([HumanMessage(NEW), HumanMessage(OLD)]) == []
    assert memory.has(message_key(HumanMessage(NEW)))


def test_is_recorded_needs_a_message() -> None:
    with pytest.raises(TypeError, match="message must be a BaseMessage, got str"):
        TieredMemory().is_recorded("deploy")  # type: ignore[arg-type]


def test_an_item_added_under_a_message_id_matches_by_id() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    memory.add("the deploy target, as the operator put it", item_id="deploy")
    # `add` stored its own version: no message version to compare with any more
    assert memory.is_recorded(deploy(NEW))
    assert memory.record([deploy(NEW)]) == []


def test_the_fingerprint_is_hashed_once_per_message_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashed: list[BaseMessage] = []

    def counting(message: BaseMessage) -> str:
        hashed.append(message)
        return message_fingerprint(message)

    monkeypatch.setattr("ctxpolicy.recall.ingest.message_fingerprint", counting)
    memory = TieredMemory(l1_size=10)
    message = deploy()
    memory.record([message])
    assert memory.is_recorded(message) and memory.record([message]) == []
    assert hashed == [message]  # remembered
    message.content = NEW  # a content assigned anew is hashed again
    assert not memory.is_recorded(message)
    assert hashed == [message, message]
    plain = HumanMessage("z")
    (item,) = memory.record([plain])
    assert item.id == message_key(HumanMessage("z"))  # id-less: its digest is its key


def test_the_engine_walk_hashes_only_known_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    hashed: list[BaseMessage] = []

    def counting(message: BaseMessage) -> str:
        hashed.append(message)
        return message_fingerprint(message)

    monkeypatch.setattr("ctxpolicy.recall.ingest.message_fingerprint", counting)
    fresh = HumanMessage("a new question", id="new")
    assert not memory.is_recorded(fresh)
    assert hashed == []  # an unknown id needs no digest
    known = deploy()
    assert memory.is_recorded(known) and memory.is_recorded(known)
    assert hashed == [known]


# ------------------------------------------------------------------ persistence


def test_to_data_keeps_the_versions_and_an_edit_is_noticed_after_from_data() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy(), AIMessage("On it.", id="ok")])
    data = memory.to_data()
    assert data["versions"] == {
        "deploy": message_fingerprint(deploy()),
        "ok": message_fingerprint(AIMessage("On it.", id="ok")),
    }
    restored = TieredMemory.from_data(data)
    assert restored.is_recorded(deploy()) and not restored.is_recorded(deploy(NEW))
    restored.record([deploy(NEW)])
    assert texts(restored.get_l1()) == ["On it.", NEW]
    assert restored.search("walrus", 5) == []
    again = TieredMemory.from_data(restored.to_data())
    assert again.record([deploy(NEW)]) == []


def test_data_written_before_fingerprints_were_kept_matches_by_id() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    old = memory.to_data()
    del old["versions"]  # the payload of a memory written before this change
    restored = TieredMemory.from_data(old)
    assert restored.is_recorded(deploy(NEW))  # no fingerprint: the id decides
    assert restored.record([deploy(NEW)]) == []
    assert texts(restored.get_l1()) == [OLD]
    # messages recorded from now on have a fingerprint
    restored.record([HumanMessage("Use the blue pool.", id="pool")])
    restored.record([HumanMessage("Use the green pool.", id="pool")])
    assert texts(restored.get_l1()) == [OLD, "Use the green pool."]


def test_from_data_rejects_malformed_versions_and_ignores_unknown_keys() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    data = memory.to_data()
    for bad in (["deploy"], {"deploy": 3}, {5: "abc"}):
        with pytest.raises(
            ValueError,
            match=r"^memory data field 'versions' must map message keys to fingerprints$",
        ):
            TieredMemory.from_data({**data, "versions": bad})
    stray = TieredMemory.from_data({**data, "versions": {**data["versions"], "gone": "x"}})
    assert stray.to_data()["versions"] == data["versions"]


def test_from_store_keeps_the_fingerprints_and_notices_an_edit() -> None:
    store = InMemoryStore()
    memory = TieredMemory(l1_size=2, store=store, namespace=("t",))
    memory.record([deploy(), *filler(1)])  # deploy left L1: written through
    # L1 comes back too (the filler); room for the edit, so nothing else leaves L1
    restored = TieredMemory.from_store(store, namespace=("t",), l1_size=10)
    assert restored.is_recorded(deploy()) and not restored.is_recorded(deploy(NEW))
    restored.record([deploy(NEW)])
    assert restored.get_l3() == []
    assert store.get(("t", "summaries"), "deploy") is None
    assert restored.search("walrus", 5) == []
    assert texts(restored.search("which replica", 5)) == [NEW]
    assert restored.stats()["l4"] == 0


def test_a_store_entry_written_before_fingerprints_were_kept_matches_by_id() -> None:
    store = InMemoryStore()
    memory = TieredMemory(l1_size=2, store=store, namespace=("t",))
    memory.record([deploy(), *filler(1)])
    entry = store.get(("t", "summaries"), "deploy")
    assert entry is not None
    old = {k: v for k, v in entry.value.items() if k != "fingerprint"}
    store.put(("t", "summaries"), "deploy", old)
    drop_live(store, ("t",))  # that version did not write L1/L2 through either
    restored = TieredMemory.from_store(store, namespace=("t",))
    assert restored.is_recorded(deploy(NEW))
    assert restored.record([deploy(NEW)]) == []
    assert [h.content for h in restored.search("walrus", 5)] == [OLD]


# ------------------------------------------------------------------ the engine's walk


def test_the_engine_walk_records_an_edit_of_the_newest_message(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(OWNED_MEMORY_POLICY, encoding="utf-8")
    engine = PolicyEngine.from_file(path)
    history = [*filler(2), deploy()]
    engine.compose(system_prompt="s", state={"messages": history}, thread_id="t")
    (memory,) = engine._memories.values()
    assert memory.is_recorded(deploy())
    edited = [*filler(2), deploy(NEW)]
    engine.compose(system_prompt="s", state={"messages": edited}, thread_id="t")
    assert texts(memory.get_l1())[-1] == NEW
    assert memory.search("walrus", 5) == []
    assert memory.total_added == 6  # the four filler messages once, two versions
    engine.record([*edited, AIMessage("Deploying to narwhal-5.", id="r")], thread_id="t")
    engine.compose(system_prompt="s", state={"messages": edited}, thread_id="t")
    assert memory.total_added == 7


# ------------------------------------------------------------------ abandoned branches


def test_an_edit_forgets_the_branch_recorded_after_the_old_version() -> None:
    """Time travel: the fork edits a message and drops what followed it; the memory
    forgets the abandoned branch's messages (the reply repeated the old fact)."""
    memory = TieredMemory(l1_size=3, l2_size=10, l3_size=10)
    before = [HumanMessage("Set up the nightly load.", id="setup"), AIMessage("Done.", id="d")]
    memory.record(before)
    noted = memory.add("the operator is on call tonight", item_id="note")
    branch = [deploy(), AIMessage("Deploying to walrus-3 now.", id="reply"), *filler(3)]
    memory.record(branch)
    assert memory.search("walrus", 5)
    # the fork: the human message edited under its id, its reply and what followed gone
    fork = [deploy(NEW), AIMessage("Deploying to narwhal-5.", id="reply2")]
    item = memory.record(fork, forget_abandoned=True)[0]
    assert item.content == NEW
    assert memory.search("walrus", 5) == [] and indexed_units(memory, "walrus") == []
    kept = {i.id for i in memory.get_l1() + memory.get_l2() + memory.get_l3()}
    assert kept.isdisjoint({"reply", "h0", "a0", "h1", "a1", "h2", "a2"})
    # what came before the edited message stays, and so does what `add` stored
    assert memory.has("setup") and memory.has("d") and memory.has("note")
    assert memory.original("note") == noted
    assert memory.is_recorded(before[0]) and memory.is_recorded(deploy(NEW))


def test_an_edit_keeps_the_messages_its_batch_records_again() -> None:
    memory = TieredMemory(l1_size=10)
    reply = AIMessage("Deploying to walrus-3 now.", id="reply")
    memory.record([deploy(), reply, *filler(1)])
    # the edit comes with a message of the old branch again (same id, same text)
    memory.record([deploy(NEW), reply], forget_abandoned=True)
    assert memory.has("reply") and memory.is_recorded(reply)
    assert not memory.has("h0") and not memory.has("a0")


def test_a_new_message_forgets_nothing() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy(), *filler(2)])
    memory.record([HumanMessage("And tomorrow?", id="next")], forget_abandoned=True)
    assert all(memory.has(k) for k in ("deploy", "h0", "a0", "h1", "a1", "next"))


def test_a_memory_several_conversations_feed_keeps_the_others_after_an_edit() -> None:
    memory = TieredMemory(l1_size=10)
    memory.record([deploy()])
    memory.record(filler(2))  # another conversation, recorded after the old version
    memory.record([deploy(NEW)])  # forget_abandoned off: an edit replaces one message
    assert all(memory.has(k) for k in ("h0", "a0", "h1", "a1"))
    assert texts(memory.get_l1())[-1] == NEW
