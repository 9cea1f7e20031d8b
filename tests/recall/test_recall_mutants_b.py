"""Exact behaviour of the recall backends' plumbing: SQLite index, incremental indexing,
the Recaller (open, fuse, memory, dense, repacking) and the dense store."""

from __future__ import annotations

import datetime
import sqlite3
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import ctxpolicy.recall.recaller as recaller_module
import ctxpolicy.recall.sqlite as sqlite_module
from ctxpolicy.errors import CollectorError
from ctxpolicy.policy import RecallCollectorSpec
from ctxpolicy.recall.dense import BATCH, DenseUnits, _normalize
from ctxpolicy.recall.index import RecallHit, RecallIndex
from ctxpolicy.recall.ingest import (
    HistorySync,
    Synced,
    message_fingerprint,
    message_key,
    thread_key,
)
from ctxpolicy.recall.recaller import (
    MEMORY_POSITION_BASE,
    RRF_K,
    Recaller,
    RecallRequest,
    RecallResult,
    fuse_rankings,
    open_index,
)
from ctxpolicy.recall.select import DEFAULT_HEADER, RecalledUnit
from ctxpolicy.recall.sqlite import SQLiteRecallIndex, _match_expression
from ctxpolicy.recall.units import Unit, UnitSize


def u(mid: str, position: int, text: str, *, context: str = "", tool: str | None = None) -> Unit:
    return Unit(mid, position, 0, "user", tool, 1, 1, text, context)


# --- sqlite.py --------------------------------------------------------------------------


def test_match_expression_quotes_terms() -> None:
    assert _match_expression(["a", 'b"c']) == '"a" OR "b""c"'
    assert _match_expression(["x"]) == '"x"'


def test_add_search_and_forget_exactly() -> None:
    index = SQLiteRecallIndex()
    assert repr(index) == "SQLiteRecallIndex(path=':memory:')"
    assert index.indexed_messages("t") == []
    added = index.add_messages(
        "t",
        [
            (1, "b", [u("b", 1, "alpha beta")]),
            (0, "a", [u("a", 0, "alpha port is 6432"), u("a", 0, "gamma")]),
        ],
    )
    assert added == 2
    assert index.add_messages("t", [(0, "a", [u("a", 0, "again")])]) == 0
    assert index.add_messages("t", []) == 0
    assert index.add_messages("other", [(5, "a", [u("a", 5, "alpha in other")])]) == 1
    assert index.indexed_messages("t") == [(0, "a", None), (1, "b", None)]
    hits = index.search("t", ["alpha"], limit=5)
    assert [(h.unit.message_id, h.unit.statement, h.source) for h in hits] == [
        ("a", True, "session"),
        ("b", False, "session"),
    ]
    assert hits[0].unit == Unit("a", 0, 0, "user", None, 1, 1, "alpha port is 6432", "", True)
    assert [h.unit.message_id for h in index.search("t", ["alpha"], limit=1)] == ["a"]
    assert index.search("t", ["alpha"], limit=0) == []
    assert index.search("t", [], limit=5) == []
    assert index.search("t", ["nothing"], limit=5) == []
    assert index.search("t", ["nothing", "nomatch"], limit=5) == []
    assert [h.unit.message_id for h in index.search("t", ["alpha", "alpha"], limit=5)] == [
        "a",
        "b",
    ]
    assert index.forget_messages("t", ["a", "zz"]) == 1
    assert index.forget_messages("t", []) == 0
    assert index.indexed_messages("t") == [(1, "b", None)]
    assert [h.unit.message_id for h in index.search("t", ["alpha"], limit=5)] == ["b"]
    assert index.search("t", ["gamma"], limit=5) == []
    count = index._conn.execute("SELECT count(*) FROM recall_unit WHERE thread = 't'").fetchone()
    assert count == (1,)
    # the other thread keeps its message of the same id
    assert [h.unit.position for h in index.search("other", ["alpha"], limit=5)] == [5]
    # a forgotten message can be indexed again
    assert index.add_messages("t", [(0, "a", [u("a", 0, "delta")])]) == 1
    assert [h.unit.text for h in index.search("t", ["delta"], limit=5)] == ["delta"]


def test_scores_are_weighted_bm25_negated_and_statements_boosted() -> None:
    index = SQLiteRecallIndex()
    rows = [(i, f"f{i}", [u(f"f{i}", i, f"filler words number {i}")]) for i in range(20)]
    rows.append((30, "s", [u("s", 30, "zeta port is 6432", context="zeta", tool="zeta")]))
    rows.append((31, "p", [u("p", 31, "zeta port unchanged", context="zeta", tool="zeta")]))
    index.add_messages("t", rows)
    raw = dict(
        index._conn.execute(
            "SELECT u.message_id, bm25(recall_fts, 1.0, 0.3, 0.5) FROM recall_fts "
            "JOIN recall_unit AS u ON u.id = recall_fts.rowid WHERE recall_fts MATCH 'zeta'"
        ).fetchall()
    )
    hits = {h.unit.message_id: h.score for h in index.search("t", ["zeta"], limit=5)}
    assert hits["s"] == pytest.approx(-raw["s"] * 1.5, rel=1e-9)
    assert hits["p"] == pytest.approx(-raw["p"], rel=1e-9)
    assert hits["p"] > 0
    # the tool name and the context are searchable columns
    index.add_messages(
        "t", [(40, "x", [u("x", 40, "nothing", context="ctxword", tool="toolname")])]
    )
    assert [h.unit.message_id for h in index.search("t", ["toolname"], limit=5)] == ["x"]
    assert [h.unit.message_id for h in index.search("t", ["ctxword"], limit=5)] == ["x"]


