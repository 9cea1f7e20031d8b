"""SQLite FTS5 recall index (the embedded default), from the standard library.

One database holds every thread: ``recall_message`` records which message ids a thread
has indexed, with each message's fingerprint (primary key ``(thread, message_id)``, so a
message is indexed once even if two callers race), ``recall_unit`` holds the units and
``recall_fts`` is an FTS5 index over them (``porter unicode61`` tokenizer, ranked with
bm25). ``path=":memory:"`` keeps it in the process; a file path makes it durable across
restarts (WAL mode). A database written before fingerprints were kept gets the column
when it is opened; its messages keep a null fingerprint.

Chinese: FTS5 indexes a segmented copy of a unit's text and context
(`ctxpolicy.recall.segment.segment_text`: Han runs cut into space-separated words),
kept in ``recall_unit.search_text`` / ``search_context`` only where it differs (a unit
with Han characters); the FTS table reads its content through the view
``recall_unit_search``. English units are indexed exactly as before. The layout's
version is SQLite's ``user_version`` (`SCHEMA_VERSION`): a database of an older version
is brought up to date when it is opened (columns added, Chinese units segmented, the FTS
index rebuilt, in one transaction); one of a newer version is refused.

See docs/recall.md, "Backends".
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from ctxpolicy.recall.floor import COMMON_SHARE, MIN_COMMON_UNITS, distinctive_terms
from ctxpolicy.recall.index import (
    MAX_RANKED_POSTINGS,
    STATEMENT_BOOST,
    IndexedMessage,
    MessageEntry,
    RecallHit,
    RecallIndexVersionError,
    entry_fingerprint,
    terms_within_budget,
    unit_from_row,
)
from ctxpolicy.recall.segment import segment_text
from ctxpolicy.recall.units import states_value

#: Layout version stored as ``PRAGMA user_version``: 1 = segmented Chinese (the view
#: ``recall_unit_search`` as FTS content); 0 = before it (or a new, empty file).
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS recall_message (
    thread TEXT NOT NULL,
    message_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    fingerprint TEXT,
    PRIMARY KEY (thread, message_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS recall_unit (
    id INTEGER PRIMARY KEY,
    thread TEXT NOT NULL,
    message_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    part INTEGER NOT NULL,
    role TEXT NOT NULL,
    tool TEXT,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    context TEXT NOT NULL,
    statement INTEGER NOT NULL DEFAULT 0,
    search_text TEXT,
    search_context TEXT
);
CREATE INDEX IF NOT EXISTS recall_unit_message ON recall_unit (thread, message_id);
"""
#: What FTS5 indexes of a unit: the segmented copy where there is one (`SCHEMA_VERSION` 1).
_SEARCH_VIEW = """
CREATE VIEW IF NOT EXISTS recall_unit_search AS
SELECT id, coalesce(search_text, text) AS text, coalesce(search_context, context) AS context,
       coalesce(tool, '') AS tool, thread
FROM recall_unit
"""
_FTS = """
CREATE VIRTUAL TABLE recall_fts USING fts5(
    text, context, tool, thread UNINDEXED,
    content='recall_unit_search', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
)
"""
#: Most (thread, term) counts the relevance floor keeps (least recently used dropped).
THREAD_POSTINGS = 4096
#: bm25 column weights: the unit's own text counts most, its context and tool name less.
_WEIGHTS = (1.0, 0.3, 0.5)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def _check_version(path: str, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise RecallIndexVersionError(
            f"recall index {path!r} has layout version {version}; this ctxpolicy reads "
            f"version {SCHEMA_VERSION} and older: upgrade ctxpolicy"
        )


def _segmented(text: str) -> str | None:
    """The segmented copy of ``text`` to index, or None when it is the text itself."""
    segmented = segment_text(text)
    return None if segmented is text else segmented


def _match_expression(terms: Sequence[str]) -> str:
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class SQLiteRecallIndex:
    """A recall index in SQLite FTS5 (see the module docstring).

    Args:
        path: A database file (created if missing; its folder must exist), or
            ``":memory:"`` (the default) for an index that lives as long as this object.

    Safe to share between threads (one connection behind a lock).
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=10000")
        self._conn.executescript(_SCHEMA)
        self._add_fingerprints()
        self._upgrade()
        self._df: dict[str, tuple[int, int]] = {}
        # (thread, term) -> (units of the thread holding it, the thread's units then);
        # least recently used first, at most THREAD_POSTINGS entries
        self._thread_df: OrderedDict[tuple[str, str], tuple[int, int]] = OrderedDict()
        # thread -> its units, counted once, then kept up to date by this object's writes
        self._thread_units: OrderedDict[str, int] = OrderedDict()
        self._units = self._conn.execute("SELECT count(*) FROM recall_unit").fetchone()[0]

    def __repr__(self) -> str:
        return f"SQLiteRecallIndex(path={self.path!r})"

    def _add_fingerprints(self) -> None:
        """Give a database written before fingerprints were kept its ``fingerprint`` column.

        Its messages keep a null fingerprint: they match by id (see `HistorySync`).
        """
        conn = self._conn
        if "fingerprint" in _columns(conn, "recall_message"):
            return
        conn.execute("BEGIN IMMEDIATE")  # another process may be adding it right now
        try:
            if "fingerprint" not in _columns(conn, "recall_message"):
                conn.execute("ALTER TABLE recall_message ADD COLUMN fingerprint TEXT")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _upgrade(self) -> None:
        """Bring the layout to `SCHEMA_VERSION` (see the module docstring), once.

        Raises:
            RecallIndexVersionError: the file was written by a newer ctxpolicy.
        """
        conn = self._conn
        if self._version() == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")  # another process may be upgrading it right now
        try:
            version = self._version()
            _check_version(self.path, version)
            if version < SCHEMA_VERSION:
                self._segment_existing()
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _segment_existing(self) -> None:
        """Version 0 -> 1: segmented copies of the Chinese units, FTS over the view, rebuilt."""
        conn = self._conn
        columns = _columns(conn, "recall_unit")
        for column in ("search_text", "search_context"):
            if column not in columns:
                conn.execute(f"ALTER TABLE recall_unit ADD COLUMN {column} TEXT")
        rows = conn.execute("SELECT id, text, context FROM recall_unit").fetchall()
        for row, text, context in rows:
            search_text, search_context = _segmented(text), _segmented(context)
            if search_text is not None or search_context is not None:
                conn.execute(
                    "UPDATE recall_unit SET search_text = ?, search_context = ? WHERE id = ?",
                    (search_text, search_context, row),
                )
        conn.execute("DROP TABLE IF EXISTS recall_fts")
        conn.execute(_SEARCH_VIEW)
        conn.execute(_FTS)
        conn.execute("INSERT INTO recall_fts (recall_fts) VALUES ('rebuild')")

    def indexed_messages(self, thread: str) -> list[IndexedMessage]:
        """``(position, message id, fingerprint)`` of every message indexed for ``thread``,
        by position."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT position, message_id, fingerprint FROM recall_message "
                "WHERE thread = ? ORDER BY position",
                (thread,),
            ).fetchall()
        return [(int(p), str(m), None if f is None else str(f)) for p, m, f in rows]

    def add_messages(self, thread: str, messages: Sequence[MessageEntry]) -> int:
        """Index new messages of ``thread`` in one transaction; known ids are skipped.

        Returns:
            How many messages were new.
        """
        if not messages:
            return 0
        added = 0
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for entry in messages:
                    position, message_id, units = entry[:3]
                    cursor = conn.execute(
                        "INSERT OR IGNORE INTO recall_message "
                        "(thread, message_id, position, fingerprint) VALUES (?, ?, ?, ?)",
                        (thread, message_id, position, entry_fingerprint(entry)),
                    )
                    if cursor.rowcount != 1:
                        continue
                    added += 1
                    for unit in units:
                        search_text = _segmented(unit.text)
                        search_context = _segmented(unit.context)
                        row = conn.execute(
                            "INSERT INTO recall_unit (thread, message_id, position, part, role, "
                            "tool, start_line, end_line, text, context, statement, search_text, "
                            "search_context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (
                                thread,
                                unit.message_id,
                                unit.position,
                                unit.part,
                                unit.role,
                                unit.tool,
                                unit.start_line,
                                unit.end_line,
                                unit.text,
                                unit.context,
                                states_value(unit.text),
                                search_text,
                                search_context,
                            ),
                        ).lastrowid
                        conn.execute(
                            "INSERT INTO recall_fts (rowid, text, context, tool, thread) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (
                                row,
                                unit.text if search_text is None else search_text,
                                unit.context if search_context is None else search_context,
                                unit.tool or "",
                                thread,
                            ),
                        )
                        self._units += 1
                        if thread in self._thread_units:
                            self._thread_units[thread] += 1
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                self._thread_units.pop(thread, None)  # counted again when next needed
                raise
        return added

    def _postings(self, term: str) -> int:
        """Units (of every thread) that contain ``term``; cached while the index grows < 10 %."""
        cached = self._df.get(term)
        if cached is not None and self._units <= cached[1] * 1.1 + 100:
            return cached[0]
        (count,) = self._conn.execute(
            "SELECT count(*) FROM recall_fts WHERE recall_fts MATCH ?",
            (_match_expression([term]),),
        ).fetchone()
        self._df[term] = (int(count), self._units)
        return int(count)

    def ranked_terms(self, terms: Sequence[str]) -> list[str]:
        """``terms`` that one search ranks: rarest first, within `MAX_RANKED_POSTINGS`.

        The rarest term is always kept; a term that matches nothing is dropped.
        """
        with self._lock:
            postings = {term: self._postings(term) for term in dict.fromkeys(terms)}
        return terms_within_budget(postings, terms, budget=MAX_RANKED_POSTINGS)

    def _units_of(self, thread: str) -> int:
        """The units of ``thread`` (lock held): counted on first use, then kept up to date
        by this object's own writes (like the global count the rare terms use)."""
        units = self._thread_units.get(thread)
        if units is None:
            (units,) = self._conn.execute(
                "SELECT count(*) FROM recall_unit WHERE thread = ?", (thread,)
            ).fetchone()
            units = int(units)
            if len(self._thread_units) >= THREAD_POSTINGS:
                self._thread_units.popitem(last=False)
        self._thread_units[thread] = units
        self._thread_units.move_to_end(thread)
        return units

    def _thread_postings(self, thread: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """``(units of thread, {term: units of thread holding it})``: what the relevance
        floor reads. A term held by few units of the whole index needs no count of its own
        (the thread holds no more); a thread's count is cached while it grows < 10 %."""
        with self._lock:
            units = self._units_of(thread)
            limit = max(COMMON_SHARE * units, MIN_COMMON_UNITS - 1)
            counts: dict[str, int] = {}
            for term in terms:
                total = self._postings(term)
                if total <= limit or units >= self._units:  # an upper bound, or exact
                    counts[term] = total
                    continue
                key = (thread, term)
                cached = self._thread_df.get(key)
                if cached is not None and units <= cached[1] * 1.1:
                    self._thread_df.move_to_end(key)
                    counts[term] = cached[0]
                    continue
                (count,) = self._conn.execute(
                    "SELECT count(*) FROM recall_fts WHERE recall_fts MATCH ? AND thread = ?",
                    (_match_expression([term]), thread),
                ).fetchone()
                counts[term] = int(count)
                self._thread_df[key] = (int(count), units)
                if len(self._thread_df) > THREAD_POSTINGS:
                    self._thread_df.popitem(last=False)
        return units, counts

    def forget_messages(self, thread: str, message_ids: Sequence[str]) -> int:
        """Remove messages (and their units) from ``thread``: an abandoned branch.

        Returns:
            How many messages were removed.
        """
        if not message_ids:
            return 0
        removed = 0
        with self._lock:
            for key in [k for k in self._thread_df if k[0] == thread]:
                del self._thread_df[key]  # counts of a branch that is going away
            self._thread_units.pop(thread, None)
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for message_id in message_ids:
                    rows = conn.execute(
                        "SELECT id, text, context, tool FROM recall_unit_search "
                        "WHERE thread = ? AND id IN (SELECT id FROM recall_unit "
                        "WHERE thread = ? AND message_id = ?)",
                        (thread, thread, message_id),
                    ).fetchall()
                    for row, text, context, tool in rows:
                        conn.execute(
                            "INSERT INTO recall_fts (recall_fts, rowid, text, context, tool, "
                            "thread) VALUES ('delete', ?, ?, ?, ?, ?)",
                            (row, text, context, tool or "", thread),
                        )
                        conn.execute("DELETE FROM recall_unit WHERE id = ?", (row,))
                        self._units -= 1
                        if thread in self._thread_units:
                            self._thread_units[thread] -= 1
                    removed += conn.execute(
                        "DELETE FROM recall_message WHERE thread = ? AND message_id = ?",
                        (thread, message_id),
                    ).rowcount
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return removed

    def search(
        self, thread: str, terms: Sequence[str], *, limit: int, floor: bool = False
    ) -> list[RecallHit]:
        """The best ``limit`` units of ``thread`` matching any of ``terms`` (bm25), best first.

        A unit that states a value (`ctxpolicy.recall.units.states_value`, decided when
        it was indexed) has its score multiplied by `STATEMENT_BOOST`.

        Every term counts in the score, but only rows that contain one of the rarer
        terms are scored: ``(rare OR ...) AND (every term OR ...)``. With ``floor`` a
        term common in the thread is never one of them (the relevance floor,
        `ctxpolicy.recall.floor`): a row holding only common terms is not found.
        """
        terms = list(dict.fromkeys(terms))
        if not terms or limit <= 0:
            return []
        if floor:
            units, postings = self._thread_postings(thread, terms)
            allowed = distinctive_terms(units, postings, terms)
            rare = terms_within_budget(postings, allowed, budget=MAX_RANKED_POSTINGS)
        else:
            rare = self.ranked_terms(terms) if len(terms) > 1 else terms
        if not rare:
            return []
        expression = _match_expression(rare)
        if len(rare) < len(terms):
            expression = f"({expression}) AND ({_match_expression(terms)})"
        sql = (
            "SELECT u.message_id, u.position, u.part, u.role, u.tool, u.start_line, "
            "u.end_line, u.text, u.context, u.statement, "
            "bm25(recall_fts, ?, ?, ?) * (CASE WHEN u.statement THEN ? ELSE 1.0 END) AS score "
            "FROM recall_fts JOIN recall_unit AS u ON u.id = recall_fts.rowid "
            "WHERE recall_fts MATCH ? AND u.thread = ? ORDER BY score LIMIT ?"
        )
        with self._lock:
            rows = self._conn.execute(
                sql, (*_WEIGHTS, STATEMENT_BOOST, expression, thread, limit)
            ).fetchall()
        return [RecallHit(unit_from_row(row), -float(row[-1])) for row in rows]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


__all__ = ["SCHEMA_VERSION", "SQLiteRecallIndex"]
