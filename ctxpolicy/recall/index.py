"""The search-index protocol of recall, and what every backend shares.

A `RecallIndex` stores the units of each session (thread) and answers ranked
full-text queries over them. Backends: `ctxpolicy.recall.sqlite.SQLiteRecallIndex`
(SQLite FTS5 with bm25, in memory or in a file; the embedded default) and
`ctxpolicy.recall.postgres.PostgresRecallIndex` (PostgreSQL full-text search, for
several processes or machines). Both keep, per thread, which message ids they have
indexed, so indexing takes only messages it has not seen, and a unique key on
``(thread, message id)`` makes a second indexing of the same message a no-op, even
when two processes race.

See docs/recall.md, "Index".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ctxpolicy.errors import CtxPolicyError
from ctxpolicy.recall.segment import ZH_STOPWORDS, has_han, iter_words
from ctxpolicy.recall.units import Unit

#: Words too common to help a search (English function words and question words).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could did didn do does doesn doing
    don down during each few for from further had hadn has hasn have haven having he her
    here hers herself him himself his how i if in into is isn it its itself just let me
    more most my myself no nor not now of off on once only or other ought our ours
    ourselves out over own same shall she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up upon
    us very was wasn we were weren what when where which while who whom why will with
    won would you your yours yourself yourselves tell know please remind remember again
    said say says told ask asked
    """.split()  # noqa: SIM905 - a word list reads best as text
)
#: Words a query drops: `STOPWORDS` and their Chinese counterparts.
QUERY_STOPWORDS = STOPWORDS | ZH_STOPWORDS
#: Most index postings one search ranks: bm25 costs time per matching row, so only rows
#: holding one of the rarer terms are ranked, the rarest terms first up to this many
#: rows (every term still counts in their score).
MAX_RANKED_POSTINGS = 6_000
#: The columns a backend's search returns for a unit, in this order (`unit_from_row`).
UNIT_COLUMNS = (
    "message_id",
    "position",
    "part",
    "role",
    "tool",
    "start_line",
    "end_line",
    "text",
    "context",
    "statement",
)

#: Score factor of a unit that states a value (`ctxpolicy.recall.units.states_value`):
#: a fact's statement ranks above the many lines that only mention its subject.
STATEMENT_BOOST = 1.5


class RecallIndexVersionError(CtxPolicyError):
    """A stored recall index was written by a newer ctxpolicy (a layout this one cannot read)."""


def query_terms(text: str, *, limit: int = 32) -> list[str]:
    """The search terms of a query: lower-case words, stopwords and repeats removed.

    Han runs are cut into words the way the indexes cut them
    (`ctxpolicy.recall.segment`). One-character words are dropped, except digits and Han
    words: a single Han character is often a word of its own (表, 天, 钱); the common
    ones are stopwords.

    Args:
        text: The query text.
        limit: Most terms kept (the first ones).
    """
    seen: dict[str, None] = {}
    for word in iter_words(text):
        if word in QUERY_STOPWORDS or (len(word) < 2 and not (word.isdigit() or has_han(word))):
            continue
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def terms_within_budget(
    postings: Mapping[str, int], terms: Sequence[str], *, budget: int = MAX_RANKED_POSTINGS
) -> list[str]:
    """The ``terms`` whose rows one search ranks: rarest first, within ``budget`` postings.

    A term that matches nothing is dropped; the rarest matching term is always kept.
    Both backends decide this here, each from its own posting counts.
    """
    counted = sorted((postings.get(t, 0), i, t) for i, t in enumerate(dict.fromkeys(terms)))
    kept: list[str] = []
    total = 0
    for count, _, term in counted:
        if count == 0:
            continue
        if kept and total + count > budget:
            break
        kept.append(term)
        total += count
    return kept


def unit_from_row(row: Sequence[Any]) -> Unit:
    """A `Unit` from a search row whose first columns are `UNIT_COLUMNS`."""
    message_id, position, part, role, tool, start, end, text, context, statement = row[:10]
    return Unit(
        str(message_id),
        int(position),
        int(part),
        str(role),
        tool,
        int(start),
        int(end),
        str(text),
        str(context),
        bool(statement),
    )


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One unit found by a search.

    Attributes:
        unit: The unit.
        score: The backend's relevance score (higher is better; bm25 scores are negated
            so that higher is better everywhere).
        source: Where it was found (``session`` or a memory tier such as ``memory:l4``).
    """

    unit: Unit
    score: float
    source: str = "session"


#: What an index records of one message: ``(position, message id, fingerprint)``; the
#: fingerprint (`ctxpolicy.recall.ingest.message_fingerprint`) is None where none was
#: recorded (an index written before fingerprints were kept, a memory item).
IndexedMessage = tuple[int, str, str | None]
#: One message to index: ``(position, message id, units, fingerprint)``, or without
#: the fingerprint (``(position, message id, units)``: recorded as None).
MessageEntry = tuple[int, str, Sequence[Unit], str | None] | tuple[int, str, Sequence[Unit]]


def entry_fingerprint(entry: MessageEntry) -> str | None:
    """The fingerprint of a `MessageEntry` (None when it has none)."""
    return entry[3] if len(entry) == 4 else None


@runtime_checkable
class RecallIndex(Protocol):
    """A per-thread full-text index of units (see the module docstring)."""

    def indexed_messages(self, thread: str) -> list[IndexedMessage]:
        """``(position, message id, fingerprint)`` of every message indexed for ``thread``,
        by position (the fingerprint is None where none was recorded)."""
        ...

    def add_messages(self, thread: str, messages: Sequence[MessageEntry]) -> int:
        """Index ``(position, message id, units, fingerprint)`` entries (the fingerprint
        may be left out); ids already indexed are skipped.

        Returns:
            How many messages were new.
        """
        ...

    def search(
        self, thread: str, terms: Sequence[str], *, limit: int, floor: bool = False
    ) -> list[RecallHit]:
        """The best ``limit`` units of ``thread`` matching any of ``terms``, best first;
        with ``floor``, none that holds only terms common in the thread
        (`ctxpolicy.recall.floor`; recall asks for it, memory does not)."""
        ...

    def forget_messages(self, thread: str, message_ids: Sequence[str]) -> int:
        """Remove messages of an abandoned branch (and their units) from ``thread``."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


__all__ = [
    "MAX_RANKED_POSTINGS",
    "QUERY_STOPWORDS",
    "STATEMENT_BOOST",
    "STOPWORDS",
    "UNIT_COLUMNS",
    "IndexedMessage",
    "MessageEntry",
    "RecallHit",
    "RecallIndex",
    "RecallIndexVersionError",
    "entry_fingerprint",
    "query_terms",
    "terms_within_budget",
    "unit_from_row",
]
