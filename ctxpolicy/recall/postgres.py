"""PostgreSQL full-text recall index, for deployments spread over processes or machines.

Needs psycopg 3 (the ``postgres`` extra); a ``psycopg_pool.ConnectionPool`` is used
when psycopg-pool is installed, else one connection behind a lock. Two tables, named
from ``schema_prefix`` (default ``ctxpolicy_recall``), created on first use
(``CREATE ... IF NOT EXISTS`` under a transaction-level advisory lock, so processes
that start together do not race on the DDL):

- ``<prefix>_message``: which message ids a thread has indexed (with each message's
  fingerprint and the counts of its units and tokens), primary key
  ``(thread, message_id)``. A table created before fingerprints were kept gets the
  column (``ADD COLUMN IF NOT EXISTS``); its rows keep a null fingerprint.
  `PostgresRecallIndex.add_messages` inserts the message rows with ``ON CONFLICT DO
  NOTHING ... RETURNING`` and the units of the rows that were new only, in one
  transaction: a message indexed twice, even by two processes racing, is
  indexed once (the second insert waits for the first transaction and then does
  nothing). Rows are inserted in message id order, so two racing batches take their row
  locks in the same order and cannot deadlock.
- ``<prefix>_unit``: the units, with a generated ``tsvector`` column (``english``
  config; the text weighted A, the tool name B, the context C) under a GIN index, a
  btree index on ``thread``, and each unit's token count (bm25's length). A unit with
  Han characters also keeps a segmented copy of its text and context
  (``search_text``, ``search_context``; `ctxpolicy.recall.segment.segment_text`), and
  the ``tsvector`` is made from that copy where there is one. A table made before the
  copies were kept gets the columns when it is opened (under the same lock): its
  Chinese units are segmented, their token counts redone, and the ``tsvector`` column
  made again.

Same semantics as `ctxpolicy.recall.sqlite.SQLiteRecallIndex` (the reference):

- **Tokens.** Before parsing, ASCII punctuation is turned into spaces, in the stored
  column and in the query terms alike. PostgreSQL's parser would otherwise keep
  ``10.0.0.1``, ``a/b.yaml``, ``user@host`` or ``v1.2.3`` whole, while FTS5's unicode61
  tokenizer (and `ctxpolicy.recall.index.query_terms`) splits them into words. Stemming
  is Snowball English (FTS5: Porter); unlike FTS5 accents are kept (``café`` does not
  match ``cafe``). Han runs are cut into space-separated words before parsing, as in
  SQLite, and the query terms are words of the same cut
  (`ctxpolicy.recall.index.query_terms`): the parser keeps a Han word whole and the
  English stemmer leaves it as it is.
- **Terms.** Each term is a phrase (``phraseto_tsquery``; FTS5: a quoted phrase); the
  query is their OR (``||``). Terms are always bound as parameters, never put into the
  SQL text: quotes, backslashes and ``&|!():*`` are plain characters.
- **Ranking.** FTS5's bm25 (k1 = 1.2, b = 0.75, column weights 1.0 / 0.5 / 0.3 for
  text / tool / context, idf ``log((N - n + 0.5) / (n + 0.5))`` but at least 1e-6),
  computed in SQL. A term's weighted frequency in a unit is ``ts_rank`` of the term
  alone without normalization, scaled so that one occurrence counts its column's weight
  (repeats count a little less than in FTS5: 1.25 for two); a unit's length is its
  token count as FTS5 counts it, stored with it. On the same data the scores equal the
  SQLite backend's (negated bm25) up to that repeat rule. ``ts_rank`` alone would have
  no idf: a unit repeating a common word would beat the one holding the rare word the
  query is about. Scores are positive, higher is better; ties go to the older unit.
- **Cost bound.** Like `SQLiteRecallIndex.ranked_terms`, the most common terms are
  left out once the rarer ones already match `MAX_RANKED_POSTINGS` units, and a term
  that matches nothing is dropped before the search. The counts (bm25's ``n``, also
  ``N`` and the average length) come from one small query: the thread's totals from
  the message table, then one pass over the thread's units that match any uncounted
  term (a GIN lookup). They are cached per instance and thread, like SQLite's, until
  the thread has grown by 10 % through this instance or `STATS_TTL_S` seconds have
  passed (other processes index the same threads). Unlike SQLite, they are the counts
  of the searched thread, not of the whole table: PostgreSQL applies the thread filter
  before ranking, so the rows ranked are the thread's; for a one-thread index both are
  the same.

Strings are stored as given, except NUL characters (which PostgreSQL text cannot hold)
and lone surrogates (not UTF-8), both replaced by U+FFFD. Tables live in the first
schema of the connection's ``search_path`` (set ``options=-csearch_path=...`` in the
DSN to choose another).

See docs/recall.md, "Backends".
"""