def test_file_index_uses_wal_and_memory_does_not(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    index = SQLiteRecallIndex(path)
    assert repr(index) == f"SQLiteRecallIndex(path={str(path)!r})"
    assert index._conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert index._conn.execute("PRAGMA synchronous").fetchone() == (1,)
    assert index._conn.execute("PRAGMA busy_timeout").fetchone() == (10000,)
    index.add_messages("t", [(0, "a", [u("a", 0, "kept")])])
    index.close()
    with pytest.raises(sqlite3.ProgrammingError):
        index.indexed_messages("t")
    again = SQLiteRecallIndex(path)
    assert again.indexed_messages("t") == [(0, "a", None)]
    assert again._units == 1
    memory = SQLiteRecallIndex()
    assert memory._conn.execute("PRAGMA busy_timeout").fetchone() == (5000,)


def test_a_failed_add_is_rolled_back() -> None:
    index = SQLiteRecallIndex()
    bad = Unit("a", 0, 0, "user", None, 1, 1, None, "")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        index.add_messages("t", [(0, "a", [u("a", 0, "fine")]), (1, "b", [bad])])
    assert index.indexed_messages("t") == []
    assert index.add_messages("t", [(0, "a", [u("a", 0, "fine")])]) == 1


def test_forget_removes_every_indexed_column_of_a_unit() -> None:
    index = SQLiteRecallIndex()
    index.add_messages("t", [(0, "a", [u("a", 0, "hello", context="ctxword", tool="toolx")])])
    assert index.forget_messages("t", ["a"]) == 1
    # no posting of the text, the context or the tool name is left behind
    assert index.ranked_terms(["hello"]) == []
    assert index.ranked_terms(["ctxword"]) == []
    assert index.ranked_terms(["toolx"]) == []


def test_a_failed_forget_is_rolled_back() -> None:
    index = SQLiteRecallIndex()
    index.add_messages("t", [(0, "a", [u("a", 0, "hello")])])
    with pytest.raises(sqlite3.ProgrammingError):
        index.forget_messages("t", ["a", object()])  # type: ignore[list-item]
    assert index.indexed_messages("t") == [(0, "a", None)]
    assert [h.unit.message_id for h in index.search("t", ["hello"], limit=5)] == ["a"]
    assert index.forget_messages("t", ["a"]) == 1


def test_posting_counts_are_cached_while_the_index_grows_less_than_ten_percent(
    monkeypatch,
) -> None:
    monkeypatch.setattr(sqlite_module, "MAX_RANKED_POSTINGS", 1)
    index = SQLiteRecallIndex()
    seed = [(0, "a", [u("a", 0, "alpha")]), (1, "b", [u("b", 1, "beta")])]
    seed += [(i, f"f{i}", [u(f"f{i}", i, "filler")]) for i in range(2, 10)]
    index.add_messages("t", seed)  # 10 units
    assert index.ranked_terms(["alpha", "beta"]) == ["alpha"]  # both 1: the first wins
    more = [(i, f"x{i}", [u(f"x{i}", i, "alpha")]) for i in range(10, 111)]
    index.add_messages("t", more)  # 111 units: 10 * 1.1 + 100, the cached counts still hold
    assert index.ranked_terms(["alpha", "beta"]) == ["alpha"]
    index.forget_messages("t", ["x10"])
    index.add_messages("t", [(200, "y", [u("y", 200, "filler")])])  # 111 again
    assert index.ranked_terms(["alpha", "beta"]) == ["alpha"]
    index.add_messages("t", [(201, "z", [u("z", 201, "filler")])])  # 112: counted again
    assert index.ranked_terms(["alpha", "beta"]) == ["beta"]
    assert index.ranked_terms(["nothing"]) == []


def test_search_ranks_only_rows_of_the_rarer_terms(monkeypatch) -> None:
    monkeypatch.setattr(sqlite_module, "MAX_RANKED_POSTINGS", 2)
    index = SQLiteRecallIndex()
    index.add_messages(
        "t",
        [
            (0, "c0", [u("c0", 0, "common")]),
            (1, "c1", [u("c1", 1, "common")]),
            (2, "c2", [u("c2", 2, "common")]),
            (3, "r", [u("r", 3, "rare common")]),
        ],
    )
    assert index.ranked_terms(["common", "rare"]) == ["rare"]
    assert [h.unit.message_id for h in index.search("t", ["common", "rare"], limit=9)] == ["r"]
    assert len(index.search("t", ["common"], limit=9)) == 4


# --- ingest.py --------------------------------------------------------------------------


def test_message_keys_are_stable_digests() -> None:
    assert message_key(HumanMessage("hello", id="given")) == "given"
    assert message_key(HumanMessage("hello")) == "~a96c33e4e47e04829f885356"
    assert message_key(HumanMessage("hello"), 3) == "~3:a96c33e4e47e04829f885356"
    assert message_key(HumanMessage("hello"), 0) == "~0:a96c33e4e47e04829f885356"
    assert message_key(ToolMessage("out", tool_call_id="c1")) == "~ba0037938ad855728d1de4ef"
    call = AIMessage(
        "",
        tool_calls=[{"name": "f", "args": {"z": "é", "a": datetime.date(2024, 1, 2)}, "id": "c1"}],
    )
    assert message_key(call) == "~a5e72158c78f4d7c96e239bf"


def test_thread_keys() -> None:
    assert thread_key([HumanMessage("x", id="abc")]) == "~first:abc"
    assert thread_key([HumanMessage("hello")]) == "~first:~0:a96c33e4e47e04829f885356"
    assert thread_key([]) == "~empty"
    assert thread_key([], "") == "~empty"
    assert thread_key([HumanMessage("x", id="abc")], "given") == "given"


class Recording(SQLiteRecallIndex):
    def __init__(self) -> None:
        super().__init__()
        self.forgotten: list[list[str]] = []

    def forget_messages(self, thread, message_ids):
        self.forgotten.append(list(message_ids))
        return super().forget_messages(thread, message_ids)


def hm(i: int, text: str | None = None) -> HumanMessage:
    return HumanMessage(text or f"message number {i}", id=f"m{i}")


def test_sync_reports_added_and_offset_and_forgets_only_the_abandoned() -> None:
    index = Recording()
    sync = HistorySync(index)
    assert sync.size == UnitSize()
    a, b, c = hm(0), hm(1), hm(2)
    assert sync.sync("t", [a, b, c]) == Synced(3, 0)
    assert sync.sync("t", [a, b, c]) == Synced(0, 0)
    assert sync.sync("t", []) == Synced(0, 0)
    assert index.forgotten == []
    # c moved up (b dropped): only b is forgotten; c is known and not indexed again
    assert sync.sync("t", [a, c]) == Synced(0, 0)
    assert index.forgotten == [["m1"]]
    assert sync.sync("t", [a, c, hm(3)]) == Synced(1, 0)
    # a compacted history: starts at a known message
    assert sync.sync("t", [c, hm(3), hm(4)]) == Synced(1, 1)
    assert [mid for _, mid, _ in index.indexed_messages("t")] == ["m0", "m2", "m3", "m4"]


def test_a_history_starting_with_an_unknown_message_is_read_from_position_zero() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    sync.sync("t", [hm(0), hm(1)])
    assert sync.sync("t", [hm(9)]) == Synced(1, 0)
    assert index.indexed_messages("t") == [(0, "m9", message_fingerprint(hm(9)))]


def test_forget_reloads_the_log_from_the_index() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    history = [hm(0), hm(1)]
    sync.sync("t", history)
    index.forget_messages("t", ["m1"])  # another process abandoned m1
    assert sync.sync("t", history).added == 0  # the cached log still holds it
    sync.forget("t")
    assert sync.sync("t", history).added == 1
    sync.forget("never-seen")  # a thread never synced is fine
    assert sync.sync("t", history).added == 0


def test_sync_uses_its_unit_size() -> None:
    index = SQLiteRecallIndex()
    HistorySync(index, size=UnitSize(min_chars=1, turn_chars=0)).sync(
        "t", [hm(0, "Aa one. Bb two.")]
    )
    assert [h.unit.text for h in index.search("t", ["bb"], limit=5)] == ["Bb two."]
    other = SQLiteRecallIndex()
    HistorySync(other).sync("t", [hm(0, "Aa one. Bb two.")])
    assert [h.unit.text for h in other.search("t", ["bb"], limit=5)] == ["Aa one. Bb two."]


def tool_of_result(gap: int) -> str | None:
    """Index an AI tool call, ``gap - 1`` messages, then its result in a later sync."""
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    history: list = [AIMessage("", tool_calls=[{"name": "probe", "args": {}, "id": "c1"}], id="a")]
    history += [hm(i) for i in range(1, gap)]
    sync.sync("t", history)
    history.append(ToolMessage("result qwerty", tool_call_id="c1", id="r"))
    sync.sync("t", history)
    (hit,) = index.search("t", ["qwerty"], limit=5)
    return hit.unit.tool


def test_tool_names_come_from_the_call_however_far_before_a_sync() -> None:
    assert tool_of_result(1) == "probe"
    assert tool_of_result(9) == "probe"
    assert tool_of_result(40) == "probe"


def test_tool_calls_without_id_name_nothing() -> None:
    index = SQLiteRecallIndex()
    call = AIMessage("", tool_calls=[{"name": "probe", "args": {}, "id": ""}], id="a")
    HistorySync(index).sync("t", [call, ToolMessage("result qwerty", tool_call_id="", id="r")])
    (hit,) = index.search("t", ["qwerty"], limit=5)
    assert hit.unit.tool is None


# --- recaller.py ------------------------------------------------------------------------


def spec(**kw) -> RecallCollectorSpec:
    return RecallCollectorSpec(type="recall", **kw)


def test_open_index_backends(monkeypatch, tmp_path: Path) -> None:
    mine = SQLiteRecallIndex()
    assert open_index(spec(index="idx"), {"idx": mine}) is mine
    with pytest.raises(CollectorError) as info:
        open_index(spec(index="idx"), {"idx": 5})
    assert str(info.value) == (
        "collector of layer 'recall' failed: service 'idx' must be a RecallIndex, got int"
    )
    with pytest.raises(CollectorError) as info:
        open_index(spec(index="idx"), {})
    assert str(info.value).endswith("must be a RecallIndex, got NoneType")
    memory = open_index(spec(), {})
    assert isinstance(memory, SQLiteRecallIndex) and memory.path == ":memory:"
    monkeypatch.delenv("MY_PATH", raising=False)
    file = tmp_path / "p.sqlite3"
    opened = open_index(spec(backend="sqlite", path=str(file), path_env="MY_PATH"), {})
    assert isinstance(opened, SQLiteRecallIndex) and opened.path == str(file)
    env_file = tmp_path / "e.sqlite3"
    monkeypatch.setenv("MY_PATH", str(env_file))
    opened = open_index(spec(backend="sqlite", path=str(file), path_env="MY_PATH"), {})
    assert isinstance(opened, SQLiteRecallIndex) and opened.path == str(env_file)
    monkeypatch.setenv("MY_PATH", "")
    with pytest.raises(CollectorError) as info:
        open_index(spec(backend="sqlite", path_env="MY_PATH"), {})
    assert str(info.value) == (
        "collector of layer 'recall' failed: backend sqlite needs 'path' or the variable MY_PATH"
    )
    monkeypatch.delenv("MY_DSN", raising=False)
    with pytest.raises(CollectorError) as info:
        open_index(spec(backend="postgres", dsn_env="MY_DSN"), {})
    assert str(info.value) == (
        "collector of layer 'recall' failed: backend postgres needs a connection string in MY_DSN"
    )
    monkeypatch.setattr(recaller_module, "PostgresRecallIndex", lambda dsn: ("pg", dsn))
    monkeypatch.setenv("MY_DSN", "postgresql://x")
    assert open_index(spec(backend="postgres", dsn_env="MY_DSN"), {}) == ("pg", "postgresql://x")


def test_recaller_opens_its_index_from_services() -> None:
    mine = SQLiteRecallIndex()
    assert Recaller(spec(index="idx"), services={"idx": mine}).index is mine
    assert isinstance(Recaller(spec()).index, SQLiteRecallIndex)


def rh(mid: str, position: int = 0, source: str = "session") -> RecallHit:
    return RecallHit(Unit(mid, position, 0, "user", None, 1, 1, mid), 0.0, source)


def test_fuse_rankings_exact_scores() -> None:
    assert RRF_K == 60
    fused = fuse_rankings([(1.0, [rh("a"), rh("b")]), (2.0, [rh("b", source="x"), rh("c")])])
    scores = {h.unit.message_id: h.score for h in fused}
    assert scores == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 2 / 61, "c": 2 / 62})
    assert [h.unit.message_id for h in fused] == ["b", "c", "a"]
    assert [h.source for h in fused] == ["session", "session", "session"]
    assert fuse_rankings([(1.0, [rh("a")])], k=0)[0].score == 1.0
    assert [h.unit.message_id for h in fuse_rankings([(1.0, [rh("a")]), (0.0, [rh("z")])])] == ["a"]
    after_zero = fuse_rankings([(0.0, [rh("z")]), (1.0, [rh("a")])])
    assert [h.unit.message_id for h in after_zero] == ["a"]
    tie = fuse_rankings([(1.0, [rh("a")]), (1.0, [rh("b")])])
    assert [h.unit.message_id for h in tie] == ["a", "b"]
    memory = fuse_rankings([(1.0, [rh("m", source="memory")])])
    assert memory[0].source == "memory"


