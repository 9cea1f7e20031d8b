"""The README's performance section, made from a `run.py` result (never typed by hand).

``run.py`` calls `update_readme` after a full run that writes ``results/latest.json``;
``python benchmarks/readme_table.py`` regenerates the block from the recorded file alone.
The block sits between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` in README.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LATEST = ROOT / "benchmarks" / "results" / "latest.json"
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


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
        lines.append(
            f"- Next turn on a history list extended in place (no copy of the list right "
            f"before the call): {' / '.join(f'{r:.2f}' for r in in_place)}× at N = {sizes}."
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


def update_readme(report: dict[str, Any], readme: Path = README) -> None:
    """Replace the README's block with the one made from ``report``."""
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{readme_block(report)}\n{END}{tail}", encoding="utf-8")


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
