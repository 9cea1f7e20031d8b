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
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ctxpolicy.recall.index import RecallHit
from ctxpolicy.recall.ingest import message_version
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

    A message is embedded once per version (its key and `message_fingerprint`): a
    message edited under its id is embedded again and the units of the version it
    replaced are no longer found.
    """

    def __init__(self, embeddings: Embeddings, *, size: UnitSize | None = None) -> None:
        self.embeddings = embeddings
        self.size = size or UnitSize()
        self.units: list[Unit] = []
        self._np = _numpy()
        # numpy: unit-length float32 rows, capacity doubling; plain Python: lists of floats
        self._matrix: Any = None
        self._vectors: list[list[float]] = []
        # message key: (fingerprint of the version embedded last, its embedding number,
        # how many units it has); each unit's embedding number; units of older versions
        self._latest: dict[str, tuple[str, int, int]] = {}
        self._embedding: list[int] = []
        self._superseded = 0
        self._lock = threading.Lock()

    def _start(self, history: Sequence[BaseMessage]) -> int:
        """Position after the newest message already embedded (walking back from the end)."""
        position = len(history) - 1
        while position >= 0 and not self._embedded(history[position], position):
            position -= 1
        return position + 1

    def _embedded(self, message: BaseMessage, position: int) -> bool:
        """Whether what ``message`` says now is what was embedded last under its key."""
        key, fingerprint = message_version(message, position)
        latest = self._latest.get(key)
        return latest is not None and latest[0] == fingerprint

    def _append(self, vectors: Sequence[Sequence[float]]) -> None:
        np = self._np
        if np is None:
            self._vectors.extend(_normalize(v) for v in vectors)
            return
        rows = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = rows / np.where(norms == 0, 1.0, norms)
        count = len(self.units)  # rows already stored
        needed = count + len(rows)
        if self._matrix is None or needed > self._matrix.shape[0]:
            grown = np.zeros((max(1024, 2 * needed), rows.shape[1]), dtype=np.float32)
            if self._matrix is not None:
                grown[:count] = self._matrix[:count]
            self._matrix = grown
        self._matrix[count:needed] = rows

    def sync(self, history: Sequence[BaseMessage]) -> int:
        """Embed the units of messages not seen yet; returns how many units were added.

        Cost follows the new messages: the walk back stops at the newest one already
        embedded (messages only ever append, or a branch replaces the newest ones).
        """
        with self._lock:
            return self._embed(history, range(self._start(history), len(history)))

    def reembed(self, history: Sequence[BaseMessage], position: int) -> int:
        """Embed the message at ``position`` again if it changed (an edit under its id that
        `sync` did not reach); returns how many units were added."""
        with self._lock:
            return self._embed(history, (position,))

    def _embed(self, history: Sequence[BaseMessage], positions: Iterable[int]) -> int:
        fresh: list[Unit] = []
        embedding: list[int] = []
        for position in positions:
            message = history[position]
            key, fingerprint = message_version(message, position)
            latest = self._latest.get(key)
            if latest is not None and latest[0] == fingerprint:
                continue
            units = split_message(message, message_id=key, position=position, size=self.size)
            self._superseded += 0 if latest is None else latest[2]
            number = 0 if latest is None else latest[1] + 1
            self._latest[key] = (fingerprint, number, len(units))
            fresh.extend(units)
            embedding.extend([number] * len(units))
        for start in range(0, len(fresh), BATCH):
            batch = fresh[start : start + BATCH]
            self._append(self.embeddings.embed_documents([u.text for u in batch]))
            self.units.extend(batch)
            self._embedding.extend(embedding[start : start + BATCH])
        return len(fresh)

    def _current(self, i: int) -> bool:
        """Whether unit ``i`` belongs to the version of its message embedded last."""
        return self._latest[self.units[i].message_id][1] == self._embedding[i]

    def _best(self, query_vector: list[float], limit: int) -> list[tuple[int, float]]:
        np = self._np
        if np is None:  # plain Python: fine for the sizes a test or a small app has
            scores = [
                sum(a * b for a, b in zip(v, query_vector, strict=False)) for v in self._vectors
            ]
            best = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:limit]
            return [(i, scores[i]) for i in best]
        matrix = self._matrix[: len(self.units)]
        scores = matrix @ np.asarray(query_vector, dtype=np.float32)
        if limit < len(scores):
            top = np.argpartition(-scores, limit)[:limit]
        else:
            top = np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in top]

    def search(self, query: str, *, limit: int) -> list[RecallHit]:
        """The ``limit`` units most similar to ``query``, best first."""
        if not query.strip() or not self.units or limit <= 0:
            return []
        vector = _normalize(self.embeddings.embed_query(query))
        with self._lock:
            best = self._best(vector, limit + self._superseded)
            hits = [RecallHit(self.units[i], score) for i, score in best if self._current(i)]
        return hits[:limit]


def _numpy() -> Any:
    try:
        import numpy as np
    except ImportError:
        return None
    return np


__all__ = ["DenseUnits"]
