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


def machine() -> dict[str, Any]:
    versions = {}
    for package in ("ctxpolicy", "langchain-core", "tiktoken", "pydantic"):
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
    done = subprocess.run(
        [sys.executable, str(HERE / f"{name}.py")],
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the ctxpolicy benchmarks.")
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer repetitions")
    parser.add_argument("--only", nargs="*", help="benchmark names (compose, memory, ...)")
    parser.add_argument("--output", type=Path, default=RESULTS / "latest.json")
    args = parser.parse_args(argv)

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
        tables.append(f"### {name.removeprefix('bench_')}\n\n{text}")
        failed = failed or result.get("returncode", 0) != 0

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    m = report["machine"]
    print(f"Machine: {m['platform']}, {m['cpus']} CPUs, Python {m['python']}\n")
    print("\n\n".join(tables))
    print(f"\nWrote {args.output.relative_to(HERE.parent)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
