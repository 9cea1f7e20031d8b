"""Exact results of the PostgreSQL recall index: its pure helpers, and a few server checks.

The helpers (`_clean`, `_tokens`, `_idf`, `_search_params`, ...) are checked directly with
exact values and need no server. The server-backed tests use the suite's throwaway server
(`postgres_dsn` in tests/conftest.py) and check what callers observe: bm25 scores equal to
the documented formula, ties, limits, the cache of per-thread counts (refresh by growth,
least recently used eviction, invalidation by `forget_messages`), the connection pool's
settings and the one-connection fallback, both after a lost connection.
"""

from __future__ import annotations

import math
import re
import string
import sys
import warnings
from typing import Any

import pytest

import ctxpolicy.recall.postgres as pg
from ctxpolicy.recall.postgres import (
    PostgresRecallIndex,
    _clean,
    _first_of_each,
    _idf,
    _message_params,
    _new_unit_rows,
    _plain,
    _scored_terms,
    _search_params,
    _ThreadStats,
    _tokens,
    _unit_row,
    _within_budget,
)
from ctxpolicy.recall.units import Unit

#: A DSN where nothing listens: construction gets past the argument checks, then fails.
CLOSED_DSN = "postgresql://127.0.0.1:1/x?connect_timeout=3"


def unit(
    message_id: str, position: int, text: str, *, tool: str | None = None, context: str = ""
) -> Unit:
    return Unit(message_id, position, 0, "tool" if tool else "user", tool, 1, 1, text, context)


# --- pure helpers ------------------------------------------------------------------------


def test_clean_replaces_nul_and_lone_surrogates_only() -> None:
    assert _clean("a\x00b\x00") == "a\ufffdb\ufffd"
    assert _clean("x\ud800y\udfffz") == "x\ufffdy\ufffdz"
    assert _clean("\x00\udc80") == "\ufffd\ufffd"
    assert _clean("café 東京 🚀 \ufffd") == "café 東京 🚀 \ufffd"


def test_plain_turns_every_ascii_punctuation_into_a_space() -> None:
    assert _plain(string.punctuation) == " " * len(string.punctuation)
    assert _plain("user@host:v1.2.3/a_b") == "user host v1 2 3 a b"
    assert _plain("nul\x00here é") == "nul\ufffdhere é"


def test_tokens_count_words_of_text_context_and_tool_like_fts5() -> None:
    assert _tokens(unit("m", 0, "alpha beta_gamma 42!", context="ctx-x")) == 6
    assert _tokens(unit("m", 0, "alpha", tool="get_logs", context="")) == 3
    assert _tokens(unit("m", 0, "東京 café ...")) == 2
    assert _tokens(unit("m", 0, "")) == 0


def test_thread_stats_go_stale_strictly_after_the_ttl_or_the_growth_bound() -> None:
    fresh = _ThreadStats(units=1000, tokens=5, taken=100.0)
    assert fresh.added == 0 and fresh.postings == {}
    assert (pg.STATS_TTL_S, pg.MAX_CACHED_THREADS) == (30.0, 256)  # the documented bounds
    assert not fresh.stale(130.0)
    assert fresh.stale(130.5)
    fresh.added = 200  # 10 % of 1000 units, plus 100
    assert not fresh.stale(100.0)
    fresh.added = 201
    assert fresh.stale(100.0)
    empty = _ThreadStats(units=0, tokens=0, taken=0.0, added=100)
    assert not empty.stale(0.0)
    empty.added = 101
    assert empty.stale(0.0)


def test_idf_is_fts5s_with_a_floor_of_one_millionth() -> None:
    assert _idf(10, 3) == math.log(7.5 / 3.5)
    assert _idf(10, 1) == math.log(9.5 / 1.5)
    assert _idf(100, 0) == math.log(100.5 / 0.5)
    assert _idf(40, 2) == math.log(38.5 / 2.5)
    # half the units or more: not above zero, so the floor
    assert _idf(2, 1) == 1e-6  # exactly log(1) = 0
    assert _idf(10, 6) == 1e-6
    assert _idf(2, 2) == 1e-6
    assert _idf(0, 0) == 1e-6
    # stale counts can say more matching units than units
    assert _idf(1, 3) == 1e-6


