"""Edges of the edit handling (tests/recall/test_edits.py) that mutation testing found open:
id-less appends, a re-index after a compaction, and the SQLite column upgrade racing
another process or failing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import ctxpolicy.recall.sqlite as sqlite_module
from ctxpolicy.policy import RecallCollectorSpec
from ctxpolicy.recall.ingest import (
    HistorySync,
    MessageFingerprints,
    Synced,
    message_fingerprint,
    message_key,
    message_version,
)
from ctxpolicy.recall.recaller import Recaller, RecallRequest
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from tests.recall.test_edits import OLD_SCHEMA, WordEmbeddings, ask, count_checks


class Recording(SQLiteRecallIndex):
    def __init__(self, path: str | Path = ":memory:") -> None:
        super().__init__(path)
        self.forgotten: list[list[str]] = []

    def forget_messages(self, thread: str, message_ids) -> int:  # type: ignore[no-untyped-def]
        self.forgotten.append(list(message_ids))
        return super().forget_messages(thread, message_ids)


def test_appending_id_less_messages_stops_the_walk_at_the_last_known_one() -> None:
    index = Recording()
    sync = HistorySync(index)
    history: list[BaseMessage] = [HumanMessage(f"line {i}") for i in range(5)]
    sync.sync("t", history)
    assert sync.sync("t", [*history, HumanMessage("line 5")]) == Synced(1, 0)
    assert index.forgotten == []  # nothing was walked back over, nothing to forget


def compacted_session() -> list[BaseMessage]:
    """Filler, a tool result buried in the middle, then more filler (positions 0-28)."""
    history: list[BaseMessage] = []
    for i in range(3):
        history += [HumanMessage(f"status {i}", id=f"h{i}"), AIMessage(f"ok {i}", id=f"a{i}")]
    call = {"name": "get_logs", "args": {}, "id": "c1"}
    history.append(AIMessage("", tool_calls=[call], id="call"))  # position 6
    history.append(ToolMessage("02:41 walrus replica exhausted", tool_call_id="c1", id="logs"))
    history.append(AIMessage("Noted.", id="noted"))
    for i in range(3, 13):
        history += [HumanMessage(f"status {i}", id=f"h{i}"), AIMessage(f"ok {i}", id=f"a{i}")]
    return history


def test_a_reindex_after_a_compaction_replaces_the_edited_message_at_its_position() -> None:
    spec = RecallCollectorSpec(type="recall", header="", embeddings="emb")
    recaller = Recaller(spec)
    services = {"emb": WordEmbeddings()}
    history = compacted_session()
    ask(recaller, history, "replica exhausted", services=services)
    shown = history[4:]  # a summary replaced the 4 oldest messages: offset 4
    assert recaller.sync.sync("t", shown) == Synced(0, 4)
    at = 7 - 4
    edited = ToolMessage("02:41 narwhal replica exhausted", tool_call_id="c1", id="logs")
    shown = [*shown[:at], edited, *shown[at + 1 :]]
    texts = ask(recaller, shown, "replica exhausted walrus", services=services)
    assert "02:41 walrus replica exhausted" not in texts
    (hit,) = recaller.index.search("t", ["narwhal"], limit=5)
    assert (hit.unit.message_id, hit.unit.position, hit.unit.tool) == ("logs", 7, "get_logs")
    assert recaller.index.search("t", ["walrus"], limit=5) == []
    assert recaller.index.indexed_messages("t")[7] == (7, "logs", message_fingerprint(edited))
    assert recaller.sync.is_current("t", "logs", edited)
    assert not recaller.sync.is_current("t", "logs", history[7])
    dense = recaller._dense["t"].search("narwhal", limit=1)
    assert [(h.unit.message_id, h.unit.text) for h in dense] == [
        ("logs", "02:41 narwhal replica exhausted")
    ]


def test_a_tool_result_right_after_its_call_keeps_the_tool_name_when_reindexed() -> None:
    recaller = Recaller(RecallCollectorSpec(type="recall", header=""))
    history = compacted_session()[6:]  # the call at 0, its result at 1
    ask(recaller, history, "replica exhausted")
    edited = ToolMessage("02:41 narwhal replica exhausted", tool_call_id="c1", id="logs")
    ask(recaller, [history[0], edited, *history[2:]], "replica exhausted")
    (hit,) = recaller.index.search("t", ["narwhal"], limit=5)
    assert hit.unit.tool == "get_logs"


def old_database(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)


def look_instead(
    monkeypatch: pytest.MonkeyPatch, *, at: int, instead: Callable[[], set[str]]
) -> list[str]:
    """Make the ``at``-th look at a table's columns call ``instead`` (the others are real);
    returns the tables looked at."""
    real = sqlite_module._columns
    looked: list[str] = []

    def columns(conn: sqlite3.Connection, table: str) -> set[str]:
        looked.append(table)
        return instead() if len(looked) == at else real(conn, table)

    monkeypatch.setattr(sqlite_module, "_columns", columns)
    return looked


def test_a_column_another_process_added_meanwhile_is_not_added_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    old_database(path)

    def not_yet() -> set[str]:  # the first look: not there; then another process adds it
        with sqlite3.connect(path) as other:
            other.execute("ALTER TABLE recall_message ADD COLUMN fingerprint TEXT")
        return {"thread", "message_id", "position"}

    looked = look_instead(monkeypatch, at=1, instead=not_yet)
    index = SQLiteRecallIndex(path)
    # the fingerprint column (looked at twice), then the segmented columns (layout 1)
    assert looked == ["recall_message", "recall_message", "recall_unit"]
    assert index.indexed_messages("t") == [(0, "h0", None)]
    assert not index._conn.in_transaction


def test_a_failed_column_upgrade_is_rolled_back_and_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    old_database(path)

    def failing() -> set[str]:  # the second look, inside the transaction
        raise sqlite3.OperationalError("disk I/O error (simulated)")

    look_instead(monkeypatch, at=2, instead=failing)
    with pytest.raises(sqlite3.OperationalError, match="simulated"):
        SQLiteRecallIndex(path)
    monkeypatch.undo()
    # nothing half done: the database is unlocked and upgrades on the next open
    assert SQLiteRecallIndex(path).indexed_messages("t") == [(0, "h0", None)]


def test_a_reindexed_result_of_the_tenth_parallel_call_is_named_after_its_tool() -> None:
    calls = [{"name": f"tool_{i}", "args": {}, "id": f"c{i}"} for i in range(10)]
    history: list[BaseMessage] = [
        HumanMessage("check every replica", id="ask"),
        AIMessage("", tool_calls=calls, id="calls"),
        *(ToolMessage(f"replica {i} fine", tool_call_id=f"c{i}", id=f"r{i}") for i in range(10)),
        AIMessage("All fine.", id="done"),
    ]
    for i in range(10):
        history += [HumanMessage(f"status {i}", id=f"h{i}"), AIMessage(f"ok {i}", id=f"a{i}")]
    recaller = Recaller(RecallCollectorSpec(type="recall", header=""))
    ask(recaller, history, "replica fine")
    history[11] = ToolMessage("replica 9 walrus degraded", tool_call_id="c9", id="r9")
    ask(recaller, history, "replica fine")
    (hit,) = recaller.index.search("t", ["walrus"], limit=5)
    assert (hit.unit.message_id, hit.unit.tool) == ("r9", "tool_9")
    # a result whose call is not in the history (a compaction took it) has no tool name
    orphan = [ToolMessage("replica 9 narwhal degraded", tool_call_id="c9", id="r9"), *history[12:]]
    sync = HistorySync(SQLiteRecallIndex())
    sync.sync("t", orphan[:1])
    sync.reindex("t", orphan, 0, 0)
    (hit,) = sync.index.search("t", ["narwhal"], limit=5)
    assert hit.unit.tool is None


def test_an_up_to_date_index_opens_while_another_connection_writes(tmp_path: Path) -> None:
    path = tmp_path / "recall.db"
    SQLiteRecallIndex(path).close()
    with sqlite3.connect(path, isolation_level=None) as other:
        other.execute("BEGIN IMMEDIATE")  # a writer holds the lock
        other.execute("INSERT INTO recall_message VALUES ('w', 'm', 0, NULL)")
        index = SQLiteRecallIndex(path)  # no upgrade to make: no lock to wait for
        assert index.indexed_messages("t") == []
        other.execute("COMMIT")
    assert index.indexed_messages("w") == [(0, "m", None)]


def test_a_reindex_splits_with_the_recall_layers_unit_size() -> None:
    recaller = Recaller(RecallCollectorSpec(type="recall", header="", max_unit_chars=40))
    history = compacted_session()
    ask(recaller, history, "replica exhausted")
    line = "02:41 walrus replica exhausted on the primary and on every standby node"
    history[7] = ToolMessage(line, tool_call_id="c1", id="logs")
    ask(recaller, history, "replica exhausted")
    units = [h.unit.text for h in recaller.index.search("t", ["standby", "walrus"], limit=5)]
    assert len(units) == 2  # cut at 40 characters, as when it was first indexed
    assert all(len(text) <= 40 for text in units)


def test_appending_to_a_log_without_fingerprints_stops_the_walk_at_the_last_known_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    old_database(path)  # h0 indexed, no fingerprint recorded
    index = Recording(path)
    sync = HistorySync(index)
    history = [HumanMessage("Set up the nightly load.", id="h0"), AIMessage("Done.", id="a0")]
    assert sync.sync("t", history) == Synced(1, 0)
    assert index.forgotten == []  # h0 matched by id: nothing walked back over


def test_only_the_messages_of_shown_units_are_checked() -> None:
    history: list[BaseMessage] = [
        HumanMessage(f"walrus replica note number {i}", id=f"n{i}") for i in range(30)
    ]
    # other talk, so that the notes' words stay above the relevance floor (under 5 %)
    history += [AIMessage(f"status {i} ok", id=f"s{i}") for i in range(600)]
    history += [HumanMessage("latest", id="last"), AIMessage("ok", id="ok")]
    recaller = Recaller(RecallCollectorSpec(type="recall", header=""))
    checked = count_checks(recaller)
    request = RecallRequest(
        layer="recall__context",
        query="walrus replica",
        history=history,
        kept_from=len(history) - 2,
        prompt_text="",
        cap_tokens=15,  # room for two of the thirty matching lines
        count_tokens=lambda text: len(text.split()),
        thread_id="t",
        services={},
    )
    shown = recaller.recall(request).units
    assert len(shown) == 2
    assert sorted(checked) == sorted(u.message_id for u in shown)


def test_a_fingerprint_is_remembered_for_the_same_message_until_its_content_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctxpolicy.recall.ingest as ingest

    sync = HistorySync(SQLiteRecallIndex())
    message = HumanMessage("the replica is walrus", id="m")
    sync.sync("t", [message])
    hashed: list[str] = []
    real = ingest.message_fingerprint

    def counting(m: BaseMessage) -> str:
        hashed.append(str(m.content))
        return real(m)

    monkeypatch.setattr(ingest, "message_fingerprint", counting)
    assert sync.is_current("t", "m", message)
    assert sync.is_current("t", "m", message)
    assert hashed == ["the replica is walrus"]  # once for the same object
    message.content = "the replica is narwhal"  # a content assigned anew is hashed again
    assert not sync.is_current("t", "m", message)
    assert hashed == ["the replica is walrus", "the replica is narwhal"]
    copy = HumanMessage("the replica is walrus", id="m")  # another object: hashed
    assert sync.is_current("t", "m", copy)
    assert len(hashed) == 3


def test_the_remembered_fingerprints_start_over_when_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctxpolicy.recall.ingest as ingest

    monkeypatch.setattr(ingest, "MAX_REMEMBERED", 2)
    sync = HistorySync(SQLiteRecallIndex())
    messages = [HumanMessage(f"line {i}", id=f"m{i}") for i in range(3)]
    sync.sync("t", messages)
    for message in messages:
        assert sync.is_current("t", str(message.id), message)
    fingerprints = sync._fingerprints
    assert len(fingerprints) == 1  # the third started over
    assert fingerprints._seen[id(messages[2])][2] == message_fingerprint(messages[2])
    assert len(MessageFingerprints(size=5)) == 0
    assert MessageFingerprints()._size == 2  # the default is read when made


def test_a_message_version_is_its_key_and_fingerprint_with_or_without_a_position() -> None:
    plain = HumanMessage("the replica is walrus")
    digest = message_fingerprint(plain)
    assert message_version(plain) == (message_key(plain), digest) == (f"~{digest}", digest)
    assert message_version(plain, 4) == (message_key(plain, 4), digest)
    assert message_version(plain, 4, fingerprint="known") == ("~4:known", "known")
    named = HumanMessage("the replica is walrus", id="m")
    assert message_version(named, 4) == ("m", digest) == message_version(named)


def test_message_fingerprints_remember_as_many_objects_as_asked() -> None:
    fingerprints = MessageFingerprints(size=1)
    first, second = HumanMessage("a", id="1"), HumanMessage("b", id="2")
    assert fingerprints.of(first) == message_fingerprint(first)
    assert fingerprints.of(second) == message_fingerprint(second)
    assert len(fingerprints) == 1  # started over for the second


def test_a_result_synced_after_its_call_is_named_after_its_tool_however_far_back() -> None:
    calls = [{"name": f"tool_{i}", "args": {}, "id": f"c{i}"} for i in range(10)]
    history: list[BaseMessage] = [
        HumanMessage("check every replica", id="ask"),
        AIMessage("", tool_calls=calls, id="calls"),
        *(ToolMessage(f"replica {i} fine", tool_call_id=f"c{i}", id=f"r{i}") for i in range(9)),
    ]
    sync = HistorySync(SQLiteRecallIndex())
    sync.sync("t", history)  # nine results arrived; the tenth comes later, 10 messages on
    history.append(ToolMessage("replica 9 walrus degraded", tool_call_id="c9", id="r9"))
    assert sync.sync("t", history).added == 1
    (hit,) = sync.index.search("t", ["walrus"], limit=5)
    assert (hit.unit.message_id, hit.unit.tool) == ("r9", "tool_9")
    # a result whose call is in no message of the history has no tool name
    orphan = [HumanMessage("again", id="again"), ToolMessage("narwhal", tool_call_id="c99")]
    other = HistorySync(SQLiteRecallIndex())
    other.sync("u", orphan[:1])
    other.sync("u", orphan)
    (hit,) = other.index.search("u", ["narwhal"], limit=5)
    assert hit.unit.tool is None


def test_results_of_calls_an_earlier_sync_saw_are_named_beside_new_calls() -> None:
    calls = [{"name": f"tool_{i}", "args": {}, "id": f"c{i}"} for i in range(3)]
    history: list[BaseMessage] = [
        HumanMessage("check the replicas", id="ask"),
        AIMessage("", tool_calls=calls, id="calls"),
    ]
    sync = HistorySync(SQLiteRecallIndex())
    sync.sync("t", history)
    # the results arrive in a later batch, with a new call and its result among them
    again = {"name": "tool_again", "args": {}, "id": "c9"}
    history += [
        ToolMessage("replica zero walrus", tool_call_id="c0", id="r0"),
        ToolMessage("replica one narwhal", tool_call_id="c1", id="r1"),
        AIMessage("", tool_calls=[again], id="calls2"),
        ToolMessage("replica nine dugong", tool_call_id="c9", id="r9"),
        ToolMessage("replica two manatee", tool_call_id="c2", id="r2"),
    ]
    sync.sync("t", history)
    named = {
        word: sync.index.search("t", [word], limit=5)[0].unit.tool
        for word in ("walrus", "narwhal", "dugong", "manatee")
    }
    assert named == {
        "walrus": "tool_0",
        "narwhal": "tool_1",
        "dugong": "tool_again",
        "manatee": "tool_2",
    }


def test_a_batch_that_holds_its_calls_looks_no_further_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctxpolicy.recall.ingest as ingest

    looked: list[int] = []
    caller_of = ingest._caller_of

    def counting(history: Any, at: int) -> dict[str, str]:
        looked.append(at)
        return caller_of(history, at)

    monkeypatch.setattr(ingest, "_caller_of", counting)
    call = {"name": "probe", "args": {}, "id": "c1"}
    sync = HistorySync(SQLiteRecallIndex())
    sync.sync(
        "t",
        [
            HumanMessage("probe it", id="ask"),
            AIMessage("", tool_calls=[call], id="a"),
            ToolMessage("probe result qwerty", tool_call_id="c1", id="r"),
        ],
    )
    assert looked == []  # the call is in the batch: no walk back
    (hit,) = sync.index.search("t", ["qwerty"], limit=5)
    assert hit.unit.tool == "probe"
