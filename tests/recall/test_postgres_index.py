"""The PostgreSQL recall index on a real server: SQLite's semantics, across processes.

The server is the suite's throwaway one (`postgres_dsn` in tests/conftest.py): the tests
skip where the PostgreSQL binaries are missing, unless ``CTXPOLICY_REQUIRE_POSTGRES`` is
set. Each test works under its own table prefix (or thread), so they share one server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.recall.index import RecallIndex, query_terms
from ctxpolicy.recall.ingest import HistorySync, message_fingerprint
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import Unit

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 (the postgres extra)")

from ctxpolicy.recall.postgres import PostgresRecallIndex  # noqa: E402

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
LONG_SESSION = ROOT / "policies" / "long-session.yaml"
#: Seconds one helper process may take (a hang fails the test instead of blocking).
PROCESS_TIMEOUT_S = 60


def scalar(dsn: str, query: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def corpus() -> list:
    """A small session where idf, column weights and corrections decide the best unit."""
    dump = "\n".join(
        [
            "$ kubectl get pods -n payments",
            "payments-api-7f9c deploy running restarts=0",
            "payments-worker-2b1d deploy running restarts=0",
            "payments-cron-9a0e deploy CrashLoopBackOff restarts=41",
            "payments-db-0 deploy running restarts=0",
        ]
    )
    return [
        HumanMessage("We deploy the payments stack today; deploy carefully.", id="u0"),
        AIMessage(
            "", tool_calls=[{"name": "kubectl", "args": {"ns": "payments"}, "id": "c1"}], id="a1"
        ),
        ToolMessage(dump, tool_call_id="c1", id="t1"),
        AIMessage("The deploy of payments looks fine except one cron job.", id="a2"),
        HumanMessage("Note: the staging database password rotates every 30 days.", id="u3"),
        HumanMessage("The on-call engineer this week is Priya, pager 555-0142.", id="u4"),
        AIMessage("Noted. The canary region is eu-west-3 for this rollout.", id="a5"),
        HumanMessage("Correction: the canary region is now us-east-2.", id="u6"),
        AIMessage("Deploy deploy deploy: all green on the deploy dashboard.", id="a7"),
        HumanMessage("Ticket OPS-4821 tracks the CrashLoopBackOff of the cron job.", id="u8"),
    ]


QUERIES = [
    "Which pod is in CrashLoopBackOff?",
    "Who is on call this week?",
    "What is the canary region now?",
    "deploy CrashLoopBackOff",
    "How often does the staging database password rotate?",
    "Which ticket tracks the cron job?",
    "restarts of payments-db-0",
    "10.0.0.1 OPS-4821",
]


def best(index: RecallIndex, thread: str, query: str) -> Unit | None:
    hits = index.search(thread, query_terms(query), limit=5)
    assert all(hit.score > 0 for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    return hits[0].unit if hits else None


def test_same_best_unit_as_sqlite_on_a_small_corpus(open_index) -> None:
    pg, lite = open_index(), SQLiteRecallIndex()
    history = corpus()
    assert (
        HistorySync(pg).sync("s", history).added == HistorySync(lite).sync("s", history).added == 10
    )
    for query in QUERIES:
        expected = best(lite, "s", query)
        assert expected is not None, query
        assert best(pg, "s", query) == expected, query
    # spot checks of what "the same semantics" means here
    assert "payments-cron" in best(pg, "s", "Which pod is in CrashLoopBackOff?").text
    # idf: the rare term beats a unit that repeats the common one
    assert "CrashLoopBackOff" in best(pg, "s", "deploy CrashLoopBackOff").text
    # punctuation splits words like FTS5's tokenizer (10.0.0.1 is four words, none here)
    assert best(pg, "s", "10.0.0.1 OPS-4821").message_id == "u8"
    assert pg.search("s", ["payments-db-0"], limit=3)[0].unit.text.startswith("payments-db-0")
    # the tool name is indexed (weight B) with the unit
    assert {hit.unit.message_id for hit in pg.search("s", ["kubectl"], limit=10)} == {"a1", "t1"}
    # per thread
    assert pg.search("other", ["CrashLoopBackOff"], limit=5) == []
    lite.close()


def test_reindexing_adds_nothing_and_a_new_index_finds_everything(
    open_index, postgres_dsn: str, prefix: str
) -> None:
    first = open_index()
    history = corpus()
    assert HistorySync(first).sync("r", history).added == 10
    units = scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit")
    assert units > 10
    assert HistorySync(first).sync("r", history).added == 0
    entries = [(0, "u0", [Unit("u0", 0, 0, "user", None, 1, 1, "again")])]
    assert first.add_messages("r", entries) == 0
    # a batch naming one id twice indexes it once
    twice = [(10, "n10", [Unit("n10", 10, 0, "user", None, 1, 1, "zebra crossing")])] * 2
    assert first.add_messages("r", twice) == 1
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit") == units + 1
    first.close()

    # "restart": another index object (another process) on the same tables
    second = open_index()
    log = second.indexed_messages("r")
    assert log == [(i, m.id, message_fingerprint(m)) for i, m in enumerate(history)] + [
        (10, "n10", None)
    ]
    assert HistorySync(second).sync("r", history).added == 0
    assert best(second, "r", "Who is on call this week?").message_id == "u4"
    assert second.search("r", ["zebra"], limit=5)[0].unit.message_id == "n10"
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit") == units + 1
    assert second.indexed_messages("nothing here") == []


HOSTILE = [
    "'",
    '"',
    "\\",
    "a'b\"c\\d",
    "&|!():*",
    "foo:*",
    "!bar",
    "(x | y) & !z",
    "<->",
    "'); DROP TABLE ctxpolicy_recall_unit; --",
    "%s %(thread)s {unit}",
    "nul\x00byte",
    "lone\ud800surrogate",
    "",
    "   ",
    "x" * 5000,
    "ünïcödé 東京 🚀",
]


def test_hostile_terms_and_text_neither_break_nor_inject(open_index, postgres_dsn, prefix) -> None:
    index = open_index()
    text = "quote ' dquote \" backslash \\ ops &|!():* nul\x00here lone\ud800 and tokyo 東京"
    entries = [(0, "h'0\\", [Unit("h'0\\", 0, 0, "tool", "sh'\x00", 1, 1, text, "ctx ' \\")])]
    assert index.add_messages("th'read\\", entries) == 1
    for term in HOSTILE:
        index.search("th'read\\", [term], limit=5)
    index.search("th'read\\", HOSTILE, limit=5)
    assert index.search("th'read\\", [*HOSTILE, "东京", "tokyo"], limit=5)[0].unit.text.startswith(
        "quote '"
    )
    (hit,) = index.search("th'read\\", ["ops"], limit=5)
    assert hit.unit.message_id == "h'0\\"
    assert "\x00" not in hit.unit.text and "\ufffd" in hit.unit.text
    assert index.indexed_messages("th'read\\") == [(0, "h'0\\", None)]
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit") == 1


@pytest.mark.parametrize("bad", ["a; DROP TABLE b", "x\n", "1abc", "", "a" * 41, 'a"b'])
def test_bad_prefix_is_refused_before_connecting(bad: str) -> None:
    with pytest.raises(ValueError, match="schema_prefix"):
        PostgresRecallIndex("postgresql://nowhere.invalid/x", schema_prefix=bad)


def test_common_terms_are_left_out_within_the_postings_budget(
    open_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxpolicy.recall.postgres as module

    monkeypatch.setattr(module, "MAX_RANKED_POSTINGS", 30)
    index = open_index()
    entries = [
        (
            i,
            f"m{i}",
            [
                Unit(
                    f"m{i}",
                    i,
                    0,
                    "tool",
                    None,
                    1,
                    1,
                    f"common line {i}" + (" rare" if i % 10 == 0 else ""),
                )
            ],
        )
        for i in range(100)
    ]
    index.add_messages("b", entries)
    assert index.ranked_terms("b", ["common", "rare", "absent"]) == ["rare"]
    assert index.ranked_terms("b", ["common", "absent"]) == ["common"]
    hits = index.search("b", ["common", "rare"], limit=50)
    assert {hit.unit.message_id for hit in hits} == {f"m{i}" for i in range(0, 100, 10)}
    # counts are cached per thread, and refreshed once the thread has grown
    more = [
        (100 + i, f"n{i}", [Unit(f"n{i}", 100 + i, 0, "tool", None, 1, 1, "rare again")])
        for i in range(200)
    ]
    index.add_messages("b", more)
    assert index.ranked_terms("b", ["common", "rare"]) == ["common"]
    # another process's additions are seen once the cached counts expire
    assert index.ranked_terms("b", ["zzyzx"]) == []
    other = open_index()
    other.add_messages("b", [(400, "x", [Unit("x", 400, 0, "tool", None, 1, 1, "zzyzx")])])
    assert index.ranked_terms("b", ["zzyzx"]) == []  # cached
    monkeypatch.setattr(module, "STATS_TTL_S", 0.0)
    assert index.ranked_terms("b", ["zzyzx"]) == ["zzyzx"]


def test_one_locked_connection_without_psycopg_pool(
    postgres_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)  # import fails
    index = PostgresRecallIndex(postgres_dsn, schema_prefix=prefix)
    try:
        assert type(index._pool).__name__ == "_OneConnection"
        assert HistorySync(index).sync("one", corpus()).added == 10
        assert best(index, "one", "Who is on call this week?").message_id == "u4"
    finally:
        index.close()
        index.close()  # idempotent


def test_threads_racing_on_the_same_batches_index_each_message_once(
    postgres_dsn: str, prefix: str
) -> None:
    from tests.recall.postgres_recall_process import corpus_message

    indexes = [PostgresRecallIndex(postgres_dsn, schema_prefix=prefix) for _ in range(4)]
    barrier = threading.Barrier(len(indexes))
    added: list[int] = []

    def run(index: PostgresRecallIndex) -> None:
        barrier.wait()
        total = 0
        for start in range(0, 200, 20):
            total += index.add_messages(
                "same", [corpus_message(i) for i in range(start, start + 20)]
            )
        added.append(total)

    workers = [threading.Thread(target=run, args=(index,)) for index in indexes]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=PROCESS_TIMEOUT_S)
    finally:
        for index in indexes:
            index.close()
    assert len(added) == 4 and sum(added) == 200
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_message") == 200
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit") == 4 * 200


class Helper:
    """A `postgres_recall_process` OS process."""

    def __init__(self, dsn: str, prefix: str, thread: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.recall.postgres_recall_process",
                dsn,
                prefix,
                thread,
                *args,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        if not text:
            _, err = self.proc.communicate(timeout=PROCESS_TIMEOUT_S)
            raise AssertionError(f"helper process died:\n{err[-3000:]}")
        return dict(json.loads(text))

    def finish(self) -> dict[str, Any]:
        out = self.line()
        _, err = self.proc.communicate(timeout=PROCESS_TIMEOUT_S)
        assert self.proc.returncode == 0, err[-3000:]
        return out


def test_two_processes_index_one_thread_at_once_and_a_third_finds_both(
    postgres_dsn: str, prefix: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    # overlapping ids 100..299; one walks up, the other down, so they meet mid-overlap;
    # both create the (new) tables at the same time
    up = Helper(postgres_dsn, prefix, "race", "index", "0", "300", "10", str(go))
    down = Helper(postgres_dsn, prefix, "race", "index", "100", "400", "10", str(go), "reverse")
    try:
        assert up.line() == {"ready": True}
        assert down.line() == {"ready": True}
        go.touch()
        counts = [up.finish()["added"], down.finish()["added"]]
    finally:
        for helper in (up, down):
            if helper.proc.poll() is None:
                helper.proc.kill()
                helper.proc.communicate()
    assert sum(counts) == 400 and min(counts) >= 100
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_message") == 400
    assert scalar(postgres_dsn, f"SELECT count(DISTINCT message_id) FROM {prefix}_message") == 400
    assert scalar(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit") == 4 * 400
    assert (
        scalar(
            postgres_dsn,
            f"SELECT count(*) FROM (SELECT message_id, part FROM {prefix}_unit "
            "GROUP BY message_id, part HAVING count(*) > 1) AS d",
        )
        == 0
    )

    searcher = Helper(postgres_dsn, prefix, "race", "search", "item17", "item377", "code")
    hits = searcher.finish()["hits"]
    assert set(hits[:2]) == {"m00017", "m00377"}  # one indexed by each process only


def session(turns: int, facts: dict[int, str]) -> list:
    out: list = []
    for i in range(turns):
        out.append(HumanMessage(f"Turn {i}: check service svc{i % 13}.", id=f"h{i}"))
        out.append(
            AIMessage(
                "",
                tool_calls=[{"name": "get_logs", "args": {"svc": i % 13}, "id": f"c{i}"}],
                id=f"a{i}",
            )
        )
        lines = [f"10:{j:02d} svc{i % 13} INFO request ok latency={j}ms" for j in range(12)]
        if i in facts:
            lines.insert(7, facts[i])
        out.append(ToolMessage("\n".join(lines), tool_call_id=f"c{i}", id=f"t{i}"))
        out.append(AIMessage(f"svc{i % 13} looks fine at turn {i}.", id=f"r{i}"))
    return out


def test_two_engines_share_one_postgres_index(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxpolicy import PolicyEngine

    text = LONG_SESSION.read_text(encoding="utf-8")
    policy = text.replace("context_window: 128000", "context_window: 6000").replace(
        "backend: memory ", "backend: postgres "
    )
    assert "backend: postgres" in policy and "context_window: 6000" in policy
    path = tmp_path / "pg-session.yaml"
    path.write_text(policy, encoding="utf-8")
    monkeypatch.setenv("CTXPOLICY_RECALL_DSN", postgres_dsn)
    thread = f"e2e-{uuid.uuid4().hex[:8]}"
    fact = "10:07 svc3 WARN failover region switched to ap-south-7"
    history = [
        *session(60, {3: fact}),
        HumanMessage("Which region did the failover switch to?", id="q1"),
    ]

    def compose(engine: PolicyEngine, messages: list) -> tuple[str, str, list[str]]:
        result = engine.compose(
            process="react",
            system_prompt="You are the SRE agent.",
            state={"messages": messages},
            thread_id=thread,
        )
        layer = result.report.layer("recall__context")
        prompt = "\n".join(str(m.content) for m in result.messages)
        return prompt, " ".join(layer.notes), [u.text for u in layer.recalled]

    first, second = PolicyEngine.from_file(path), PolicyEngine.from_file(path)
    try:
        prompt, notes, recalled = compose(first, history)
        assert f"{len(history)} new message(s) indexed" in notes
        assert fact in recalled and fact in prompt  # recalled: not in the kept history

        # another engine (another process): nothing of the shared history is indexed again
        prompt, notes, recalled = compose(second, history)
        assert "0 new message(s) indexed" in notes
        assert fact in recalled and fact in prompt
        follow_up = [
            *history,
            AIMessage("Noted.", id="r-q1"),
            HumanMessage("And the failover region again?", id="q2"),
        ]
        prompt, notes, recalled = compose(second, follow_up)
        assert "2 new message(s) indexed" in notes
        assert fact in recalled
        assert scalar(
            postgres_dsn,
            f"SELECT count(*) FROM ctxpolicy_recall_message WHERE thread = '{thread}'",
        ) == len(follow_up)
    finally:
        for engine in (first, second):
            engine.recaller("recall__context").close()


def test_a_restore_forgets_the_abandoned_branch_like_sqlite(open_index) -> None:
    from ctxpolicy.recall.ingest import HistorySync

    index = open_index()
    assert isinstance(index, RecallIndex)
    sync = HistorySync(index)
    base = [HumanMessage(f"base message {i}", id=f"b{i}") for i in range(4)]
    sync.sync("t", [*base, HumanMessage("branch one says kiwi", id="k")])
    assert index.search("t", ["kiwi"], limit=3)
    assert sync.sync("t", [*base, HumanMessage("branch two says mango", id="m")]).added == 1
    assert not index.search("t", ["kiwi"], limit=3)
    assert [h.unit.message_id for h in index.search("t", ["mango"], limit=3)] == ["m"]
    assert "k" not in {mid for _, mid, _ in index.indexed_messages("t")}


def test_every_term_scores_but_only_rows_with_a_rare_one_are_ranked(
    open_index, monkeypatch
) -> None:
    import ctxpolicy.recall.postgres as backend

    monkeypatch.setattr(backend, "MAX_RANKED_POSTINGS", 5)
    index = open_index()
    rows = [
        (i, f"c{i}", [Unit(f"c{i}", i, 0, "user", None, 1, 1, f"common filler {i}")])
        for i in range(40)
    ]
    rows.append((40, "r", [Unit("r", 40, 0, "user", None, 1, 1, "common rareword here")]))
    rows.append((41, "s", [Unit("s", 41, 0, "user", None, 1, 1, "rareword alone today")]))
    index.add_messages("t", rows)
    hits = index.search("t", ["common", "rareword"], limit=10)
    assert [h.unit.message_id for h in hits] == ["r", "s"]