from __future__ import annotations

import contextlib
import math
import re
import string
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxpolicy.recall.floor import distinctive_terms
from ctxpolicy.recall.index import (
    MAX_RANKED_POSTINGS,
    STATEMENT_BOOST,
    IndexedMessage,
    MessageEntry,
    RecallHit,
    entry_fingerprint,
    terms_within_budget,
    unit_from_row,
)
from ctxpolicy.recall.segment import HAN_RUN, segment_text
from ctxpolicy.recall.units import Unit, states_value

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import TupleRow
    from psycopg.sql import Composed
    from psycopg_pool import ConnectionPool

#: Seconds the per-thread term counts are trusted (other processes index too).
STATS_TTL_S = 30.0
#: Threads whose term counts one instance keeps (least recently searched dropped first).
MAX_CACHED_THREADS = 256
#: Characters turned into spaces before parsing (see the module docstring, "Tokens").
_PUNCTUATION = string.punctuation
_TO_SPACES = str.maketrans(_PUNCTUATION, " " * len(_PUNCTUATION))
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN = re.compile(r"[^\W_]+")
#: bm25 parameters (FTS5's; the search SQL writes k1 + 1 = 2.2 out). The column weights
#: are the ``ts_rank`` weights ``{D, C, B, A}`` = ``{0.1, 0.3, 0.5, 1.0}``: text (A) 1.0,
#: tool (B) 0.5, context (C) 0.3, as in the SQLite backend. ``ts_rank`` without
#: normalization gives ``w / 1.6449...`` (pi^2 / 6) for one occurrence of weight w.
_K1 = 1.2
_B = 0.75