def count_lines(text: str) -> int:
    return max(1, text.count("\n"))


def request(history, query, **kw) -> RecallRequest:
    fields = {
        "layer": "recall__context",
        "query": query,
        "history": history,
        "kept_from": len(history),
        "prompt_text": "",
        "cap_tokens": 100,
        "count_tokens": count_lines,
        "thread_id": "t",
        "services": {},
    }
    fields.update(kw)
    return RecallRequest(**fields)


def test_record_derives_the_thread_from_the_history() -> None:
    recaller = Recaller(spec())
    history = [hm(0), hm(1)]
    assert recaller.record(history) == 2
    assert len(recaller.index.indexed_messages(thread_key(history))) == 2
    assert recaller.record(history, thread_id="x") == 2
    assert recaller.record(history, thread_id="x") == 0


def test_recall_result_fields_and_header() -> None:
    recaller = Recaller(spec(header="HEAD"))
    history = [hm(0, "the vault path is kv-x9"), hm(1, "unrelated words here")]
    result = recaller.recall(request(history, "vault path?", kept_from=1))
    assert result == RecallResult(
        "HEAD\n[#0 user] the vault path is kv-x9",
        (RecalledUnit("#0 user", "session", result.units[0].score, 1, "m0", result.units[0].text),),
        2,
        "t",
    )
    assert result.units[0].score > 0
    # no search terms: nothing, but the history is still indexed
    empty = Recaller(spec()).recall(request(history, "what is it?"))
    assert empty == RecallResult(None, (), 2, "t")
    none = Recaller(spec()).recall(request(history, None))
    assert none == RecallResult(None, (), 2, "t")
    default = Recaller(spec()).recall(request(history, "vault", kept_from=1, thread_id=None))
    assert default.text == f"{DEFAULT_HEADER}\n[#0 user] the vault path is kv-x9"
    assert default.thread == "~first:m0"