def test_search_params_carry_the_bm25_constants_and_each_terms_idf() -> None:
    stats = _ThreadStats(units=10, tokens=40, taken=0.0, postings={"alpha": 3, "a.b": 1})
    params = _search_params("th", 7, stats, ["alpha", "a.b"])
    assert params == {
        "thread": "th",
        "limit": 7,
        "c0": pytest.approx(0.3),
        "c1": pytest.approx(1.2 * 0.75 / 4.0),
        "boost": 1.5,
        "t0": "alpha",
        "w0": math.log(7.5 / 3.5),
        "t1": "a b",
        "w1": math.log(9.5 / 1.5),
    }
    # no units or no tokens: an average length of 1
    for units, tokens in [(0, 0), (5, 0), (0, 5)]:
        empty = _ThreadStats(units=units, tokens=tokens, taken=0.0)
        params = _search_params("th", 1, empty, [])
        assert params["c1"] == pytest.approx(0.9)
        assert params["c0"] == pytest.approx(0.3)
        assert not any(key.startswith(("t0", "w0")) for key in params)


def test_scored_terms_are_the_kept_ones_then_the_other_matching_ones_once() -> None:
    postings = {"a": 2, "b": 0, "c": 1, "d": 5}
    assert _scored_terms(["a", "b", "c", "b", "d", "a", "e"], ["c"], postings) == ["c", "a", "d"]
    assert _scored_terms(["a", "c"], ["c", "a"], postings) == ["c", "a"]
    assert _scored_terms([], [], postings) == []


def test_within_budget_uses_this_modules_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _within_budget({"a": 6000, "b": 1}, ["a", "b"]) == ["b"]
    assert _within_budget({"a": 5999, "b": 1}, ["a", "b"]) == ["b", "a"]
    monkeypatch.setattr(pg, "MAX_RANKED_POSTINGS", 5)
    assert _within_budget({"a": 3, "b": 2, "c": 4}, ["a", "b", "c"]) == ["b", "a"]
    assert _within_budget({"a": 9, "b": 0}, ["b", "a"]) == ["a"]


def test_rows_of_a_batch_first_of_each_id_cleaned_and_in_position_order() -> None:
    u1 = Unit("b\x00", 3, 0, "tool", "sh\x00", 2, 4, "port is 6432", "ctx\ud800")
    u2 = Unit("b\x00", 3, 1, "tool", "sh", 5, 5, "two words")
    u3 = unit("a", 1, "just one")
    u4 = unit("b\ufffd", 5, "ignored duplicate")
    first = _first_of_each(
        [(3, "b\x00", [u1, u2], "f3"), (1, "a", [u3]), (5, "b\ufffd", [u4], "f5")]
    )
    assert first == {"b\ufffd": (3, [(u1, 5), (u2, 3)], "f3"), "a": (1, [(u3, 2)], None)}
    assert list(first) == ["b\ufffd", "a"]
    assert _message_params("th", first) == (
        "th", ["b\ufffd", "a"], [3, 1], [2, 1], [8, 2], ["f3", None]
    )  # fmt: skip
    rows = list(_new_unit_rows("th", ["b\ufffd", "a"], first))
    # no Han characters: no segmented copies (the last two columns)
    assert rows == [
        ("th", "a", 1, 0, "user", None, 1, 1, "just one", "", 2, False, None, None),
        ("th", "b\ufffd", 3, 0, "tool", "sh\ufffd", 2, 4, "port is 6432", "ctx\ufffd", 5, True,
         None, None),
        ("th", "b\ufffd", 3, 1, "tool", "sh", 5, 5, "two words", "", 3, False, None, None),
    ]  # fmt: skip
    assert list(_new_unit_rows("th", ["a"], first)) == rows[:1]
    # by position, not by id
    late, early = unit("a", 9, "late"), unit("z", 2, "early")
    first = _first_of_each([(9, "a", [late]), (2, "z", [early])])
    assert [row[1] for row in _new_unit_rows("th", ["a", "z"], first)] == ["z", "a"]
    assert _unit_row("t", Unit("m", 9, 2, "user", None, 3, 7, "x = 5"), 4) == (
        "t", "m", 9, 2, "user", None, 3, 7, "x = 5", "", 4, True, None, None
    )  # fmt: skip
    # Han characters: the segmented copies of the text and the context come along
    zh = Unit("m", 9, 2, "user", None, 3, 7, "分区改成dt", "数据仓库")
    assert _unit_row("t", zh, 4)[-2:] == (" 分区 改成 dt", " 数据 仓库 数据仓库 ")