def _clean(text: str) -> str:
    """``text`` as PostgreSQL can store it: NUL and lone surrogates become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def _plain(term: str) -> str:
    """A query term as the stored column sees its text (punctuation to spaces)."""
    return _clean(term).translate(_TO_SPACES)


def _segmented(text: str) -> str | None:
    """The segmented copy of ``text`` to index, or None when it is the text itself."""
    segmented = segment_text(text)
    return None if segmented is text else _clean(segmented)


def _count_tokens(*parts: str) -> int:
    """Tokens of a unit's indexed text, context and tool as FTS5's unicode61 tokenizer
    counts them (bm25's length)."""
    return sum(len(_TOKEN.findall(part)) for part in parts)


def _tokens(unit: Unit) -> int:
    """Tokens of ``unit`` as indexed (its segmented copy where it has Han characters)."""
    return _count_tokens(segment_text(unit.text), segment_text(unit.context), unit.tool or "")


@dataclass(slots=True)
class _ThreadStats:
    """Counts of one thread: units (``N``), their tokens, units matching each term (``n``)."""

    units: int
    tokens: int
    taken: float
    added: int = 0
    postings: dict[str, int] = field(default_factory=dict)

    def stale(self, now: float) -> bool:
        return now - self.taken > STATS_TTL_S or self.added > self.units * 0.1 + 100


class _OneConnection:
    """One connection behind a lock (when psycopg-pool is not installed)."""

    def __init__(self, dsn: str, kwargs: dict[str, Any]) -> None:
        import psycopg

        self._dsn = dsn
        self._kwargs = kwargs
        self._lock = threading.Lock()
        self._conn: Connection[TupleRow] = psycopg.connect(dsn, **kwargs)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection[TupleRow]]:
        import psycopg

        with self._lock:
            if self._conn.closed or self._conn.broken:
                self._conn = psycopg.connect(self._dsn, **self._kwargs)
            yield self._conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresRecallIndex:
    """A recall index in PostgreSQL full-text search (see the module docstring).

    Args:
        dsn: A libpq connection string or URI.
        schema_prefix: Prefix of the table names (a plain identifier of at most 40
            characters); several indexes can share one database under distinct prefixes.
        max_connections: Most connections the pool opens.

    Safe to share between threads. Creates the tables on first use; raises psycopg's
    ``OperationalError`` when the server cannot be reached.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema_prefix: str = "ctxpolicy_recall",
        max_connections: int = 4,
    ) -> None:
        try:
            import psycopg
            from psycopg import sql
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "the postgres recall backend needs psycopg 3: pip install 'ctxpolicy[postgres]'"
            ) from exc
        if not _PREFIX.fullmatch(schema_prefix):
            raise ValueError(
                f"schema_prefix must be an identifier of at most 40 characters, got "
                f"{schema_prefix!r}"
            )
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.schema_prefix = schema_prefix
        self._message = sql.Identifier(f"{schema_prefix}_message")
        self._unit = sql.Identifier(f"{schema_prefix}_unit")
        self._stats: OrderedDict[str, _ThreadStats] = OrderedDict()
        self._stats_lock = threading.Lock()
        self._search_sql: dict[tuple[int, int], Composed] = {}
        self._count_sql: dict[tuple[bool, int], Composed] = {}
        kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": None}
        with psycopg.connect(dsn, **kwargs) as conn:
            self._create_schema(conn)
        self._pool: ConnectionPool[Connection[TupleRow]] | _OneConnection
        try:
            from psycopg_pool import ConnectionPool
        except ImportError:  # pragma: no cover - depends on the installed extras
            self._pool = _OneConnection(dsn, kwargs)
        else:
            # psycopg-pool 3.2 added both the ``check`` keyword and ``check_connection``;
            # an older pool takes neither (it would refuse ``check=None``)
            check = getattr(ConnectionPool, "check_connection", None)
            self._pool = ConnectionPool(
                dsn,
                kwargs=kwargs,
                min_size=1,
                max_size=max_connections,
                open=True,
                name=f"ctxpolicy-recall-{schema_prefix}",
                **({} if check is None else {"check": check}),
            )
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresRecallIndex(schema_prefix={self.schema_prefix!r})"

    def __enter__(self) -> PostgresRecallIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_schema(self, conn: Connection[TupleRow]) -> None:
        from psycopg import sql

        prefix = self.schema_prefix
        tsv = sql.SQL(
            "setweight(to_tsvector('english'::regconfig, "
            "translate(coalesce(search_text, text), {p}, {s})), 'A') || "
            "setweight(to_tsvector('english'::regconfig, "
            "translate(coalesce(tool, ''), {p}, {s})), 'B') || "
            "setweight(to_tsvector('english'::regconfig, "
            "translate(coalesce(search_context, context), {p}, {s})), 'C')"
        ).format(p=sql.Literal(_PUNCTUATION), s=sql.Literal(" " * len(_PUNCTUATION)))
        statements = [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {message} ("
                "thread text NOT NULL, message_id text NOT NULL, position bigint NOT NULL, "
                "units integer NOT NULL, tokens integer NOT NULL, fingerprint text, "
                "PRIMARY KEY (thread, message_id))"
            ).format(message=self._message),
            sql.SQL("ALTER TABLE {message} ADD COLUMN IF NOT EXISTS fingerprint text").format(
                message=self._message
            ),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {unit} ("
                "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                "thread text NOT NULL, message_id text NOT NULL, position bigint NOT NULL, "
                "part integer NOT NULL, role text NOT NULL, tool text, "
                "start_line integer NOT NULL, end_line integer NOT NULL, "
                "text text NOT NULL, context text NOT NULL, tokens integer NOT NULL, "
                "statement boolean NOT NULL DEFAULT false, "
                "search_text text, search_context text, "
                "search tsvector GENERATED ALWAYS AS ({tsv}) STORED)"
            ).format(unit=self._unit, tsv=tsv),
        ]
        search_index = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON {unit} USING gin (search)"
        ).format(name=sql.Identifier(f"{prefix}_unit_search"), unit=self._unit)
        statements += [
            search_index,
            sql.SQL("CREATE INDEX IF NOT EXISTS {name} ON {unit} (thread)").format(
                name=sql.Identifier(f"{prefix}_unit_thread"), unit=self._unit
            ),
        ]
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"ctxpolicy.recall.schema:{prefix}",),
            )
            for statement in statements:
                conn.execute(statement)
            if not self._has_segmented_copies(conn):
                self._segment_existing(conn, tsv)
                conn.execute(search_index)

    def _has_segmented_copies(self, conn: Connection[TupleRow]) -> bool:
        """Whether the unit table keeps segmented copies (made by this version or later)."""
        row = conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attname = 'search_text' AND NOT attisdropped",
            (self._unit.as_string(conn),),
        ).fetchone()
        return row is not None and int(row[0]) > 0

    def _segment_existing(self, conn: Connection[TupleRow], tsv: Composed) -> None:
        """A table made before segmented copies were kept: add them for its Chinese units,
        redo their token counts, and make the ``tsvector`` column again from the copies."""
        from psycopg import sql

        unit, message = self._unit, self._message
        conn.execute(
            sql.SQL(
                "ALTER TABLE {unit} ADD COLUMN search_text text, ADD COLUMN search_context text"
            ).format(unit=unit)
        )
        han = sql.Literal(HAN_RUN.pattern)
        rows = conn.execute(
            sql.SQL(
                "SELECT id, text, context, coalesce(tool, '') FROM {unit} "
                "WHERE text ~ {han} OR context ~ {han}"
            ).format(unit=unit, han=han)
        ).fetchall()
        update = sql.SQL(
            "UPDATE {unit} SET search_text = %s, search_context = %s, tokens = %s WHERE id = %s"
        ).format(unit=unit)
        for row, text, context, tool in rows:
            search_text, search_context = _segmented(text), _segmented(context)
            tokens = _count_tokens(search_text or text, search_context or context, tool)
            conn.execute(update, (search_text, search_context, tokens, row))
        if rows:
            conn.execute(
                sql.SQL(
                    "UPDATE {message} AS m SET tokens = s.tokens FROM (SELECT thread, "
                    "message_id, sum(tokens)::integer AS tokens FROM {unit} "
                    "WHERE search_text IS NOT NULL OR search_context IS NOT NULL "
                    "GROUP BY thread, message_id) AS s "
                    "WHERE m.thread = s.thread AND m.message_id = s.message_id"
                ).format(message=message, unit=unit)
            )
        conn.execute(sql.SQL("ALTER TABLE {unit} DROP COLUMN search").format(unit=unit))
        conn.execute(
            sql.SQL(
                "ALTER TABLE {unit} ADD COLUMN search tsvector GENERATED ALWAYS AS ({tsv}) STORED"
            ).format(unit=unit, tsv=tsv)
        )

    def indexed_messages(self, thread: str) -> list[IndexedMessage]:
        """``(position, message id, fingerprint)`` of every message indexed for ``thread``,
        by position."""
        from psycopg import sql

        query = sql.SQL(
            "SELECT position, message_id, fingerprint FROM {message} WHERE thread = %s "
            "ORDER BY position, message_id"
        ).format(message=self._message)
        with self._pool.connection() as conn:
            rows = conn.execute(query, (_clean(thread),)).fetchall()
        return [(int(p), str(m), None if f is None else str(f)) for p, m, f in rows]

    def add_messages(self, thread: str, messages: Sequence[MessageEntry]) -> int:
        """Index new messages of ``thread`` in one transaction; known ids are skipped.

        Returns:
            How many messages were new.
        """
        from psycopg import sql

        if not messages:
            return 0
        thread = _clean(thread)
        first = _first_of_each(messages)
        insert = sql.SQL(
            "INSERT INTO {message} (thread, message_id, position, units, tokens, fingerprint) "
            "SELECT %s, m, p, n, k, f "
            "FROM unnest(%s::text[], %s::bigint[], %s::integer[], %s::integer[], %s::text[]) "
            "AS t(m, p, n, k, f) ORDER BY m "
            "ON CONFLICT DO NOTHING RETURNING message_id"
        ).format(message=self._message)
        copy = sql.SQL(
            "COPY {unit} (thread, message_id, position, part, role, tool, start_line, "
            "end_line, text, context, tokens, statement, search_text, search_context) FROM STDIN"
        ).format(unit=self._unit)
        params = _message_params(thread, first)
        added_units = 0
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(insert, params)
            new = [str(row[0]) for row in cur.fetchall()]
            if new:
                with cur.copy(copy) as out:
                    for row in _new_unit_rows(thread, new, first):
                        out.write_row(row)
                        added_units += 1
        if added_units:
            self._count_added(thread, added_units)
        return len(new)

    def _count_added(self, thread: str, units: int) -> None:
        """Add ``units`` to the cached unit count of ``thread`` (if it is cached)."""
        with self._stats_lock:
            stats = self._stats.get(thread)
            if stats is not None:
                stats.added += units

    def _count_query(self, with_units: bool, terms: int) -> Composed:
        """The thread's units and tokens (if asked), then how many units match each term.

        One pass over the thread's units that match any of the terms (GIN lookup).
        """
        from psycopg import sql

        key = (with_units, terms)
        found = self._count_sql.get(key)
        if found is None:
            head = sql.SQL(
                "(SELECT coalesce(sum(units), 0) FROM {message} WHERE thread = %(thread)s), "
                "(SELECT coalesce(sum(tokens), 0) FROM {message} WHERE thread = %(thread)s)"
                if with_units
                else "0, 0"
            ).format(message=self._message)
            queries = [_tsquery(i) for i in range(terms)]
            counts: sql.Composable = sql.SQL("SELECT")
            if queries:
                counts = sql.SQL(
                    "SELECT {counts} FROM {unit} WHERE thread = %(thread)s AND search @@ ({any})"
                ).format(
                    counts=sql.SQL(", ").join(
                        sql.SQL("count(*) FILTER (WHERE search @@ {})").format(q) for q in queries
                    ),
                    unit=self._unit,
                    any=sql.SQL(" || ").join(queries),
                )
            found = sql.SQL("SELECT {head}, c.* FROM ({counts}) AS c").format(
                head=head, counts=counts
            )
            self._count_sql[key] = found
        return found

    def _cached_stats(self, thread: str, now: float) -> tuple[_ThreadStats | None, set[str]]:
        """The thread's cached counts while fresh (None otherwise), and the terms they cover."""
        with self._stats_lock:
            stats = self._stats.get(thread)
            if stats is None or stats.stale(now):
                return None, set()
            self._stats.move_to_end(thread)
            return stats, set(stats.postings)

    def _thread_stats(self, thread: str, terms: Sequence[str]) -> _ThreadStats:
        """The thread's counts, covering ``terms``: from the cache while it is fresh."""
        now = time.monotonic()
        stats, known = self._cached_stats(thread, now)
        missing = list(dict.fromkeys(t for t in terms if t not in known))
        if stats is not None and not missing:
            return stats
        params: dict[str, Any] = {"thread": thread}
        params.update((f"t{i}", _plain(term)) for i, term in enumerate(missing))
        with self._pool.connection() as conn:
            row = conn.execute(self._count_query(stats is None, len(missing)), params).fetchone()
        assert row is not None
        fresh = {term: int(n) for term, n in zip(missing, row[2:], strict=True)}
        with self._stats_lock:
            if stats is None:
                stats = _ThreadStats(units=int(row[0]), tokens=int(row[1]), taken=now)
                self._stats[thread] = stats
            stats.postings.update(fresh)
            self._stats.move_to_end(thread)
            while len(self._stats) > MAX_CACHED_THREADS:
                self._stats.popitem(last=False)
        return stats

    def ranked_terms(self, thread: str, terms: Sequence[str]) -> list[str]:
        """``terms`` that one search of ``thread`` ranks: rarest first, within
        `MAX_RANKED_POSTINGS` matching units.

        The rarest term is always kept; a term that matches nothing is dropped.
        """
        return _within_budget(self._thread_stats(_clean(thread), terms).postings, terms)

    def _search_query(self, terms: int, filtering: int) -> Composed:
        """The ranked query over ``terms`` terms; rows must match one of the first ``filtering``."""
        from psycopg import sql

        found = self._search_sql.get((terms, filtering))
        if found is None:
            queries = [_tsquery(i) for i in range(terms)]
            # f = ts_rank * 1.6449...: one occurrence counts its column's weight
            frequencies = sql.SQL(", ").join(
                sql.SQL(
                    "1.64493406685::float8 * ts_rank(ARRAY[0.1, 0.3, 0.5, 1.0]::float4[], "
                    "u.search, {q}, 0) AS {f}"
                ).format(q=q, f=sql.Identifier(f"f{i}"))
                for i, q in enumerate(queries)
            )
            # bm25: idf * f * (k1 + 1) / (f + k1 * (1 - b) + k1 * b * length / average)
            score = sql.SQL(" + ").join(
                sql.SQL(
                    "{w}::float8 * r.{f} * 2.2 / (r.{f} + %(c0)s::float8 + %(c1)s::float8 * "
                    "u.tokens)"
                ).format(w=sql.Placeholder(f"w{i}"), f=sql.Identifier(f"f{i}"))
                for i in range(terms)
            )
            found = sql.SQL(
                "SELECT u.message_id, u.position, u.part, u.role, u.tool, u.start_line, "
                "u.end_line, u.text, u.context, u.statement, "
                "({score}) * (CASE WHEN u.statement THEN %(boost)s::float8 ELSE 1.0 END) "
                "AS score FROM {unit} AS u "
                "CROSS JOIN LATERAL (SELECT {frequencies} OFFSET 0) AS r "
                "WHERE u.thread = %(thread)s AND u.search @@ ({any}) "
                "ORDER BY score DESC, u.id LIMIT %(limit)s"
            ).format(
                score=score,
                unit=self._unit,
                frequencies=frequencies,
                any=sql.SQL(" || ").join(queries[:filtering]),
            )
            self._search_sql[(terms, filtering)] = found
        return found

    def search(
        self, thread: str, terms: Sequence[str], *, limit: int, floor: bool = False
    ) -> list[RecallHit]:
        """The best ``limit`` units of ``thread`` matching any of ``terms``, best first.

        Scored like bm25 (see the module docstring). With ``floor`` only units holding a
        term that is not common in the thread are found (`ctxpolicy.recall.floor`).
        """
        if not terms or limit <= 0:
            return []
        thread = _clean(thread)
        stats = self._thread_stats(thread, terms)
        if floor:  # a common term never selects rows
            allowed = distinctive_terms(stats.units, stats.postings, terms)
            kept = _within_budget({t: stats.postings[t] for t in allowed}, allowed)
        else:
            kept = _within_budget(stats.postings, terms)
        if not kept:
            return []
        scored = _scored_terms(terms, kept, stats.postings)
        params = _search_params(thread, limit, stats, scored)
        with self._pool.connection() as conn:
            rows = conn.execute(self._search_query(len(scored), len(kept)), params).fetchall()
        return [RecallHit(unit_from_row(row), max(float(row[-1]), 1e-12)) for row in rows]

    def forget_messages(self, thread: str, message_ids: Sequence[str]) -> int:
        """Remove messages of an abandoned branch (and their units) from ``thread``.

        Returns:
            How many messages were removed.
        """
        from psycopg import sql

        if not message_ids:
            return 0
        thread = _clean(thread)
        ids = [_clean(m) for m in message_ids]
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                sql.SQL("DELETE FROM {unit} WHERE thread = %s AND message_id = ANY(%s)").format(
                    unit=self._unit
                ),
                (thread, ids),
            )
            removed = conn.execute(
                sql.SQL("DELETE FROM {message} WHERE thread = %s AND message_id = ANY(%s)").format(
                    message=self._message
                ),
                (thread, ids),
            ).rowcount
        with self._stats_lock:
            self._stats.pop(thread, None)
        return int(removed)

    def close(self) -> None:
        """Close the connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()


#: One message to insert: its position, its units with their tokens, its fingerprint.
_Entry = tuple[int, list[tuple[Unit, int]], str | None]


def _first_of_each(messages: Sequence[MessageEntry]) -> dict[str, _Entry]:
    """``{clean message id: (position, [(unit, tokens)], fingerprint)}``, the first entry
    of each id."""
    first: dict[str, _Entry] = {}
    for entry in messages:
        position, message_id, units = entry[:3]
        key = _clean(message_id)
        if key not in first:
            first[key] = (
                position,
                [(unit, _tokens(unit)) for unit in units],
                entry_fingerprint(entry),
            )
    return first


def _message_params(thread: str, first: dict[str, _Entry]) -> tuple[Any, ...]:
    """The parameters of the message insert: thread, then ids, positions, unit and token
    counts and fingerprints (one array each, in the order of ``first``)."""
    ids = list(first)
    return (
        thread,
        ids,
        [first[m][0] for m in ids],
        [len(first[m][1]) for m in ids],
        [sum(tokens for _, tokens in first[m][1]) for m in ids],
        [first[m][2] for m in ids],
    )


def _new_unit_rows(
    thread: str, new: Sequence[str], first: dict[str, _Entry]
) -> Iterator[tuple[Any, ...]]:
    """The unit rows of the ``new`` messages, by message position (COPY order)."""
    for message_id in sorted(new, key=lambda m: first[m][0]):
        for unit, tokens in first[message_id][1]:
            yield _unit_row(thread, unit, tokens)


def _scored_terms(terms: Sequence[str], kept: list[str], postings: dict[str, int]) -> list[str]:
    """The ``kept`` terms, then every other term of ``terms`` that occurs in the thread.

    Like SQLite: only rows with one of the rarer (kept) terms are scored, by every term.
    """
    return [
        *kept,
        *(t for t in dict.fromkeys(terms) if t not in kept and postings.get(t)),
    ]


def _search_params(
    thread: str, limit: int, stats: _ThreadStats, scored: Sequence[str]
) -> dict[str, Any]:
    """The search query's parameters: bm25 constants, then each term and its idf."""
    average = stats.tokens / stats.units if stats.units and stats.tokens else 1.0
    params: dict[str, Any] = {
        "thread": thread,
        "limit": int(limit),
        "c0": _K1 * (1 - _B),
        "c1": _K1 * _B / average,
        "boost": STATEMENT_BOOST,
    }
    for i, term in enumerate(scored):
        params[f"t{i}"] = _plain(term)
        params[f"w{i}"] = _idf(stats.units, stats.postings[term])
    return params