def test_recall_skips_kept_and_foreign_messages() -> None:
    recaller = Recaller(spec(header=""))
    history = [hm(0, "alpha one"), hm(1, "alpha two"), hm(2, "alpha three")]
    result = recaller.recall(request(history, "alpha", kept_from=2))
    assert [u.message_id for u in result.units] == ["m0", "m1"]
    # after a compaction (the history starts at m1, session position 1)
    result = recaller.recall(request(history[1:], "alpha", kept_from=1))
    assert "m1" in [u.message_id for u in result.units]
    assert "m2" not in [u.message_id for u in result.units]
    assert "#1 user" in [u.label for u in result.units]
    # another branch: m2 replaced, so the old m2 is gone and only the history counts
    branch = [hm(0, "alpha one"), hm(1, "alpha two"), HumanMessage("alpha new", id="n2")]
    result = recaller.recall(request(branch, "alpha", kept_from=3))
    assert [u.message_id for u in result.units] == ["m0", "m1", "n2"]


def test_recall_only_shows_units_of_messages_in_this_history() -> None:
    index = SQLiteRecallIndex()
    # the index holds a message at position 1 that this history does not have
    index.add_messages("t", [(1, "ghost", [u("ghost", 1, "alpha ghost")])])
    index.add_messages("t", [(5, "far", [u("far", 5, "alpha far")])])
    recaller = Recaller(spec(header=""), index=index)
    history = [hm(0, "alpha zero"), HumanMessage("alpha one", id="m1")]
    result = recaller.recall(request(history, "alpha", kept_from=2))
    assert sorted(u.message_id for u in result.units) == ["m0", "m1"]


