"""A ``memory__context`` layer over tiered memory: compose time against N.

Target (issue 8): a 10,000-item memory layer composes in time independent of N (the
history length, as in every other target). One `PolicyEngine` (8,000-token window, a
``memory`` collector with the ``balanced`` strategy taking half of it, the history and a
runtime query) composes with the same 10,000-item `TieredMemory` and a history of
N = 100 / 1,000 / 10,000 messages (``workload.py``), interleaved in every repetition;
the figure is the median per N and the paired ratio to N = 100.

Also measured (not a target): the same layer over memories of 1,000 / 3,000 / 10,000
items without history. Tiered memory bounds what a compose reads: L1/L2/L3 are
fixed-size windows and the L4 search scores at most ``max_postings`` (1,024) documents
per query dimension, so that cost grows until the posting lists of the query's words are
full and then stays flat.

Run through ``benchmarks/run.py`` (``make bench``); ``run(quick=...)`` returns a dict.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import _policy, interaction
from workload import make_history

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.memory import TieredMemory

SIZES = (1_000, 3_000, 10_000)
HISTORY_SIZES = (100, 1_000, 10_000)
QUERY = "why does the payment retries module time out?"


def _memory(n_items: int) -> TieredMemory:
    memory = TieredMemory()
    added = 0
    i = 0
    while added < n_items:
        for message in interaction(i):
            if added < n_items:
                memory.add_message(message)
                added += 1
        i += 1
    return memory


def _interleaved(cases: dict[int, Any], repeats: int) -> dict[int, list[float]]:
    """Milliseconds of every case per repetition, the order alternating."""
    for fn in cases.values():  # warm-up: token counts cached, as in a running agent
        fn()
    keys = list(cases)
    samples: dict[int, list[float]] = {n: [] for n in keys}
    for rep in range(repeats):
        for n in keys if rep % 2 == 0 else list(reversed(keys)):
            gc.disable()
            try:
                start = time.perf_counter_ns()
                cases[n]()
                samples[n].append((time.perf_counter_ns() - start) / 1e6)
            finally:
                gc.enable()
    return samples


def _ratios(samples: dict[int, list[float]], base: int) -> dict[str, float]:
    return {
        str(n): statistics.median(a / b for a, b in zip(v, samples[base], strict=True))
        for n, v in samples.items()
    }


def run_history(*, quick: bool = False) -> dict[str, Any]:
    """The target: a 10,000-item memory layer beside histories of N messages."""
    policy = _policy("memory-history", window=8_000, history=True, strategy="balanced")
    engine = PolicyEngine(policy)
    memory = _memory(SIZES[-1])
    histories = {n: make_history(n) for n in HISTORY_SIZES}

    def case(n: int) -> Any:
        return lambda: engine.compose(
            system_prompt="You are an SRE agent.",
            query=QUERY,
            checkpoint_messages=histories[n],
            services={"memory": memory},
        )

    samples = _interleaved({n: case(n) for n in HISTORY_SIZES}, 5 if quick else 31)
    return {
        "memory_items": SIZES[-1],
        "history_sizes": list(HISTORY_SIZES),
        "median_ms": {str(n): statistics.median(v) for n, v in samples.items()},
        "ratio_to_smallest": _ratios(samples, HISTORY_SIZES[0]),
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Both measurements (see the module docstring)."""
    by_history = run_history(quick=quick)
    engine = PolicyEngine(_policy("memory-layer", window=8_000, history=False, strategy="balanced"))
    memories = {n: _memory(n) for n in SIZES}

    def compose(n: int) -> Any:
        return engine.compose(
            system_prompt="You are an SRE agent.", query=QUERY, services={"memory": memories[n]}
        )

    repeats = 5 if quick else 31
    samples = _interleaved({n: (lambda n=n: compose(n)) for n in SIZES}, repeats)
    return {
        "name": "memory_layer",
        "by_history": by_history,
        "sizes": list(SIZES),
        "repeats": repeats,
        "median_ms": {str(n): statistics.median(v) for n, v in samples.items()},
        "ratio_to_smallest": _ratios(samples, SIZES[0]),
    }


def table(result: dict[str, Any]) -> str:
    """Markdown table of a `run` result."""
    hist = result["by_history"]
    lines = [
        (
            f"`memory__context` layer over {hist['memory_items']:,} memory items (tiered "
            "memory, `balanced`) + history of N messages + query, one compose, median ms:"
        ),
        "",
        "| N (history) | compose | ratio to N=100 |",
        "|---:|---:|---:|",
    ]
    for n in hist["history_sizes"]:
        lines.append(
            f"| {n:,} | {hist['median_ms'][str(n)]:.3f} | {hist['ratio_to_smallest'][str(n)]:.2f} |"
        )
    lines += [
        "",
        "The same layer without history, against the memory's size (not a target):",
        "",
        "| memory items | compose | ratio to 1,000 items |",
        "|---:|---:|---:|",
    ]
    for n in result["sizes"]:
        lines.append(
            f"| {n:,} | {result['median_ms'][str(n)]:.3f} "
            f"| {result['ratio_to_smallest'][str(n)]:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(run(quick="--quick" in sys.argv)))
