"""The README's performance section, made from a `run.py` result (never typed by hand).

``run.py`` calls `update_readme` after a full run that writes ``results/latest.json``;
``python benchmarks/readme_table.py`` regenerates the block from the recorded file alone.
The block sits between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` in README.md;
the memory table (``benchmarks/bench_memory.py``'s ``results/memory.json``, written by the
same run) between ``<!-- bench-memory:start -->`` and ``<!-- bench-memory:end -->``.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LATEST = ROOT / "benchmarks" / "results" / "latest.json"
MEMORY = ROOT / "benchmarks" / "results" / "memory.json"
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
MEMORY_START = "<!-- bench-memory:start -->"
MEMORY_END = "<!-- bench-memory:end -->"
#: The memory table's columns: (variant in memory.json, column heading).
MEMORY_COLUMNS = (
    ("full", "full history"),
    ("drop_oldest", "`drop_oldest`"),
    ("memory:balanced", "`balanced`"),
    ("memory:comprehensive", "`comprehensive`"),
)


def _ms(value: float) -> str:
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def compose_rows(engine: list[dict[str, Any]]) -> list[str]:
    rows = [
        (
            "| N | `trim_messages` | ctxpolicy cold | ctxpolicy next turn | `trim_messages` / cold "
            "| cold / encoding what is sent | peak memory |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in engine:
        median, ratios = entry["median_ms"], entry["ratios"]
        rows.append(
            f"| {entry['n']:,} | {_ms(median['trim_messages'])} | {_ms(median['compose_cold'])} "
            f"| {_ms(median['compose_warm'])} | {ratios['trim_messages_over_compose_cold']:.0f}× "
            f"| {ratios['compose_cold_over_encode_kept']:.2f} "
            f"| {entry['compose_cold_peak_kib']:.0f} KiB |"
        )
    return rows


def validate_sentence(cases: dict[str, Any]) -> str:
    """The ratios of ``bench_validate``'s four cases, in one line."""
    parts = []
    for name in ("standalone_100", "standalone_1000", "team_100", "team_1000"):
        case = cases.get(name)
        if case is None:
            continue
        if case["kind"] == "team":
            what = f"{case['files'] - 1:,} team files extending one base"
        else:
            what = f"{case['files']:,} files"
        parts.append(f"{case['ratio']:.2f}× ({what})")
    listed = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)
    return (
        f"- `ctxpolicy validate` takes {listed} as long as `check-jsonschema` with the same schema."
    )


def _symbols(text: str) -> str:
    """``<=``, ``>=``, ``us`` and ``100x`` of the plain-text results as the README writes them."""
    text = text.replace("<=", "≤").replace(">=", "≥").replace(" us", " µs")
    return re.sub(r"(\d)x\b", "\\1×", text)


def targets_rows(targets: list[dict[str, Any]]) -> list[str]:
    """The run's targets (`run.py`'s ``evaluate``) as a table: measured, goal, PASS / MISS."""
    judged = [row for row in targets if row["status"] in ("PASS", "MISS")]
    if not judged:
        return []
    lines = ["", "| target | measured | goal | |", "|---|---:|---:|:---:|"]
    for row in judged:
        cells = [_symbols(row[key]) for key in ("target", "measured", "goal")]
        lines.append(f"| {' | '.join(cells)} | {row['status']} |")
    return lines


