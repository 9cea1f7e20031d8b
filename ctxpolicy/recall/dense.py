"""Optional dense ranking for recall, through any langchain-core ``Embeddings``.

When a recall spec names an ``embeddings`` service, each thread also keeps its units'
vectors (embedded once, in batches, as the units are indexed) and a query is ranked
by cosine similarity as well; `ctxpolicy.recall.recaller.fuse_rankings` fuses that
ranking with bm25 (reciprocal rank fusion). Vectors live in the process (numpy when it
is installed, plain Python otherwise); the bm25 index is what persists.

See docs/recall.md, "Dense retrieval".
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxpolicy.recall.index import RecallHit
from ctxpolicy.recall.ingest import message_key
from ctxpolicy.recall.units import Unit, UnitSize, split_message

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.messages import BaseMessage

#: Units embedded per ``embed_documents`` call.
BATCH = 256


def _normalize(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class DenseUnits:
    """The units of one thread with their embedding vectors.

    Args:
        embeddings: A langchain-core ``Embeddings``.
        size: How units are split (the same as the bm25 index's).
    """

    def __init__(self, embeddings: Embeddings, *, size: UnitSize | None = None) -> None:
        self.embeddings = embeddings
        self.size = size or UnitSize()
        self.units: list[Unit] = []
        self._vectors: list[list[float]] = []
        self._matrix: Any = None
        self._seen: set[str] = set()
        self._tail: tuple[int, str] | None = None  # (length, key of the last message) synced
        self._lock = threading.Lock()

    def sync(self, history: Sequence[BaseMessage]) -> int:
        """Embed the units of messages not seen yet; returns how many units were added."""
        with self._lock:
            fresh: list[Unit] = []
            start = 0
            if self._tail is not None:
                length, key = self._tail
                if length <= len(history) and message_key(history[length - 1], length - 1) == key:
                    start = length  # the usual case: only the messages after the last sync
            for position in range(start, len(history)):
                message = history[position]
                key = message_key(message, position)
                if key in self._seen:
                    continue
                self._seen.add(key)
                fresh.extend(
                    split_message(message, message_id=key, position=position, size=self.size)
                )
            if history:
                self._tail = (len(history), message_key(history[-1], len(history) - 1))
            for start in range(0, len(fresh), BATCH):
                batch = fresh[start : start + BATCH]
                vectors = self.embeddings.embed_documents([u.text for u in batch])
                self.units.extend(batch)
                self._vectors.extend(_normalize(v) for v in vectors)
            if fresh:
                self._matrix = None
            return len(fresh)

    def _scores(self, query_vector: list[float]) -> list[float]:
        try:
            import numpy as np
        except ImportError:  # plain Python: fine for the sizes a test or a small app has
            return [
                sum(a * b for a, b in zip(v, query_vector, strict=False)) for v in self._vectors
            ]
        if self._matrix is None:
            self._matrix = np.asarray(self._vectors, dtype=np.float32)
        result: list[float] = (self._matrix @ np.asarray(query_vector, dtype=np.float32)).tolist()
        return result

    def search(self, query: str, *, limit: int) -> list[RecallHit]:
        """The ``limit`` units most similar to ``query``, best first."""
        if not query.strip() or not self.units:
            return []
        vector = _normalize(self.embeddings.embed_query(query))
        with self._lock:
            scores = self._scores(vector)
            best = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:limit]
            return [RecallHit(self.units[i], float(scores[i])) for i in best]


__all__ = ["DenseUnits"]
