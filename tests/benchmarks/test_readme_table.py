"""The README's performance block is the one `benchmarks/readme_table.py` makes from the
recorded `benchmarks/results/latest.json`: no hand-typed figure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

Loader = Callable[[str], ModuleType]

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_performance_block_comes_from_the_recorded_run(benchmark_script: Loader) -> None:
    table = benchmark_script("readme_table")
    report = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text("utf-8"))
    assert not report["quick"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(table.START, 1)[1].split(table.END, 1)[0]
    assert block.strip() == table.readme_block(report).strip()
    assert report["machine"]["cpus"] >= 1  # the machine's description is recorded with it


def test_the_readme_memory_table_comes_from_the_recorded_run(benchmark_script: Loader) -> None:
    table = benchmark_script("readme_table")
    memory = json.loads((ROOT / "benchmarks" / "results" / "memory.json").read_text("utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(table.MEMORY_START, 1)[1].split(table.MEMORY_END, 1)[0]
    assert block.strip() == table.memory_block(memory).strip()
    assert "| 10,000 |" in block  # every recorded history length has its row


def test_the_block_lists_every_judged_target_with_its_verdict(benchmark_script: Loader) -> None:
    table = benchmark_script("readme_table")
    targets = [
        {"target": "next turn, N=100", "measured": "+32 us", "goal": "<= 20 us", "status": "MISS"},
        {"target": "trim / cold", "measured": "3561x", "goal": ">= 100x", "status": "PASS"},
        {"target": "(info) window", "measured": "+27 us", "goal": "-", "status": "info"},
    ]
    rows = table.targets_rows(targets)
    assert "| next turn, N=100 | +32 µs | ≤ 20 µs | MISS |" in rows
    times = "\N{MULTIPLICATION SIGN}"
    assert f"| trim / cold | 3561{times} | ≥ 100{times} | PASS |" in rows
    assert not any("(info)" in row for row in rows)  # reported elsewhere, never judged
    assert table.targets_rows(targets[2:]) == []
