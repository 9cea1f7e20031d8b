"""Why memory's L4 default is `LocalVectorStore` and not langchain-core's `InMemoryVectorStore`.

Both stores get the same 10,000 texts (30 words each from a 5,000-word vocabulary, seeded)
and the same 30 six-word queries, embedded by the same `HashingEmbeddings` (4,096
dimensions). `InMemoryVectorStore` scores every stored vector on each search (dense cosine,
numpy); `LocalVectorStore` keeps sparse postings and scores only the documents that share a
feature with the query. Run: ``.venv/bin/python benchmarks/vector_store.py`` (about 1 minute).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from ctxpolicy.memory.vectors import HashingEmbeddings, LocalVectorStore


def main() -> None:
    rng = random.Random(7)
    words = [f"w{i}" for i in range(5000)]
    texts = [" ".join(rng.choices(words, k=30)) for _ in range(10_000)]
    queries = [" ".join(rng.choices(words, k=6)) for _ in range(30)]
    embeddings = HashingEmbeddings()
    stores: dict[str, VectorStore] = {
        "LocalVectorStore": LocalVectorStore(embeddings),
        "InMemoryVectorStore": InMemoryVectorStore(embeddings),
    }
    medians = {}
    for name, store in stores.items():
        started = time.perf_counter()
        store.add_texts(texts)
        added = time.perf_counter() - started
        times = []
        for query in queries:
            started = time.perf_counter()
            store.similarity_search(query, k=5)
            times.append(time.perf_counter() - started)
        medians[name] = statistics.median(times)
        print(f"{name:20} add 10,000: {added:.2f} s   search p50: {medians[name] * 1000:.2f} ms")
    ratio = medians["InMemoryVectorStore"] / medians["LocalVectorStore"]
    print(f"search InMemoryVectorStore / LocalVectorStore: {ratio:.0f}x")


if __name__ == "__main__":
    main()
