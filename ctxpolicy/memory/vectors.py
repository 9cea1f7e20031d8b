"""The offline L4 default: hashing embeddings and a small pure-Python vector store.

Both implement langchain-core's interfaces (`Embeddings`, `VectorStore`), so any real
embedding model or vector store plugs into `TieredMemory(vector_store=...)` instead.
Nothing here downloads a model or needs numpy.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddings(Embeddings):
    """Deterministic bag-of-words embeddings (the hashing trick), L2-normalized.

    Each lower-cased word (and, for CJK text, each character) is hashed with BLAKE2b to
    one of ``size`` dimensions with a sign. Same text, same vector, on every machine.

    Args:
        size: Number of dimensions (>= 16).

    Raises:
        ValueError: ``size`` < 16.
    """

    def __init__(self, *, size: int = 4096) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 16:
            raise ValueError(f"size must be an integer >= 16, got {size!r}")
        self.size = size

    def _features(self, text: str) -> list[str]:
        words: list[str] = []
        for word in _WORD.findall(text.lower()):
            if word.isascii():
                words.append(word)
            else:
                words.extend(word)
        return words

    def embed_sparse(self, text: str) -> dict[int, float]:
        """The non-zero dimensions of the vector of ``text``."""
        counts: dict[int, float] = {}
        for word in self._features(text):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            number = int.from_bytes(digest, "big")
            index = number % self.size
            counts[index] = counts.get(index, 0.0) + (1.0 if number >> 63 else -1.0)
        norm = math.sqrt(sum(v * v for v in counts.values()))
        return {i: v / norm for i, v in counts.items() if v} if norm else {}

    def embed_query(self, text: str) -> list[float]:
        """The vector of ``text``."""
        vector = [0.0] * self.size
        for index, value in self.embed_sparse(text).items():
            vector[index] = value
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The vectors of ``texts``."""
        return [self.embed_query(text) for text in texts]


class LocalVectorStore(VectorStore):
    """An in-process vector store: cosine similarity over sparse vectors, inverted index.

    Search scores only documents that share a non-zero dimension with the query. With
    ``max_postings`` (the default), each query dimension looks at its ``max_postings``
    most recently added documents only, so a search costs at most
    ``query dimensions * max_postings`` however large the store grows: exact for
    distinctive words, recency-biased for words found in more documents than that.
    ``max_postings=None`` scores every matching document (exact cosine top-k).

    Args:
        embedding: Any langchain-core `Embeddings`.
        max_postings: Documents looked at per query dimension (newest first), or None.

    Raises:
        ValueError: ``max_postings`` is not None or an integer >= 1.
    """

    def __init__(self, embedding: Embeddings, *, max_postings: int | None = 1024) -> None:
        if max_postings is not None and (
            isinstance(max_postings, bool) or not isinstance(max_postings, int) or max_postings < 1
        ):
            raise ValueError(f"max_postings must be None or an integer >= 1, got {max_postings!r}")
        self._embedding = embedding
        self._max_postings = max_postings
        self._docs: dict[str, Document] = {}
        self._vectors: dict[str, dict[int, float]] = {}
        # dimension -> {document id: its weight in that dimension}, oldest first
        self._postings: dict[int, dict[str, float]] = {}

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model."""
        return self._embedding

    def __len__(self) -> int:
        return len(self._docs)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,  # noqa: ARG002  # VectorStore signature
    ) -> list[str]:
        """Embed and store ``texts`` (re-adding an id replaces that document)."""
        text_list = list(texts)
        metas = metadatas or [{} for _ in text_list]
        doc_ids = ids or [uuid.uuid4().hex for _ in text_list]
        if not len(metas) == len(doc_ids) == len(text_list):
            raise ValueError("texts, metadatas and ids must have the same length")
        vectors = self._embed_sparse_documents(text_list)
        for doc_id, text, meta, sparse in zip(doc_ids, text_list, metas, vectors, strict=True):
            self._remove(doc_id)
            self._docs[doc_id] = Document(page_content=text, metadata=dict(meta), id=doc_id)
            self._vectors[doc_id] = sparse
            for dim, value in sparse.items():
                self._postings.setdefault(dim, {})[doc_id] = value
        return doc_ids

    def _embed_sparse_documents(self, texts: list[str]) -> list[dict[int, float]]:
        if isinstance(self._embedding, HashingEmbeddings):
            return [self._embedding.embed_sparse(text) for text in texts]
        vectors = self._embedding.embed_documents(texts)
        return [{i: v for i, v in enumerate(vector) if v} for vector in vectors]

    def _embed_sparse_query(self, text: str) -> dict[int, float]:
        if isinstance(self._embedding, HashingEmbeddings):
            return self._embedding.embed_sparse(text)
        return {i: v for i, v in enumerate(self._embedding.embed_query(text)) if v}

    def _remove(self, doc_id: str) -> bool:
        sparse = self._vectors.pop(doc_id, None)
        if sparse is None:
            return False
        del self._docs[doc_id]
        for dim in sparse:
            posting = self._postings[dim]
            posting.pop(doc_id, None)
            if not posting:
                del self._postings[dim]
        return True

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:  # noqa: ARG002
        """Remove documents by id (all when ``ids`` is None)."""
        if ids is None:
            self._docs.clear()
            self._vectors.clear()
            self._postings.clear()
            return True
        removed = [self._remove(doc_id) for doc_id in ids]
        return any(removed)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents with these ids (unknown ids are left out)."""
        return [self._docs[i] for i in ids if i in self._docs]

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        **kwargs: Any,  # noqa: ARG002
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents most similar to ``query`` with their cosine scores."""
        if k <= 0:
            return []
        query_vec = self._embed_sparse_query(query)
        scores: dict[str, float] = {}
        get = scores.get
        postings = self._postings
        limit = self._max_postings
        for dim, weight in query_vec.items():
            posting = postings.get(dim)
            if not posting:
                continue
            newest = itertools.islice(reversed(posting.items()), limit)
            for doc_id, value in newest:
                scores[doc_id] = get(doc_id, 0.0) + weight * value
        best = heapq.nlargest(k, ((score, doc_id) for doc_id, score in scores.items() if score > 0))
        return [(self._docs[doc_id], score) for score, doc_id in best]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` documents most similar to ``query``."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def _select_relevance_score_fn(self) -> Any:
        return lambda score: score

    def all_documents(self) -> list[Document]:
        """Every stored document, in insertion order."""
        return list(self._docs.values())

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> LocalVectorStore:
        """A new store holding ``texts``."""
        store = cls(embedding, max_postings=kwargs.get("max_postings", 1024))
        store.add_texts(texts, metadatas, ids=ids)
        return store


def default_vector_store() -> LocalVectorStore:
    """The offline default L4 index: `LocalVectorStore` over `HashingEmbeddings`."""
    return LocalVectorStore(HashingEmbeddings())