def readme_block(report: dict[str, Any]) -> str:
    """The block's markdown: the compose table, the other figures and the machine."""
    benchmarks = report["benchmarks"]
    compose = benchmarks["compose"]
    engine = compose["engine"]
    excess = [entry["warm_excess_us"] for entry in engine]
    warm = [entry["ratios"]["compose_warm_over_encode_new"] for entry in engine]
    lines = compose_rows(engine)
    lines += [
        "",
        (
            f"- Next turn (warm engine): {min(warm):.1f}–{max(warm):.1f}× the cost of encoding "
            f"the 2 new messages, or 1.5 times that cost {min(excess):+.0f} to "
            f"{max(excess):+.0f} µs."
        ),
    ]
    in_place = [
        entry["ratios"]["compose_warm_in_place_over_encode_new"]
        for entry in engine
        if "compose_warm_in_place_over_encode_new" in entry["ratios"]
    ]
    if len(in_place) == len(engine):
        sizes = "/".join(f"{entry['n']:,}" for entry in engine)
        over = " / ".join(f"{entry['warm_in_place_excess_us']:+.0f}" for entry in engine)
        lines.append(
            f"- Next turn on a history list extended in place (no copy of the list right "
            f"before the call): {' / '.join(f'{r:.2f}' for r in in_place)}× at N = {sizes}, "
            f"or 1.5 times the cost of encoding the new messages {over} µs."
        )
    window = compose.get("kept_window")
    if window:
        small, large = window["kept_messages"]
        lines.append(
            f"- Next turn by kept window (N = {window['n']:,}, list extended in place): "
            f"keeping {large} messages instead of {small} costs "
            f"{window['large_minus_small_us']:+.0f} µs more per turn (the check that the "
            "kept window is unchanged reads every kept message's content)."
        )
    layer = benchmarks.get("memory_layer", {}).get("by_history")
    if layer:
        ratio = layer["ratio_to_smallest"][str(layer["history_sizes"][-1])]
        lines.append(
            f"- A {layer['memory_items']:,}-item memory layer composes in the same time at "
            f"N = {layer['history_sizes'][0]:,} and N = {layer['history_sizes'][-1]:,} "
            f"({ratio:.2f})."
        )
    lines.append(
        f"- `import ctxpolicy` adds {compose['import']['added_ms']:.1f} ms over bare Python."
    )
    validate = benchmarks.get("validate")
    if validate and "cases" in validate:
        lines.append(validate_sentence(validate["cases"]))
    elif validate and "ratio" in validate:
        lines.append(
            f"- `ctxpolicy validate` on {validate['files']} files takes "
            f"{validate['ratio']:.2f}× as long as `check-jsonschema` with the same schema."
        )
    lines += targets_rows(report.get("targets", []))
    machine = report["machine"]
    versions = machine["versions"]
    lines += [
        "",
        (
            f"One `make bench` run ({report['started']}): {machine['platform']}, "
            f"{machine['cpus']} CPUs, Python {machine['python']}, tiktoken "
            f"{versions['tiktoken']}, langchain-core {versions['langchain-core']}; only the "
            "ratios carry over."
        ),
    ]
    return "\n".join(lines)


def _compose_ms(value: float) -> str:
    if value >= 100:
        return f"{value:.0f} ms"
    return f"{value:.1f} ms" if value >= 1 else f"{value:.2f} ms"


def memory_block(memory: dict[str, Any]) -> str:
    """The README's memory table (prompt tokens and compose time per history length) and
    the sentence on how the memory layers' compose time grows, from ``memory.json``."""
    cells = {(r["interactions"], r["variant"]): r for r in memory["rows"] if "prompt_tokens" in r}
    sizes = sorted({interactions for interactions, _ in cells})
    lines = [
        "| interactions | " + " | ".join(heading for _, heading in MEMORY_COLUMNS) + " |",
        "|---:|" + "---:|" * len(MEMORY_COLUMNS),
    ]
    for size in sizes:
        row = [
            f"{cells[size, variant]['prompt_tokens']:,} tok · "
            f"{_compose_ms(cells[size, variant]['compose_ms'])}"
            for variant, _ in MEMORY_COLUMNS
        ]
        lines.append(f"| {size:,} | " + " | ".join(row) + " |")
    balanced = [cells[size, "memory:balanced"] for size in sizes]
    low, high = balanced[1] if len(balanced) > 1 else balanced[0], balanced[-1]
    sentence = (
        "Full history grows as O(n); the memory layers stay at their cap (about "
        f"{high['prompt_tokens']:,} tokens here: the strategies fill their token shares) and "
        "their compose time grows slowly with the index they search (`balanced`: "
        f"{_compose_ms(low['compose_ms'])} at {low['interactions']:,} interactions, "
        f"{_compose_ms(high['compose_ms'])} at {high['interactions']:,})."
    )
    lines += ["", textwrap.fill(sentence, width=90)]
    return "\n".join(lines)


def _replace_block(text: str, start: str, end: str, block: str) -> str:
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}\n{end}{tail}"


def update_readme(report: dict[str, Any], readme: Path = README, memory: Path = MEMORY) -> None:
    """Replace the README's blocks with the ones made from ``report`` and ``memory``."""
    text = _replace_block(readme.read_text(encoding="utf-8"), START, END, readme_block(report))
    if memory.exists():
        block = memory_block(json.loads(memory.read_text(encoding="utf-8")))
        text = _replace_block(text, MEMORY_START, MEMORY_END, block)
    readme.write_text(text, encoding="utf-8")


def main() -> int:
    report = json.loads(LATEST.read_text(encoding="utf-8"))
    if report.get("quick"):
        print("results/latest.json is a --quick run; not published", file=sys.stderr)
        return 1
    update_readme(report)
    print(f"README.md regenerated from {LATEST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
