"""Run every benchmark, write ``benchmarks/results/latest.json``, print markdown tables.

    .venv/bin/python benchmarks/run.py [--quick] [--only NAME ...]      (make bench)

Benchmarks are the ``benchmarks/bench_*.py`` modules. Not timed tests: the figures are
medians on this machine and only their ratios (ctxpolicy vs peers, vs the tokenizer
floor) carry over to other machines.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench_compose import WARM_FACTOR  # benchmarks/ is this script's own folder
from readme_table import update_readme

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# ---------------------------------------------------------------------------------------
# HOOK: adding a benchmark. Drop a ``benchmarks/bench_<name>.py`` that exposes
#
#     def run(*, quick: bool = False) -> dict[str, Any]   # JSON-serialisable figures
#     def table(result: dict[str, Any]) -> str            # markdown for the README
#
# and it is picked up here (in-process, its result stored under "<name>" in latest.json).
# A bench_*.py without that protocol is run as a plain script (subprocess) and its exit
# status and output are recorded. FIRST lists the benchmarks that run before the rest.
# The end-to-end PolicyEngine.compose case lives in bench_compose.bench_engine.
# ---------------------------------------------------------------------------------------
FIRST = ("bench_compose",)

# Targets of issue 8 (ratios measured side by side in one run; never timed tests).
COLD_MAX = 1.3  # compose cold <= 1.3 x encoding what is sent (+ the message before)
TRIM_MIN = 100.0  # trim_messages / compose cold at N = 10,000
# next turn <= WARM_FACTOR (1.5, bench_compose) x encoding the 2 new messages ... (issue 16)
WARM_CONSTANT_US = 20.0  # ... + this small constant (per call, independent of N)
MEMORY_MAX = 1.25  # 10,000-item memory layer: compose at N=10,000 / at N=100 (history)
IMPORT_MAX_MS = 40.0  # python -c "import ctxpolicy" minus bare python
VALIDATE_MAX = 0.5  # ctxpolicy validate / check-jsonschema, each case (issue 16)
PEAK_MAX = 1.5  # compose cold peak memory at N = 10,000 / at N = 100


def discover(only: list[str] | None) -> list[str]:
    names = sorted(path.stem for path in HERE.glob("bench_*.py"))
    names = [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]
    if only:
        wanted = {n if n.startswith("bench_") else f"bench_{n}" for n in only}
        unknown = wanted - set(names)
        if unknown:
            raise SystemExit(f"--only: no benchmark named {', '.join(sorted(unknown))}")
        names = [n for n in names if n in wanted]
    return names


def machine(
    packages: tuple[str, ...] = ("ctxpolicy", "langchain-core", "tiktoken", "pydantic"),
) -> dict[str, Any]:
    """The machine and the versions of ``packages`` (for the results files)."""
    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": versions,
    }


def run_module(name: str, *, quick: bool) -> tuple[dict[str, Any], str]:
    module = importlib.import_module(name)
    run = getattr(module, "run", None)
    table = getattr(module, "table", None)
    if callable(run) and callable(table) and "quick" in inspect.signature(run).parameters:
        result = run(quick=quick)
        return result, table(result)
    start = time.perf_counter()
    scratch = RESULTS / f"{name.removeprefix('bench_')}-quick.json"
    extra = ["--output", str(scratch)] if quick else []
    done = subprocess.run(
        [sys.executable, str(HERE / f"{name}.py"), *extra],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE.parent,
    )
    seconds = time.perf_counter() - start
    result = {
        "script": f"benchmarks/{name}.py",
        "returncode": done.returncode,
        "seconds": seconds,
        "stdout": done.stdout[-20_000:],
        "stderr": done.stderr[-5_000:],
    }
    status = "ok" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
    text = f"`benchmarks/{name}.py` (plain script, {status}, {seconds:.1f} s):\n\n```\n"
    text += (done.stdout.strip() or done.stderr.strip()[-2_000:]) + "\n```"
    return result, text


def _row(target: str, measured: str, goal: str, ok: bool | None) -> dict[str, Any]:
    status = "NOT RUN" if ok is None else ("PASS" if ok else "MISS")
    return {"target": target, "measured": measured, "goal": goal, "status": status}


def evaluate(benchmarks: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target of issue 8: what was measured, the goal, PASS / MISS / NOT RUN."""
    rows: list[dict[str, Any]] = []
    compose = benchmarks.get("compose") or {}
    engine = compose.get("engine")
    if isinstance(engine, list) and engine:
        for size in engine:
            n, r = size["n"], size["ratios"]
            cold = r["compose_cold_over_encode_kept"]
            rows.append(
                _row(
                    f"cold compose / encode sent (+1), N={n:,}",
                    f"{cold:.2f}",
                    f"<= {COLD_MAX}",
                    cold <= COLD_MAX,
                )
            )
        for size in engine:
            n = size["n"]
            excess = size["warm_excess_us"]
            ratio = size["ratios"]["compose_warm_over_encode_new"]
            rows.append(
                _row(
                    f"next turn - {WARM_FACTOR} x encode 2 new, N={n:,}",
                    f"{excess:+.0f} us (warm/encode new {ratio:.2f})",
                    f"<= {WARM_CONSTANT_US:.0f} us",
                    excess <= WARM_CONSTANT_US,
                )
            )
        largest = max(engine, key=lambda size: size["n"])
        trim = largest["ratios"]["trim_messages_over_compose_cold"]
        rows.append(
            _row(
                f"trim_messages / cold compose, N={largest['n']:,}",
                f"{trim:.0f}x",
                f">= {TRIM_MIN:.0f}x",
                trim >= TRIM_MIN if largest["n"] >= 10_000 else None,
            )
        )
        smallest = min(engine, key=lambda size: size["n"])
        peak = largest["compose_cold_peak_kib"] / smallest["compose_cold_peak_kib"]
        rows.append(
            _row(
                f"compose peak memory N={largest['n']:,} / N={smallest['n']:,}",
                f"{peak:.2f} ({largest['compose_cold_peak_kib']:.0f} / "
                f"{smallest['compose_cold_peak_kib']:.0f} KiB)",
                f"<= {PEAK_MAX}",
                peak <= PEAK_MAX,
            )
        )
    else:
        rows.append(_row("end-to-end compose targets", "not measured", "-", None))
    window = compose.get("kept_window")
    if window:
        small, large = window["kept_messages"]
        rows.append(
            {
                "target": f"(info) next turn, {large} kept messages - {small} kept, "
                f"N={window['n']:,}",
                "measured": f"{window['large_minus_small_us']:+.0f} us",
                "goal": "-",
                "status": "info",
            }
        )
    memory = benchmarks.get("memory_layer") or {}
    if "by_history" in memory:
        hist = memory["by_history"]
        top, base = str(max(hist["history_sizes"])), min(hist["history_sizes"])
        ratio = hist["ratio_to_smallest"][top]
        rows.append(
            _row(
                f"{hist['memory_items']:,}-item memory layer, N={int(top):,} / N={base:,}",
                f"{ratio:.2f} ({hist['median_ms'][top]:.2f} ms)",
                f"<= {MEMORY_MAX}",
                ratio <= MEMORY_MAX,
            )
        )
        big, small = str(max(memory["sizes"])), min(memory["sizes"])
        rows.append(
            {
                "target": f"(info) memory layer {int(big):,} items / {small:,} items",
                "measured": f"{memory['ratio_to_smallest'][big]:.2f} "
                f"({memory['median_ms'][big]:.2f} ms)",
                "goal": "-",
                "status": "info",
            }
        )
    else:
        rows.append(_row("memory layer independent of N", "not measured", "-", None))
    imp = compose.get("import")
    if imp:
        added = imp["added_ms"]
        rows.append(
            _row(
                "`import ctxpolicy` over bare Python",
                f"{added:.1f} ms",
                f"<= {IMPORT_MAX_MS:.0f} ms",
                added <= IMPORT_MAX_MS,
            )
        )
    validate = benchmarks.get("validate") or {}
    if "cases" in validate:
        for name, case in validate["cases"].items():
            m = case["median_ms"]
            rows.append(
                _row(
                    f"`ctxpolicy validate` / `check-jsonschema`, {name.replace('_', ' ')} files",
                    f"{case['ratio']:.2f} ({m['ctxpolicy_validate']:.0f} / "
                    f"{m['check_jsonschema']:.0f} ms)",
                    f"<= {VALIDATE_MAX}",
                    case["ratio"] <= VALIDATE_MAX,
                )
            )
    else:
        rows.append(_row("`ctxpolicy validate` / `check-jsonschema`", "not measured", "-", None))
    return rows