def test_bad_arguments_are_refused_before_connecting_with_exact_messages() -> None:
    expected = "schema_prefix must be an identifier of at most 40 characters, got 'a b'"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        PostgresRecallIndex(CLOSED_DSN, schema_prefix="a b", max_connections=0)
    with pytest.raises(ValueError, match=r"^max_connections must be at least 1, got 0$"):
        PostgresRecallIndex(CLOSED_DSN, max_connections=0)


def test_a_missing_psycopg_is_named_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import fails
    expected = "the postgres recall backend needs psycopg 3: pip install 'ctxpolicy[postgres]'"
    with pytest.raises(ImportError, match=f"^{re.escape(expected)}$"):
        PostgresRecallIndex(CLOSED_DSN)


def test_good_arguments_get_as_far_as_connecting() -> None:
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 (the postgres extra)")
    for prefix in ["a" * 40, "_x9", "Z"]:
        with pytest.raises(psycopg.OperationalError):
            PostgresRecallIndex(CLOSED_DSN, schema_prefix=prefix, max_connections=1)


# --- on a real server --------------------------------------------------------------------


def rows_of(dsn: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query).fetchall()


def bm25(idf: float, f: float, length: int, average: float) -> float:
    """FTS5's bm25 of one term (k1 = 1.2, b = 0.75), negated: higher is better."""
    return idf * f * 2.2 / (f + 1.2 * (1 - 0.75 + 0.75 * length / average))


