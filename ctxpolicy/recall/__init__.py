"""Recall: the units of a long session that best answer this call's query.

A ``recall`` collector fills a block layer (e.g. ``recall__context``) with units
(lines, paragraphs, JSON records) of the session that the history layer did not keep,
found by a real search engine: SQLite FTS5 (embedded default, in memory or in a file)
or PostgreSQL full-text search (several processes or machines), optionally fused with
a dense ranking from any langchain-core ``Embeddings``. See docs/recall.md.
"""

from ctxpolicy.recall.index import IndexedMessage, MessageEntry, RecallHit, RecallIndex, query_terms
from ctxpolicy.recall.ingest import HistorySync, message_fingerprint, message_key, thread_key
from ctxpolicy.recall.recaller import Recaller, RecallRequest, RecallResult, open_index
from ctxpolicy.recall.select import RecalledUnit, select_units
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import Unit, UnitSize, split_message, split_text

__all__ = [
    "HistorySync",
    "IndexedMessage",
    "MessageEntry",
    "RecallHit",
    "RecallIndex",
    "RecallRequest",
    "RecallResult",
    "RecalledUnit",
    "Recaller",
    "SQLiteRecallIndex",
    "Unit",
    "UnitSize",
    "message_fingerprint",
    "message_key",
    "open_index",
    "query_terms",
    "select_units",
    "split_message",
    "split_text",
    "thread_key",
]