def _unit_row(thread: str, unit: Unit, tokens: int) -> tuple[Any, ...]:
    """The row of ``unit`` in the unit table (COPY order)."""
    return (
        thread,
        _clean(unit.message_id),
        unit.position,
        unit.part,
        _clean(unit.role),
        None if unit.tool is None else _clean(unit.tool),
        unit.start_line,
        unit.end_line,
        _clean(unit.text),
        _clean(unit.context),
        tokens,
        states_value(unit.text),
        _segmented(unit.text),
        _segmented(unit.context),
    )


def _tsquery(i: int) -> Composed:
    """The ``i``-th query term as a phrase query (the term is a bound parameter)."""
    from psycopg import sql

    return sql.SQL("phraseto_tsquery('english', {})").format(sql.Placeholder(f"t{i}"))


def _idf(units: int, matching: int) -> float:
    """bm25's inverse document frequency as FTS5 computes it (at least 1e-6)."""
    value = math.log((units - matching + 0.5) / (matching + 0.5)) if units > matching else 0.0
    return value if value > 0 else 1e-6


def _within_budget(postings: dict[str, int], terms: Sequence[str]) -> list[str]:
    # this module's MAX_RANKED_POSTINGS (tests lower it to exercise the bound)
    return terms_within_budget(postings, terms, budget=MAX_RANKED_POSTINGS)


__all__ = ["MAX_CACHED_THREADS", "STATS_TTL_S", "PostgresRecallIndex"]