@pytest.mark.postgres
def test_scores_ties_limits_and_forgetting(
    open_index, postgres_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    S, G = "s\x00", "g\x00"  # threads are cleaned like every string
    index = open_index()
    assert repr(index) == f"PostgresRecallIndex(schema_prefix='{prefix}')"
    indexes = {r[0] for r in rows_of(postgres_dsn, "SELECT indexname FROM pg_indexes")}
    assert {f"{prefix}_unit_search", f"{prefix}_unit_thread", f"{prefix}_unit_pkey"} <= indexes

    messages = [
        (0, "m0", [unit("m0", 0, "alpha.beta gamma")]),  # 3 tokens
        (1, "m1", [unit("m1", 1, "gamma delta", tool="alpha")]),  # 3
        (2, "m2", [unit("m2", 2, "epsilon", context="alpha")]),  # 2
        (3, "p", [unit("p", 3, "the port is 6432")]),  # 4, states a value
        # fillers; their ids run against their positions
        *[(p, f"f{12 - p}", [unit(f"f{12 - p}", p, "zeta eta")]) for p in range(4, 10)],  # 2
    ]
    assert index.add_messages(S, messages[::-1]) == 10
    assert index.add_messages(S, []) == 0
    assert rows_of(postgres_dsn, f"SELECT count(*) FROM {prefix}_unit") == [(10,)]
    n_units, average = 10, (3 + 3 + 2 + 4 + 6 * 2) / 10

    hits = index.search(S, ["alpha"], limit=5)
    idf = math.log((n_units - 3 + 0.5) / 3.5)
    assert [h.unit.message_id for h in hits] == ["m0", "m1", "m2"]
    expected = [bm25(idf, 1.0, 3, average), bm25(idf, 0.5, 3, average), bm25(idf, 0.3, 2, average)]
    assert [h.score for h in hits] == pytest.approx(expected, rel=1e-6)
    assert hits[1].unit == unit("m1", 1, "gamma delta", tool="alpha")

    # every term adds its own bm25; punctuation split "alpha.beta" in the stored column
    hits = index.search(S, ["gamma", "alpha", "beta"], limit=5)
    idf_g, idf_b = math.log(8.5 / 2.5), math.log(9.5 / 1.5)
    assert [h.unit.message_id for h in hits] == ["m0", "m1", "m2"]
    assert [h.score for h in hits] == pytest.approx(
        [
            bm25(idf_g, 1.0, 3, average)
            + bm25(idf, 1.0, 3, average)
            + bm25(idf_b, 1.0, 3, average),
            bm25(idf_g, 1.0, 3, average) + bm25(idf, 0.5, 3, average),
            bm25(idf, 0.3, 2, average),
        ],
        rel=1e-6,
    )
    (hit,) = index.search(S, ["beta"], limit=5)
    assert hit.unit.message_id == "m0"
    # a term with punctuation is the phrase of its words, when counted and when searched
    assert index.ranked_terms(S, ["alpha.beta", "gamma delta"]) == ["alpha.beta", "gamma delta"]
    assert [h.unit.message_id for h in index.search(S, ["alpha.beta"], limit=5)] == ["m0"]
    assert index.search(S, ["absent", "nothing"], limit=5) == []

    # the rarer terms pick the rows within the budget; every matching term scores them
    monkeypatch.setattr(pg, "MAX_RANKED_POSTINGS", 2)
    hits = index.search(S, ["alpha", "gamma"], limit=5)
    assert [h.unit.message_id for h in hits] == ["m0", "m1"]  # not m2: only alpha
    assert [h.score for h in hits] == pytest.approx(
        [
            bm25(idf_g, 1.0, 3, average) + bm25(idf, 1.0, 3, average),
            bm25(idf_g, 1.0, 3, average) + bm25(idf, 0.5, 3, average),
        ],
        rel=1e-6,
    )
    monkeypatch.undo()

    # a unit stating a value is boosted
    (hit,) = index.search(S, ["port"], limit=5)
    assert hit.unit.statement is True
    assert hit.score == pytest.approx(1.5 * bm25(math.log(9.5 / 1.5), 1.0, 4, average), rel=1e-6)

    # ties: the older unit (indexed in position order) first; limits
    hits = index.search(S, ["zeta"], limit=3)
    assert [h.unit.message_id for h in hits] == ["f8", "f7", "f6"]
    assert len({h.score for h in hits}) == 1
    assert [h.unit.message_id for h in index.search(S, ["alpha"], limit=1)] == ["m0"]
    assert index.search(S, ["alpha"], limit=0) == []
    assert index.search(S, ["alpha"], limit=-1) == []
    assert index.search(S, [], limit=5) == []
    assert index.ranked_terms("uncounted\x00", []) == []

    # same position: by message id
    batch = [(0, "x2\x00", [unit("x2\x00", 0, "kiwi")]), (0, "x1", [])]
    assert index.add_messages(G, batch) == 2
    assert index.indexed_messages(G) == [(0, "x1", None), (0, "x2\ufffd", None)]
    # forgetting a thread that was never searched, and one whose counts are cached
    assert index.forget_messages(G, []) == 0
    assert index.forget_messages(G, ["x2\x00", "nope"]) == 1
    assert index.indexed_messages(G) == [(0, "x1", None)]
    assert index.ranked_terms(S, ["epsilon", "delta"]) == ["epsilon", "delta"]
    assert index.forget_messages(S, ["m2"]) == 1
    assert index.ranked_terms(S, ["epsilon", "delta"]) == ["delta"]
    assert index.search(S, ["epsilon"], limit=5) == []
    assert [h.unit.message_id for h in index.search(S, ["delta"], limit=5)] == ["m1"]


@pytest.mark.postgres
def test_cached_counts_refresh_on_growth_and_keep_the_recently_used_threads(
    open_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg, "MAX_CACHED_THREADS", 2)
    index, other = open_index(), open_index()

    # refreshed once this index added more than 10 % of the units plus 100
    assert index.ranked_terms("g", ["zebra"]) == []
    batch = [(i, f"g{i}", [unit(f"g{i}", i, "zebra")]) for i in range(100)]
    assert index.add_messages("g", batch) == 100
    assert index.ranked_terms("g", ["zebra"]) == []  # 100 added: still trusted
    assert index.add_messages("g", [(100, "g100", [unit("g100", 100, "zebra")])]) == 1
    assert index.ranked_terms("g", ["zebra"]) == ["zebra"]

    # two threads cached; another index adds the term to them behind this one's back
    assert index.ranked_terms("a", ["zebra"]) == []
    assert index.ranked_terms("b", ["zebra"]) == []
    for thread in "abc":
        other.add_messages(thread, [(0, "z", [unit("z", 0, "zebra")])])
    assert index.ranked_terms("b", ["zebra"]) == []  # cached
    assert index.ranked_terms("a", ["zebra"]) == []  # cached, now the most recent
    assert index.ranked_terms("c", ["zebra"]) == ["zebra"]  # counted: b is dropped
    assert index.ranked_terms("a", ["zebra"]) == []  # still cached
    assert index.ranked_terms("b", ["zebra"]) == ["zebra"]  # counted again


@pytest.mark.postgres
def test_one_connection_commits_and_reconnects_after_a_loss(
    postgres_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg", reason="psycopg 3 (the postgres extra)")
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)  # import fails
    count = f"SELECT count(*) FROM {prefix}_message"
    with PostgresRecallIndex(postgres_dsn, schema_prefix=prefix) as index:
        assert index.indexed_messages("t") == []
        assert index.add_messages("t", [(0, "m0", [unit("m0", 0, "kiwi")])]) == 1
        assert rows_of(postgres_dsn, count) == [(1,)]  # committed, seen by others
        index._pool._conn.close()  # the connection is lost
        assert index.indexed_messages("t") == [(0, "m0", None)]
        assert index.add_messages("t", [(1, "m1", [unit("m1", 1, "fig")])]) == 1
        assert rows_of(postgres_dsn, count) == [(2,)]


@pytest.mark.postgres
def test_the_pool_is_configured_as_documented_and_survives_a_lost_connection(
    postgres_dsn: str, prefix: str
) -> None:
    psycopg_pool = pytest.importorskip("psycopg_pool")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. psycopg-pool's implicit open
        with PostgresRecallIndex(postgres_dsn, schema_prefix=prefix) as index:
            pool = index._pool
            assert isinstance(pool, psycopg_pool.ConnectionPool)
            assert (pool.min_size, pool.max_size) == (1, 4)
            assert pool.name == f"ctxpolicy-recall-{prefix}"
            with pool.connection() as conn:
                # autocommit; never server-side prepared (transaction-mode poolers)
                assert (conn.autocommit, conn.prepare_threshold) == (True, None)
                pid = conn.info.backend_pid
            assert index.indexed_messages("t") == []
            # the server drops the pool's connection: the pool checks and replaces it
            assert rows_of(postgres_dsn, f"SELECT pg_terminate_backend({pid}, 10000)") == [(True,)]
            assert index.add_messages("t", [(0, "m0", [unit("m0", 0, "kiwi")])]) == 1
            assert index.indexed_messages("t") == [(0, "m0", None)]
        assert pool.closed
        with pytest.raises(psycopg_pool.PoolClosed):
            index.indexed_messages("t")
        index.close()  # idempotent
        with PostgresRecallIndex(postgres_dsn, schema_prefix=prefix, max_connections=2) as two:
            assert (two._pool.min_size, two._pool.max_size) == (1, 2)


@pytest.mark.postgres
def test_a_pool_older_than_3_2_is_built_without_check(
    postgres_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg-pool < 3.2 has no ``check`` keyword (nor ``check_connection``): the pool is
    built without it instead of failing; 3.2+ gets its connection check."""
    psycopg_pool = pytest.importorskip("psycopg_pool")
    given: list[dict[str, Any]] = []

    real = psycopg_pool.ConnectionPool

    class OldPool:  # no ``check_connection`` attribute at all, as before 3.2
        def __init__(self, *args: Any, **options: Any) -> None:
            if "check" in options:
                raise TypeError("__init__() got an unexpected keyword argument 'check'")
            given.append(options)
            self._real = real(*args, **options)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

    monkeypatch.setattr(psycopg_pool, "ConnectionPool", OldPool)
    with PostgresRecallIndex(postgres_dsn, schema_prefix=prefix) as index:
        assert isinstance(index._pool, OldPool)
        assert index.add_messages("t", [(0, "m0", [unit("m0", 0, "kiwi")])]) == 1
    assert given and "check" not in given[0]
    monkeypatch.undo()
    with PostgresRecallIndex(postgres_dsn, schema_prefix=f"{prefix}b") as index:
        assert index._pool._check == psycopg_pool.ConnectionPool.check_connection