class Item:
    def __init__(self, content, tier=None, item_id=None, part=None, seq=None) -> None:
        self.content = content
        if tier is not None:
            self.tier = tier
        if item_id is not None:
            self.id = item_id
        if part is not None:
            self.part = part
        if seq is not None:
            self.seq = seq


class Memory:
    def __init__(self, items) -> None:
        self.items = items
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, limit: int):
        self.calls.append((query, limit))
        return self.items


def test_memory_hits_are_labelled_scored_and_in_memory_order() -> None:
    memory = Memory(
        [
            Item("newer fact about alpha", "l4", "n", seq=5),
            Item("older fact about alpha", "", "o", part=2, seq=2),
            "plain alpha string",
            Item("odd alpha item", "l2", "q", part="x", seq="y"),
        ]
    )
    recaller = Recaller(spec(memory="ltm", memory_limit=3, header=""))
    history = [hm(0, "nothing relevant")]
    result = recaller.recall(request(history, "alpha", services={"ltm": memory}))
    assert memory.calls == [("alpha", 3)]
    got = [(x.label, x.source, x.message_id, x.text, x.score) for x in result.units]
    assert got == [
        ("memory", "memory", "memory:2", "plain alpha string", pytest.approx(1 / 3)),
        ("l2", "memory", "memory:q", "odd alpha item", 0.25),
        ("memory", "memory", "memory:o", "older fact about alpha", 0.5),
        ("l4", "memory", "memory:n", "newer fact about alpha", 1.0),
    ]
    assert result.text == (
        "[memory memory] plain alpha string\n[memory l2] odd alpha item\n"
        "[memory memory] older fact about alpha\n[memory l4] newer fact about alpha"
    )
    assert MEMORY_POSITION_BASE == 1 << 62
    hits = recaller._memory_hits({"ltm": memory}, "alpha")
    assert [(h.unit.position, h.unit.part) for h in hits] == [
        (5 - (1 << 62), 0),
        (2 - (1 << 62), 2),
        (-(1 << 62), 0),
        (-(1 << 62), 0),
    ]
    assert [(h.unit.start_line, h.unit.end_line, h.unit.tool) for h in hits] == [(0, 0, None)] * 4


def test_a_memory_service_without_search_fails_clearly() -> None:
    recaller = Recaller(spec(memory="ltm"))
    with pytest.raises(CollectorError) as info:
        recaller.recall(request([hm(0)], "alpha", services={"ltm": object()}))
    assert str(info.value) == (
        "collector of layer 'recall' failed: memory service 'ltm' has no search(query, limit)"
    )


class Embed:
    """One dimension per known word."""

    WORDS = ("alpha", "beta", "gamma", "delta")

    def __init__(self) -> None:
        self.documents: list[int] = []

    def _vector(self, text: str) -> list[float]:
        return [float(text.lower().count(w)) for w in self.WORDS]

    def embed_documents(self, texts):
        self.documents.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text):
        return self._vector(text)


def test_dense_ranking_is_fused_with_weights() -> None:
    history = [hm(0, "alpha beta"), hm(1, "gamma gamma"), hm(2, "beta")]
    embed = Embed()
    recaller = Recaller(spec(embeddings="emb", header="", weights={"bm25": 1.0, "dense": 2.0}))
    result = recaller.recall(request(history, "beta gamma", services={"emb": embed}))
    scores = {x.message_id: x.score for x in result.units}
    # bm25 ranks the units holding a query word; dense ranks every unit by cosine
    assert set(scores) == {"m0", "m1", "m2"}
    assert all(0 < s <= 3 / 61 for s in scores.values())
    assert embed.documents == [3]
    recaller.recall(request(history, "beta gamma", services={"emb": embed}))
    assert embed.documents == [3]  # the thread's vectors are kept
    only_bm25 = Recaller(spec(embeddings="emb", header="", weights={"bm25": 1.0, "dense": 0.0}))
    result = only_bm25.recall(request(history, "beta gamma", services={"emb": Embed()}))
    assert {x.message_id for x in result.units} == {"m0", "m1", "m2"}
    assert sorted(x.score for x in result.units) == pytest.approx([1 / 63, 1 / 62, 1 / 61])


def test_an_embeddings_service_must_embed_queries() -> None:
    recaller = Recaller(spec(embeddings="emb"))
    for services in ({}, {"emb": object()}):
        with pytest.raises(CollectorError) as info:
            recaller.recall(request([hm(0, "alpha")], "alpha", services=services))
        assert str(info.value) == (
            "collector of layer 'recall' failed: embeddings service 'emb' must be a "
            "langchain-core Embeddings"
        )


def test_candidates_limit_the_search() -> None:
    history = [hm(i, f"alpha number {i}") for i in range(6)]
    recaller = Recaller(spec(candidates=2, header=""))
    result = recaller.recall(request(history, "alpha"))
    assert len(result.units) == 2


def test_a_repeat_reuses_the_search_once() -> None:
    history = [hm(0, "alpha one"), hm(1, "alpha two")]
    index = SQLiteRecallIndex()
    searches: list[object] = []
    original = index.search

    def search(*args, **kwargs):
        searches.append(args)
        return original(*args, **kwargs)

    index.search = search  # type: ignore[method-assign]
    recaller = Recaller(spec(header=""), index=index)
    first = recaller.recall(request(history, "alpha", kept_from=2))
    assert len(searches) == 1 and first.indexed == 2
    again = recaller.recall(request(history, "alpha", kept_from=2, repeat=True, cap_tokens=8))
    assert len(searches) == 1
    assert again.indexed == 0
    assert [x.message_id for x in again.units] == ["m0"]
    third = recaller.recall(request(history, "alpha", kept_from=2, repeat=True))
    assert len(searches) == 2 and third.indexed == 0
    # a repeat of another query searches
    recaller.recall(request(history, "one", kept_from=2))
    recaller.recall(request(history, "two", kept_from=2, repeat=True))
    assert len(searches) == 4
    # not a repeat: searches even for the same key
    recaller.recall(request(history, "two", kept_from=2))
    assert len(searches) == 5