def targets_table(rows: list[dict[str, Any]]) -> str:
    """The targets as a markdown table."""
    lines = ["| target | measured | goal | status |", "|---|---:|---:|:---:|"]
    lines += [f"| {r['target']} | {r['measured']} | {r['goal']} | {r['status']} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the ctxpolicy benchmarks.")
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer repetitions")
    parser.add_argument("--only", nargs="*", help="benchmark names (compose, memory, ...)")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="JSON result (default: results/latest.json; results/quick.json with --quick, "
        "so a smoke run never replaces the published figures)",
    )
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = RESULTS / ("quick.json" if args.quick else "latest.json")

    sys.path.insert(0, str(HERE))
    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "machine": machine(),
        "benchmarks": {},
    }
    tables = []
    failed = False
    for name in discover(args.only):
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            result, text = run_module(name, quick=args.quick)
        except Exception as exc:
            failed = True
            result = {"error": f"{type(exc).__name__}: {exc}"}
            text = f"`{name}` failed: {type(exc).__name__}: {exc}"
        report["benchmarks"][name.removeprefix("bench_")] = result
        tables.append(f"## {name.removeprefix('bench_')}\n\n{text}")
        failed = failed or result.get("returncode", 0) != 0

    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report["targets"] = evaluate(report["benchmarks"])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    m = report["machine"]
    header = (
        f"Machine: {m['platform']}, {m['cpus']} CPUs, Python {m['python']}; "
        f"run {report['started']} - {report['finished']}" + (" (--quick)" if args.quick else "")
    )
    markdown = "\n\n".join(
        [
            f"# Benchmark results\n\n{header}",
            "## Targets\n\n" + targets_table(report["targets"]),
            *tables,
        ]
    )
    markdown_path = args.output.with_suffix(".md")
    markdown_path.write_text(markdown + "\n")
    if not args.quick and not args.only and args.output == RESULTS / "latest.json" and not failed:
        update_readme(report)  # the README's performance block, from this very run
    print(markdown)
    # an --output outside the repository is named as given (relative_to would raise)
    shown = args.output.resolve()
    if shown.is_relative_to(HERE.parent):
        shown = shown.relative_to(HERE.parent)
    print(f"\nWrote {shown} and {markdown_path.name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
