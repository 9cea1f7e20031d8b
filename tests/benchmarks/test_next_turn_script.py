"""`benchmarks/next_turn.py` measures what it says: the engine's next turn (or the
`FloorTurn` yardstick, which must keep what the engine keeps) against encoding the new
messages, in each cache state, and tabulates every mode it records."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

Loader = Callable[[str], ModuleType]


@pytest.mark.parametrize("floor", [False, True])
@pytest.mark.parametrize("mode", ["copy", "in-place", "flushed"])
def test_every_mode_times_next_turns_and_the_floor_keeps_what_the_engine_keeps(
    benchmark_script: Loader, mode: str, floor: bool
) -> None:
    figures = benchmark_script("next_turn").run(100, turns=6, mode=mode, floor=floor)
    assert set(figures) == {"next_turn_us", "encode_new_us", "over_target_us"}
    assert all(math.isfinite(v) for v in figures.values())
    assert figures["next_turn_us"] > 0
    assert figures["encode_new_us"] > 0


def test_full_cache_times_next_turns_with_the_message_cache_at_its_bound(
    benchmark_script: Loader,
) -> None:
    """``--full-cache`` fills the tokenizer's message cache first: every count then evicts."""
    from ctxpolicy.tokens import get_tokenizer

    module = benchmark_script("next_turn")
    tok = get_tokenizer("cl100k_base")
    tok.clear_cache()
    figures = module.run(100, turns=4, mode="in-place", full_cache=True)
    assert figures["next_turn_us"] > 0
    cache = tok._message_counts  # full: it evicts a sixteenth of itself at a time
    assert cache._maxsize - cache._evict < len(cache) <= cache._maxsize
    tok.clear_cache()


def test_the_floor_refuses_a_window_that_changed(benchmark_script: Loader) -> None:
    module = benchmark_script("next_turn")
    history: list[Any] = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    floor = module.FloorTurn(history, history, max_tokens=1_000)
    assert floor([*history, AIMessage("a2")])[1:] == [*history, AIMessage("a2")]
    edited = [HumanMessage("q1"), AIMessage("edited"), HumanMessage("q2"), AIMessage("a2")]
    with pytest.raises(AssertionError, match="appends only"):
        floor([*edited, HumanMessage("q3")])


def test_the_floor_drops_the_oldest_and_starts_on_a_human_message(benchmark_script: Loader) -> None:
    module = benchmark_script("next_turn")
    history: list[Any] = [HumanMessage("one " * 50), AIMessage("two " * 50)]
    floor = module.FloorTurn(history, history, max_tokens=120)
    grown = [*history, HumanMessage("three " * 50)]
    # 3 messages of ~55 tokens each: the oldest no longer fits, the next is an AI message
    assert floor(grown)[1:] == [grown[2]]


def test_the_record_table_has_a_column_per_mode_and_floor_mode(benchmark_script: Loader) -> None:
    module = benchmark_script("next_turn")
    columns = [
        *module.MODES,
        module.FULL_CACHE_COLUMN,
        *(f"floor {m}" for m in module.FLOOR_MODES),
    ]
    rows = [
        {"n": n, "mode": mode, "over_target_us": float(i)}
        for n in module.RECORD_SIZES
        for i, mode in enumerate(columns)
    ]
    result = {
        "started": "2026-01-01T00:00:00Z",
        "turns": 6,
        "machine": {"platform": "test", "cpus": 2, "python": "3.11"},
        "rows": rows,
    }
    table = module.record_table(result)
    assert "| N | " + " | ".join(columns) + " |" in table
    assert "| 100 | " + " | ".join(f"{float(i):+.1f}" for i in range(len(columns))) in table