def test_repacks_with_a_smaller_cap_when_the_joined_text_is_over() -> None:
    def counter(extra: int):
        # the joined text (2+ lines) costs ``extra`` more than its lines one by one
        def count(text: str) -> int:
            return max(1, text.count("\n")) + (extra if text.count("\n") >= 2 else 0)

        return count

    history = [hm(i, f"alpha {i}") for i in range(12)]
    recaller = Recaller(spec(header="H"))

    def packed(cap: int, extra: int) -> tuple[int, int | None]:
        count = counter(extra)
        result = recaller.recall(request(history, "alpha", cap_tokens=cap, count_tokens=count))
        return len(result.units), count(result.text) if result.text else None

    # 12 lines + header: 12 newlines + 10 = 22: fits a cap of 22 exactly
    assert packed(22, 10) == (12, 22)
    # cap 19: 11 lines cost 21, over by 2: the cap shrinks by 8 to 11 -> 3 lines
    assert packed(19, 10) == (3, 13)
    assert packed(18, 10) == (2, 12)
    # over by 2 twice (cap 30 -> 22 -> 14), then 6 lines fit
    assert packed(30, 20) == (6, 26)
    # over by 10: the cap shrinks by 10 (22 -> 12 -> 4), then nothing fits
    assert packed(22, 20) == (0, None)
    assert packed(32, 20) == (12, 32)


def test_close_closes_the_index() -> None:
    recaller = Recaller(spec())
    recaller.close()
    with pytest.raises(sqlite3.ProgrammingError):
        recaller.index.indexed_messages("t")
    assert isinstance(recaller.index, RecallIndex)


# --- dense.py ---------------------------------------------------------------------------


def test_normalize() -> None:
    assert _normalize([3.0, 4.0]) == [0.6, 0.8]
    assert _normalize([0.0, 0.0]) == [0.0, 0.0]


@pytest.mark.parametrize("numpy", [True, False])
def test_dense_search_exact_order_and_scores(monkeypatch, numpy: bool) -> None:
    if not numpy:
        monkeypatch.setitem(sys.modules, "numpy", None)
    store = DenseUnits(Embed())
    assert store.size == UnitSize()
    assert store.search("alpha", limit=3) == []
    history = [hm(0, "alpha"), hm(1, "alpha beta"), hm(2, "gamma"), hm(3, "zzz")]
    assert store.sync(history) == 4
    assert store.sync(history) == 0
    hits = store.search("alpha", limit=2)
    assert [h.unit.message_id for h in hits] == ["m0", "m1"]
    assert [round(h.score, 4) for h in hits] == [1.0, 0.7071]
    assert [h.source for h in hits] == ["session", "session"]
    hits = store.search("alpha", limit=4)
    assert [h.unit.message_id for h in hits] == ["m0", "m1", "m2", "m3"]
    assert [round(h.score, 4) for h in hits] == [1.0, 0.7071, 0.0, 0.0]
    assert store.search("alpha", limit=9) == hits
    assert store.search("   ", limit=3) == []
    assert store.search("alpha", limit=0) == []
    # units of a message, not messages, are counted
    assert store.sync([*history, hm(4, "one\ntwo\nthree")]) == 3


def test_dense_sync_walks_back_to_the_newest_embedded_message() -> None:
    store = DenseUnits(Embed(), size=UnitSize(min_chars=1, turn_chars=0))
    assert store.sync([hm(0, "Aa. Bb.")]) == 2
    assert store.sync([hm(0, "Aa. Bb."), hm(1, "alpha"), hm(2, "beta")]) == 2
    # a message seen before the newest embedded one is not embedded again
    assert store.sync([hm(1, "alpha"), hm(0, "Aa. Bb."), hm(5, "gamma")]) == 1
    assert [x.message_id for x in store.units] == ["m0", "m0", "m1", "m2", "m5"]


def test_dense_embeds_in_batches_and_grows_its_matrix() -> None:
    embed = Embed()
    store = DenseUnits(embed)
    assert BATCH == 256
    history = [hm(i, f"beta {i}") for i in range(1000)]
    history[3] = hm(3, "alpha")
    assert store.sync(history) == 1000
    assert embed.documents == [256, 256, 256, 232]
    more = [*history, *(hm(i, f"beta {i}") for i in range(1000, 1100))]
    assert store.sync(more) == 100
    hits = store.search("alpha", limit=1)
    assert [h.unit.message_id for h in hits] == ["m3"]
    assert len(store.search("beta", limit=2000)) == 1100


def test_dense_ties_keep_session_order() -> None:
    pattern = [1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1] * 3
    history = [hm(i, "alpha" if bit else "beta") for i, bit in enumerate(pattern)]
    store = DenseUnits(Embed())
    store.sync(history)
    hits = store.search("alpha", limit=len(history))
    expected = [f"m{i}" for i, bit in enumerate(pattern) if bit]
    expected += [f"m{i}" for i, bit in enumerate(pattern) if not bit]
    assert [h.unit.message_id for h in hits] == expected


