"""The SQLite FTS5 index and incremental indexing: new ids only, durable, never twice."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.recall.index import query_terms
from ctxpolicy.recall.ingest import HistorySync, message_key, thread_key
from ctxpolicy.recall.sqlite import MAX_RANKED_POSTINGS, SQLiteRecallIndex


def history(n: int, prefix: str = "m") -> list:
    out = []
    for i in range(n):
        out.append(HumanMessage(f"question {i} about service svc{i}", id=f"{prefix}h{i}"))
        out.append(AIMessage(f"answer {i}: svc{i} runs on host h{i}.internal", id=f"{prefix}a{i}"))
    return out


def unit_rows(index: SQLiteRecallIndex) -> int:
    return index._conn.execute("SELECT count(*) FROM recall_unit").fetchone()[0]


def test_search_ranks_with_bm25_and_filters_by_thread() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    sync.sync("t1", history(20))
    sync.sync("t2", [HumanMessage("svc7 moved to host zeta", id="x")])
    hits = index.search("t1", query_terms("Which host runs svc7?"), limit=3)
    # svc7 is rare (2 units), "host" and "runs" are in every answer (low idf)
    assert {h.unit.message_id for h in hits[:2]} == {"mh7", "ma7"}
    hits = index.search("t1", query_terms("Where is h7.internal?"), limit=3)
    assert hits[0].unit.text == "answer 7: svc7 runs on host h7.internal"
    assert hits[0].score > hits[1].score
    assert all(h.score > 0 for h in hits)
    assert all(h.unit.message_id != "x" for h in hits)
    assert index.search("t2", ["svc7"], limit=5)[0].unit.message_id == "x"


def test_only_new_ids_are_indexed_and_a_repeat_adds_nothing() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    msgs = history(10)
    assert sync.sync("t", msgs).added == 20
    rows = unit_rows(index)
    assert sync.sync("t", msgs).added == 0
    assert sync.sync("t", [*msgs, HumanMessage("one more", id="new")]).added == 1
    assert unit_rows(index) == rows + 1
    # a fresh HistorySync (another engine on the same index) still adds nothing twice
    assert HistorySync(index).sync("t", msgs).added == 0
    assert unit_rows(index) == rows + 1


def test_a_restore_to_an_earlier_step_forgets_the_abandoned_branch() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    base = history(5)
    sync.sync("t", [*base, HumanMessage("branch one says kiwi", id="b1")])
    assert index.search("t", ["kiwi"], limit=5)
    assert sync.sync("t", [*base, HumanMessage("branch two says mango", id="b2")]).added == 1
    assert not index.search("t", ["kiwi"], limit=5)
    assert [h.unit.message_id for h in index.search("t", ["mango"], limit=5)] == ["b2"]
    assert "b1" not in {mid for _, mid, _ in index.indexed_messages("t")}
    # going back to the first branch indexes it again
    assert sync.sync("t", [*base, HumanMessage("branch one says kiwi", id="b1")]).added == 1


def test_file_index_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "recall.sqlite3"
    first = SQLiteRecallIndex(path)
    HistorySync(first).sync("t", history(30))
    first.close()
    again = SQLiteRecallIndex(path)
    assert [mid for _, mid, _ in again.indexed_messages("t")][:2] == ["mh0", "ma0"]
    assert HistorySync(again).sync("t", history(30)).added == 0
    assert again.search("t", ["svc29"], limit=1)[0].unit.message_id in {"mh29", "ma29"}


def test_concurrent_syncs_of_one_thread_index_each_message_once() -> None:
    index = SQLiteRecallIndex()
    msgs = history(200)
    syncs = [HistorySync(index) for _ in range(4)]
    added: list[int] = []
    threads = [
        threading.Thread(target=lambda s=s: added.append(s.sync("t", msgs).added)) for s in syncs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(added) == 400
    assert len(index.indexed_messages("t")) == 400


SCRIPT = """
import sys
from langchain_core.messages import HumanMessage
from ctxpolicy.recall.ingest import HistorySync
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
index = SQLiteRecallIndex(sys.argv[1])
msgs = [HumanMessage(f"shared message {i} token{i}", id=f"s{i}") for i in range(300)]
print(HistorySync(index).sync("t", msgs).added)
"""


def test_two_processes_on_one_file_index_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    SQLiteRecallIndex(path).close()  # create the schema once
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [int(p.communicate(timeout=120)[0].strip()) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(outs) == 300
    index = SQLiteRecallIndex(path)
    assert len(index.indexed_messages("t")) == 300
    assert unit_rows(index) == 300


def test_messages_without_ids_get_stable_keys_and_threads_from_the_first_message() -> None:
    msgs = [HumanMessage("hello"), AIMessage("hi")]
    assert message_key(msgs[0], 0) == message_key(HumanMessage("hello"), 0)
    assert message_key(msgs[0], 0) != message_key(HumanMessage("hello"), 1)
    assert thread_key(msgs) == thread_key([HumanMessage("hello"), AIMessage("other")])
    assert thread_key(msgs) != thread_key([HumanMessage("bye")])
    assert thread_key(msgs, "explicit") == "explicit"


def test_tool_results_are_labelled_with_the_tool_that_produced_them() -> None:
    index = SQLiteRecallIndex()
    msgs = [
        HumanMessage("check the logs", id="h"),
        AIMessage("", tool_calls=[{"name": "get_logs", "args": {}, "id": "c1"}], id="a"),
        ToolMessage(
            "line one\nline two\nline three\nthe culprit is pod-42", tool_call_id="c1", id="t"
        ),
    ]
    HistorySync(index).sync("t", msgs)
    (best,) = index.search("t", ["culprit"], limit=1)
    assert best.unit.tool == "get_logs"
    assert best.unit.label() == "#2 tool get_logs L4"


@pytest.mark.parametrize("term", ['"', 'a"b', "x OR y", "NEAR(a b)", "*", "-", "col:val", "ü"])
def test_hostile_terms_do_not_break_the_query(term: str) -> None:
    index = SQLiteRecallIndex()
    HistorySync(index).sync("t", history(3))
    index.search("t", [term, "svc1"], limit=5)


def test_common_terms_are_left_out_once_rare_ones_match_enough_rows() -> None:
    index = SQLiteRecallIndex()
    msgs = [
        HumanMessage(f"common filler text number {i}", id=f"c{i}")
        for i in range(MAX_RANKED_POSTINGS + 10)
    ]
    msgs.append(HumanMessage("common rare-word here", id="r"))
    HistorySync(index).sync("t", msgs)
    assert index.ranked_terms(["common", "rare"]) == ["rare"]
    assert index.ranked_terms(["common"]) == ["common"]
    assert index.search("t", ["common", "rare"], limit=1)[0].unit.message_id == "r"


def test_a_compaction_keeps_the_summarized_messages_searchable() -> None:
    # a summary replaced the oldest messages of the state: the history now starts at a
    # message the index knows; nothing is forgotten and positions stay session positions
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    msgs = [HumanMessage("the vault path is kv/x9", id="old"), *history(10)]
    assert sync.sync("t", msgs).added == 21
    compacted = [*msgs[15:], HumanMessage("and now?", id="new")]
    synced = sync.sync("t", compacted)
    assert (synced.added, synced.offset) == (1, 15)
    (hit,) = index.search("t", ["vault"], limit=3)
    assert hit.unit.message_id == "old"
    assert index.search("t", ["now"], limit=1)[0].unit.position == 21
