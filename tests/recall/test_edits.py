"""A message replaced under its id by an edited one is indexed again, its old text removed.

LangGraph's ``add_messages`` replaces a message by id: "time travel" forks from the
checkpoint before the model's reply and updates the human message under its id. The
recall index must then stop finding the old text (a fact the user corrected) and find the
new one, also after a restart (the fingerprints live in the index), and an index written
before fingerprints were kept must keep working.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxpolicy.policy import RecallCollectorSpec
from ctxpolicy.recall.dense import DenseUnits
from ctxpolicy.recall.index import RecallIndex
from ctxpolicy.recall.ingest import (
    HistorySync,
    Synced,
    message_fingerprint,
    message_key,
    message_version,
)
from ctxpolicy.recall.recaller import Recaller, RecallRequest
from ctxpolicy.recall.sqlite import SQLiteRecallIndex

if TYPE_CHECKING:
    from ctxpolicy.recall.postgres import PostgresRecallIndex


def found(index: RecallIndex, word: str) -> list[tuple[str, str]]:
    """``(message id, unit text)`` of every unit of thread ``t`` matching ``word``."""
    return [(h.unit.message_id, h.unit.text) for h in index.search("t", [word], limit=10)]


def session() -> list[BaseMessage]:
    return [
        HumanMessage("Set up the nightly load.", id="h0"),
        AIMessage("The nightly load runs at 02:00 from the staging bucket.", id="a0"),
        HumanMessage("Deploy it to replica walrus tonight.", id="h1"),
        AIMessage("Deploying to the walrus replica at 23:00.", id="a1"),
    ]


def edited(history: list[BaseMessage]) -> list[BaseMessage]:
    """The time-travel fork: h1 edited under its id, the old reply gone, a new one."""
    return [
        *history[:2],
        HumanMessage("Deploy it to replica narwhal tonight.", id="h1"),
        AIMessage("Deploying to the narwhal replica at 23:00.", id="a9"),
    ]


def test_fingerprints_differ_exactly_when_what_the_message_says_differs() -> None:
    for message in (HumanMessage("x", id="1"), HumanMessage("x")):  # hashed once, same pair
        assert message_version(message, 3) == (
            message_key(message, 3),
            message_fingerprint(message),
        )
    same = message_fingerprint(HumanMessage("x", id="1"))
    assert same == message_fingerprint(HumanMessage("x", id="2"))  # the id is not content
    assert same != message_fingerprint(HumanMessage("y", id="1"))
    assert same != message_fingerprint(AIMessage("x", id="1"))  # the type is
    call = {"name": "f", "args": {"a": 1}, "id": "c1"}
    with_call = message_fingerprint(AIMessage("", tool_calls=[call]))
    assert with_call != message_fingerprint(AIMessage("", tool_calls=[{**call, "args": {"a": 2}}]))
    assert message_fingerprint(ToolMessage("r", tool_call_id="c1")) != message_fingerprint(
        ToolMessage("r", tool_call_id="c2")
    )


def test_an_edit_under_the_same_id_replaces_the_old_text_in_the_index() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    history = session()
    assert sync.sync("t", history) == Synced(4, 0)
    assert sync.sync("t", edited(history)) == Synced(2, 0)
    assert found(index, "walrus") == []  # the corrected fact and the old reply are gone
    assert sorted(found(index, "narwhal")) == [
        ("a9", "Deploying to the narwhal replica at 23:00."),
        ("h1", "Deploy it to replica narwhal tonight."),
    ]
    assert [(p, m) for p, m, _ in index.indexed_messages("t")] == [
        (0, "h0"),
        (1, "a0"),
        (2, "h1"),
        (3, "a9"),
    ]
    assert sync.sync("t", edited(history)) == Synced(0, 0)  # nothing new the next call


def test_an_edit_of_the_newest_message_alone_is_noticed() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    history = session()[:3]
    sync.sync("t", history)
    assert sync.sync("t", edited(session())[:3]) == Synced(1, 0)
    assert found(index, "walrus") == []
    assert found(index, "narwhal") == [("h1", "Deploy it to replica narwhal tonight.")]
    # a second edit back is noticed as well: the fingerprint recorded is the new one
    assert sync.sync("t", history) == Synced(1, 0)
    assert found(index, "narwhal") == []


def test_an_edit_is_noticed_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "recall.db"
    HistorySync(SQLiteRecallIndex(path)).sync("t", session())
    index = SQLiteRecallIndex(path)  # another process: the log is read from the file
    assert HistorySync(index).sync("t", edited(session())) == Synced(2, 0)
    assert found(index, "walrus") == []
    assert len(found(index, "narwhal")) == 2


OLD_SCHEMA = """
CREATE TABLE recall_message (
    thread TEXT NOT NULL,
    message_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (thread, message_id)
) WITHOUT ROWID;
INSERT INTO recall_message VALUES ('t', 'h0', 0);
"""


def test_a_database_written_before_fingerprints_gets_the_column_and_matches_by_id(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
    index = SQLiteRecallIndex(path)
    assert index.indexed_messages("t") == [(0, "h0", None)]
    sync = HistorySync(index)
    # no fingerprint recorded: the message is taken as the one indexed (by id)
    assert sync.sync("t", session()[:1]) == Synced(0, 0)
    assert sync.sync("t", session()[:2]) == Synced(1, 0)
    assert index.indexed_messages("t") == [
        (0, "h0", None),
        (1, "a0", message_fingerprint(session()[1])),
    ]
    SQLiteRecallIndex(path).close()  # opening it again finds the column: nothing to add
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(recall_message)")]
    assert columns == ["thread", "message_id", "position", "fingerprint"]


def test_postgres_notices_an_edit_across_index_objects(
    open_index: Callable[[], PostgresRecallIndex],
) -> None:
    HistorySync(open_index()).sync("t", session())
    index = open_index()  # another process on the same tables
    assert HistorySync(index).sync("t", edited(session())) == Synced(2, 0)
    assert found(index, "walrus") == []
    assert sorted(m for m, _ in found(index, "narwhal")) == ["a9", "h1"]
    assert index.indexed_messages("t")[2] == (2, "h1", message_fingerprint(edited(session())[2]))


def test_postgres_tables_made_before_fingerprints_get_the_column(
    postgres_dsn: str, prefix: str, open_index: Callable[[], PostgresRecallIndex]
) -> None:
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {prefix}_message (thread text NOT NULL, message_id text NOT NULL, "
            "position bigint NOT NULL, units integer NOT NULL, tokens integer NOT NULL, "
            "PRIMARY KEY (thread, message_id))"
        )
        conn.execute(f"INSERT INTO {prefix}_message VALUES ('t', 'h0', 0, 0, 0)")
    index = open_index()
    assert index.indexed_messages("t") == [(0, "h0", None)]
    assert HistorySync(index).sync("t", session()[:2]) == Synced(1, 0)
    assert index.indexed_messages("t")[1] == (1, "a0", message_fingerprint(session()[1]))


# ------------------------------------------------------------------ edits the sync cannot see


def long_session_history() -> list[BaseMessage]:
    """A fact early on, then filler: the fact is far outside the kept window."""
    history: list[BaseMessage] = [
        HumanMessage("Deploy it to replica walrus tonight.", id="fact"),
        AIMessage("Noted.", id="ok"),
    ]
    for i in range(10):
        history.append(HumanMessage(f"status of batch {i}", id=f"h{i}"))
        history.append(AIMessage(f"batch {i} finished", id=f"a{i}"))
    return history


def ask(recaller: Recaller, history: list[BaseMessage], query: str, **kw: object) -> list[str]:
    request = RecallRequest(
        layer="recall__context",
        query=query,
        history=history,
        kept_from=len(history) - 2,
        prompt_text="",
        cap_tokens=200,
        count_tokens=lambda text: len(text.split()),
        thread_id="t",
        services=kw.pop("services", {}),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    return [u.text for u in recaller.recall(request).units]


def in_place(history: list[BaseMessage]) -> list[BaseMessage]:
    """``update_state`` replacing the first message by id: the later ones unchanged."""
    return [HumanMessage("Deploy it to replica narwhal tonight.", id="fact"), *history[1:]]


def test_a_message_edited_before_unchanged_ones_is_never_recalled_as_it_read() -> None:
    recaller = Recaller(RecallCollectorSpec(type="recall", header=""))
    history = long_session_history()
    assert ask(recaller, history, "which replica walrus narwhal") == [
        "Deploy it to replica walrus tonight."
    ]
    edited_history = in_place(history)
    assert recaller.sync.sync("t", edited_history) == Synced(0, 0)  # the walk cannot see it
    # the recall does: the old text is not shown, the message is indexed again
    first = ask(recaller, edited_history, "which replica walrus narwhal")
    assert "Deploy it to replica walrus tonight." not in first
    assert found(recaller.index, "walrus") == []
    assert ask(recaller, edited_history, "which replica walrus narwhal") == [
        "Deploy it to replica narwhal tonight."
    ]
    assert recaller.sync.is_current("t", "fact", edited_history[0])


def test_the_spare_repeat_does_not_reuse_hits_of_the_old_text() -> None:
    recaller = Recaller(RecallCollectorSpec(type="recall", header=""))
    history = long_session_history()
    ask(recaller, history, "replica walrus")
    edited_history = in_place(history)
    assert "Deploy it to replica walrus tonight." not in ask(
        recaller, edited_history, "replica walrus"
    )
    again = ask(recaller, edited_history, "replica walrus", repeat=True)
    assert "Deploy it to replica walrus tonight." not in again


class WordEmbeddings(Embeddings):
    """One dimension per animal word; every text has a little of the last one."""

    WORDS = ("walrus", "narwhal", "replica")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float(w in text) for w in self.WORDS] + [0.01]


def test_dense_units_of_a_replaced_version_are_not_found() -> None:
    dense = DenseUnits(WordEmbeddings())
    history = session()
    assert dense.sync(history) == 4
    assert dense.sync(history) == 0
    fork = edited(history)
    assert dense.sync(fork) == 2  # the edited h1 and the new reply
    # five current units; the replaced version's (the best match) is passed over
    texts = [h.unit.text for h in dense.search("walrus", limit=5)]
    # the abandoned reply a1 stays (the recall drops it: its id is not in the history)
    assert sorted(texts) == sorted([*(m.text for m in fork), history[3].text])
    # an edit back (another fork): the first version is current again, once
    back = [*fork[:2], history[2]]
    assert dense.sync(back) == 1
    texts = [h.unit.text for h in dense.search("walrus", limit=10)]
    assert sorted(texts) == sorted([*(m.text for m in back), fork[3].text, history[3].text])


def test_dense_reembeds_an_edit_before_unchanged_messages() -> None:
    dense = DenseUnits(WordEmbeddings())
    history = long_session_history()
    dense.sync(history)
    changed = in_place(history)
    assert dense.sync(changed) == 0  # the walk back stops at the unchanged newest message
    assert dense.reembed(changed, 0) == 1
    assert dense.reembed(changed, 0) == 0
    best = dense.search("narwhal", limit=1)
    assert [h.unit.text for h in best] == ["Deploy it to replica narwhal tonight."]
    assert all("walrus" not in h.unit.text for h in dense.search("walrus", limit=30))


def test_a_recall_with_embeddings_reembeds_what_it_found_edited() -> None:
    spec = RecallCollectorSpec(type="recall", header="", embeddings="emb")
    recaller = Recaller(spec)
    services = {"emb": WordEmbeddings()}
    history = long_session_history()
    ask(recaller, history, "replica walrus", services=services)
    changed = in_place(history)
    assert "Deploy it to replica walrus tonight." not in ask(
        recaller, changed, "replica walrus", services=services
    )
    later = ask(recaller, changed, "replica walrus", services=services)
    assert "Deploy it to replica walrus tonight." not in later
    assert "Deploy it to replica narwhal tonight." in later
    # only the dense ranking can find the message now (bm25 has no "walrus" left)
    assert found(recaller.index, "walrus") == []
    assert all("walrus" not in text for text in ask(recaller, changed, "walrus", services=services))


def count_checks(recaller: Recaller) -> list[str]:
    """The message ids ``recaller`` checks for edits from now on (`HistorySync.is_current`)."""
    checked: list[str] = []
    is_current = recaller.sync.is_current

    def counting(thread: str, message_id: str, message: BaseMessage) -> bool:
        checked.append(message_id)
        return is_current(thread, message_id, message)

    recaller.sync.is_current = counting  # type: ignore[method-assign]
    return checked


def test_the_units_of_one_message_share_one_check() -> None:
    recaller = Recaller(RecallCollectorSpec(type="recall", header=""))
    dump = "\n".join(f"02:{i:02d} walrus replica line {i}" for i in range(6))
    history = [HumanMessage(dump, id="dump"), *long_session_history()[2:]]
    checked = count_checks(recaller)
    assert len(ask(recaller, history, "walrus replica")) == 6
    assert checked == ["dump"]