class WideEmbed(Embed):
    """Vectors wider than the store's first capacity (1024 rows)."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 1100
        vector[0 if "alpha" in text else 1] = 1.0
        return vector


def test_dense_grows_past_its_first_capacity_with_wide_vectors() -> None:
    store = DenseUnits(WideEmbed())
    history = [hm(0, "alpha")]
    assert store.sync(history) == 1  # room for 1024 rows
    history += [hm(i, "beta") for i in range(1, 1025)]
    assert store.sync(history) == 1024  # 1025 rows: the matrix grows
    assert [h.unit.message_id for h in store.search("alpha", limit=1)] == ["m0"]


class ShortQuery(Embed):
    def embed_query(self, text):
        return self._vector(text)[:2]


def test_plain_python_scores_a_shorter_query_vector(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    store = DenseUnits(ShortQuery())
    store.sync([hm(0, "gamma"), hm(1, "beta")])
    assert [h.unit.message_id for h in store.search("beta", limit=1)] == ["m1"]


def test_dense_sync_embeds_only_after_the_newest_embedded_message() -> None:
    a, b, c, d = hm(0, "alpha"), hm(1, "beta"), hm(2, "gamma"), hm(3, "delta")
    store = DenseUnits(Embed())
    assert store.sync([a, c]) == 2
    # b sits before c (already embedded): only d is new
    assert store.sync([a, b, c, d]) == 1
    assert [x.message_id for x in store.units] == ["m0", "m2", "m3"]
    store = DenseUnits(Embed())
    assert store.sync([a]) == 1
    assert store.sync([hm(7, "new"), a]) == 0
    # the same id twice in one history is embedded once, and what follows still is
    store = DenseUnits(Embed())
    assert store.sync([a, b, a, d]) == 3
    assert [x.message_id for x in store.units] == ["m0", "m1", "m3"]


def test_dense_keys_of_id_less_messages_carry_their_position() -> None:
    store = DenseUnits(Embed())
    assert store.sync([HumanMessage("same text"), HumanMessage("same text")]) == 2
    store = DenseUnits(Embed())
    first, second = HumanMessage("alpha one"), HumanMessage("beta two")
    assert store.sync([first, second]) == 2
    assert store.sync([HumanMessage("gamma new"), second, HumanMessage("delta")]) == 1


def test_numpy_scores_come_from_float32_rows() -> None:
    np = pytest.importorskip("numpy")
    store = DenseUnits(Embed())
    store.sync([hm(0, "alpha beta"), hm(1, "alpha gamma delta"), hm(2, "beta")])
    hits = store.search("alpha beta delta", limit=3)
    assert [h.unit.message_id for h in hits] == ["m0", "m1", "m2"]
    # "unit-length float32 rows": every score is a float32 value
    assert all(float(np.float32(h.score)) == h.score for h in hits)


def test_the_dense_store_splits_units_like_the_index() -> None:
    recaller = Recaller(
        spec(
            embeddings="emb",
            min_unit_chars=1,
            turn_chars=0,
            header="",
            weights={"bm25": 0.0, "dense": 1.0},
        )
    )
    history = [hm(0, "Aa alpha. Bb beta.")]
    result = recaller.recall(request(history, "beta", services={"emb": Embed()}))
    assert [x.text for x in result.units] == ["Aa alpha.", "Bb beta."]


def test_no_query_recalls_nothing_even_with_odd_words_in_history() -> None:
    history = [hm(0, "xxxx marker line"), hm(1, "other")]
    result = Recaller(spec()).recall(request(history, None, kept_from=1))
    assert result == RecallResult(None, (), 2, "t")


def test_each_thread_has_its_own_dense_store() -> None:
    recaller = Recaller(spec(embeddings="emb", header="", weights={"bm25": 0.0, "dense": 1.0}))
    embed = Embed()
    one = recaller.recall(
        request([hm(0, "alpha one")], "alpha", thread_id="t1", services={"emb": embed})
    )
    assert [x.text for x in one.units] == ["alpha one"]
    two = recaller.recall(
        request([hm(0, "beta two")], "beta", thread_id="t2", services={"emb": embed})
    )
    assert [x.text for x in two.units] == ["beta two"]


def test_a_known_message_after_the_restore_point_is_kept_and_later_ones_are_added() -> None:
    index = Recording()
    sync = HistorySync(index)
    a, b, c, d = hm(0), hm(1), hm(2), hm(3)
    assert sync.sync("t", [a, b, c]) == Synced(3, 0)
    assert sync.sync("t", [a, c, d]) == Synced(1, 0)
    assert index.forgotten == [["m1"]]
    assert [mid for _, mid, _ in index.indexed_messages("t")] == ["m0", "m2", "m3"]


def test_id_less_messages_with_the_same_text_are_read_from_position_zero() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    same = [HumanMessage("same words"), HumanMessage("same words")]
    assert sync.sync("t", same) == Synced(2, 0)
    assert sync.sync("t", [*same, HumanMessage("third")]) == Synced(1, 0)
    assert [p for p, _, _ in index.indexed_messages("t")] == [0, 1, 2]


def test_a_first_repeat_searches_and_a_query_of_none_reuses_nothing() -> None:
    history = [hm(0, "xxxx alpha"), hm(1, "other")]
    recaller = Recaller(spec(header=""))
    first = recaller.recall(request(history, "alpha", kept_from=1, repeat=True))
    assert [x.message_id for x in first.units] == ["m0"]
    recaller.recall(request(history, "XXXX", kept_from=1))
    none = recaller.recall(request(history, None, kept_from=1, repeat=True))
    assert none == RecallResult(None, (), 0, "t")


def test_a_hit_just_past_the_history_is_not_in_it() -> None:
    index = SQLiteRecallIndex()
    history = [hm(0, "alpha zero"), hm(1, "beta")]
    index.add_messages(
        "t",
        [
            (0, "m0", [u("m0", 0, "alpha zero")]),
            (1, "m1", [u("m1", 1, "beta")]),
            (2, "far", [u("far", 2, "alpha far")]),  # a longer branch
        ],
    )
    recaller = Recaller(spec(header=""), index=index)
    result = recaller.recall(request(history, "alpha", kept_from=10))
    assert [x.message_id for x in result.units] == ["m0"]


def test_messages_without_ids_are_recalled() -> None:
    history = [HumanMessage("alpha without id"), HumanMessage("later")]
    result = Recaller(spec(header="")).recall(request(history, "alpha", kept_from=1))
    assert [x.text for x in result.units] == ["alpha without id"]
    assert result.units[0].message_id == message_key(history[0], 0)


def test_a_new_history_sync_reads_the_log_of_its_thread_from_the_index() -> None:
    index = Recording()
    HistorySync(index).sync("t", [hm(0), hm(1), hm(2)])
    # another engine after a restart: the restore forgets the abandoned messages
    assert HistorySync(index).sync("t", [hm(0), hm(5)]) == Synced(1, 0)
    assert index.forgotten == [["m1", "m2"]] or index.forgotten == [["m2", "m1"]]
    assert index.indexed_messages("t") == [
        (0, "m0", message_fingerprint(hm(0))),
        (1, "m5", message_fingerprint(hm(5))),
    ]


def test_the_walk_back_stops_at_the_newest_position_that_matches() -> None:
    index = Recording()
    sync = HistorySync(index)
    a, b, c, d = hm(0), hm(1), hm(2), hm(3)
    sync.sync("t", [a, b, c, d])
    edited = HumanMessage("edited", id="b2")
    assert sync.sync("t", [a, edited, c, hm(4)]) == Synced(1, 0)
    assert index.forgotten == [["m3"]]


def test_an_abandoned_message_no_longer_marks_a_compaction() -> None:
    sync = HistorySync(SQLiteRecallIndex())
    sync.sync("t", [hm(0), hm(1), hm(2)])
    sync.sync("t", [hm(0), hm(3)])  # m1 and m2 abandoned
    assert sync.sync("t", [hm(1), hm(9)]).offset == 0


def test_a_repeated_id_is_dropped_from_the_log_once() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    x, a = hm(0), hm(1)
    sync.sync("t", [x, a, a])
    assert sync.sync("t", [x, hm(7)]) == Synced(1, 0)


def test_tool_names_after_a_compaction_come_from_the_kept_messages() -> None:
    index = SQLiteRecallIndex()
    sync = HistorySync(index)
    history: list = [hm(i) for i in range(9)]
    history.append(AIMessage("", tool_calls=[{"name": "probe", "args": {}, "id": "c1"}], id="a"))
    sync.sync("t", history)
    compacted = [*history[5:], ToolMessage("result qwerty", tool_call_id="c1", id="r")]
    assert sync.sync("t", compacted) == Synced(1, 5)
    (hit,) = index.search("t", ["qwerty"], limit=5)
    assert (hit.unit.tool, hit.unit.position) == ("probe", 10)


def test_the_index_uses_the_spec_unit_size() -> None:
    recaller = Recaller(spec(max_unit_chars=40, header=""))
    history = [hm(0, " ".join(f"alpha w{i}" for i in range(12))), hm(1, "other")]
    result = recaller.recall(request(history, "alpha", kept_from=1))
    assert len(result.units) > 1
    assert all(len(x.text) <= 40 for x in result.units)


def test_an_empty_history_recalls_nothing() -> None:
    result = Recaller(spec()).recall(request([], "alpha", kept_from=0, thread_id=None))
    assert result == RecallResult(None, (), 0, "~empty")


def test_a_repeat_with_another_last_message_searches_again() -> None:
    recaller = Recaller(spec(header=""))
    first = [hm(0, "alpha one"), HumanMessage("x", id="m1")]
    second = [hm(0, "alpha one"), HumanMessage("alpha two", id="n1")]
    assert [x.message_id for x in recaller.recall(request(first, "alpha")).units] == ["m0"]
    again = recaller.recall(request(second, "alpha", repeat=True))
    assert [x.message_id for x in again.units] == ["m0", "n1"]


def test_a_known_message_does_not_stop_the_batch() -> None:
    index = SQLiteRecallIndex()
    index.add_messages("t", [(0, "a", [u("a", 0, "first")])])
    batch = [(0, "a", [u("a", 0, "first")]), (1, "b", [u("b", 1, "second")])]
    assert index.add_messages("t", batch) == 1
    assert index.indexed_messages("t") == [(0, "a", None), (1, "b", None)]


def test_a_unit_without_tool_indexes_no_tool_word() -> None:
    index = SQLiteRecallIndex()
    index.add_messages("t", [(0, "a", [u("a", 0, "plain words")])])
    assert index.search("t", ["xxxx"], limit=5) == []
    assert index.ranked_terms(["xxxx"]) == []


def test_a_compacted_message_can_still_be_recalled() -> None:
    """After a compaction the summarized messages stay in the index and are this session's
    past: a query about a detail the summary dropped finds the exact line."""
    recaller = Recaller(spec(header=""))
    history = [hm(0, "the vault path is kv-x9"), *(hm(n, f"filler {n}") for n in range(1, 11))]
    before = recaller.recall(request(history, "vault path?", kept_from=5))
    assert [u.message_id for u in before.units] == ["m0"]
    compacted = [*history[5:], hm(11, "what was the vault path?")]
    after = recaller.recall(request(compacted, "vault path?", kept_from=0))
    assert [(u.message_id, u.label) for u in after.units] == [("m0", "#0 user")]
    assert after.text == "[#0 user] the vault path is kv-x9"
