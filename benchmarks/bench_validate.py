"""``ctxpolicy validate`` beside ``check-jsonschema`` on the same policy files, four cases.

- ``standalone_100`` / ``standalone_1000``: small generated policy files, each complete;
- ``team_100`` / ``team_1000``: small team files that each ``extends`` one base (a copy of
  ``policies/base.yaml`` with its template), the CI case; check-jsonschema gets the base
  and every team file.

Both tools run as subprocesses (what CI and pre-commit pay, start-up included) on the
same files in a temporary folder, with the same JSON Schema
(``schemas/ctxpolicy.schema.json``), interleaved (the order alternates every
repetition); per case the medians and the median of the paired ratios are reported.
Each runs with its bytecode cached: pip byte-compiles an installed package, and the
editable checkout is byte-compiled first (`compile_bytecode`), since under
``PYTHONDONTWRITEBYTECODE`` every run would otherwise compile ctxpolicy's sources.
``ctxpolicy validate`` does more than the schema check (line:column of every finding,
``extends`` merged, semantic rules, template compilation), so the comparison is
conservative. ``ctxpolicy validate`` runs as it does by default (on a machine with a
CPU to spare, many files are shared with a second process); ``ratio_jobs_1`` repeats
the 1,000-file cases with ``CTXPOLICY_VALIDATE_JOBS=1`` (one process) for comparison.

Target (issue 16): ``ctxpolicy validate`` <= 0.5 x ``check-jsonschema`` in every case.

Run through ``benchmarks/run.py`` (``make bench``); ``run(quick=...)`` returns a dict
whose ``ratio`` is the ``standalone_100`` case's (the figure of earlier runs).
"""

from __future__ import annotations

import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "ctxpolicy.schema.json"
BASE = ROOT / "policies" / "base.yaml"
FILES = 100
#: The cases, in the order they run: (name, kind, number of policy files validated).
CASES = (
    ("standalone_100", "standalone", 100),
    ("team_100", "team", 100),
    ("standalone_1000", "standalone", 1000),
    ("team_1000", "team", 1000),
)
TARGET = 0.5

POLICY = """\
version: 1
name: team-{i}
description: Small generated policy {i}.
model:
  context_window: {window}
  tokenizer: cl100k_base
budget:
  output_reserve: 0.1
  ratios:
    system_prompt: 0.1
    checkpoint_messages: 0.6
    query: 0.1
order: [system_prompt, knowledge__context, checkpoint_messages, query]
layers:
  knowledge__context:
    role: system
    collector: {{type: retriever, service: knowledge, top_k: {k}}}
processes:
  react:
    checkpoint_messages: true
    query: checkpoint
default_process: react
"""

TEAM = """\
version: 1
name: team-{i}
description: Team {i} of the generated set.
extends: ../base.yaml
model:
  context_window: {window}
budget:
  ratios:
    query: {query}
"""


def write_policies(folder: Path, count: int = FILES) -> list[Path]:
    """``count`` small, valid, distinct policy files in ``folder``."""
    paths = []
    for i in range(count):
        path = folder / f"policy_{i:04d}.yaml"
        path.write_text(POLICY.format(i=i, window=32_000 + 100 * i, k=1 + i % 9))
        paths.append(path)
    return paths


def write_team(folder: Path, count: int) -> list[Path]:
    """A base (``policies/base.yaml`` and its templates) and ``count`` team files that
    extend it; the base first."""
    base = folder / "base.yaml"
    shutil.copy(BASE, base)
    shutil.copytree(BASE.parent / "templates", folder / "templates")
    teams = folder / "teams"
    teams.mkdir()
    paths = [base]
    for i in range(count):
        path = teams / f"team_{i:04d}.yaml"
        query = f"0.1{i % 3}"  # the base's ratios sum to 1 with query 0.12
        path.write_text(TEAM.format(i=i, window=64_000 + 100 * i, query=query))
        paths.append(path)
    return paths


def compile_bytecode() -> None:
    """Byte-compile the ctxpolicy package in place (``__pycache__``, as pip does on install)."""
    compileall.compile_dir(ROOT / "ctxpolicy", quiet=1)


def _tool(name: str) -> str | None:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter_ns()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    ms = (time.perf_counter_ns() - start) / 1e6
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return ms


def _paired(
    commands: dict[str, tuple[list[str], dict[str, str] | None]], repeats: int
) -> dict[str, list[float]]:
    """Wall times of each command, ``repeats`` times, the order alternating every time."""
    for cmd, env in commands.values():  # warm-up: file system and bytecode caches
        _timed(cmd, env)
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for rep in range(repeats):
        order = list(commands.items())
        for key, (cmd, env) in order if rep % 2 == 0 else reversed(order):
            samples[key].append(_timed(cmd, env))
    return samples


def _ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def _case(
    folder: Path, kind: str, count: int, tools: tuple[str, str], repeats: int
) -> dict[str, Any]:
    ctxpolicy_bin, checker = tools
    paths = write_policies(folder, count) if kind == "standalone" else write_team(folder, count)
    one_process = {**os.environ, "CTXPOLICY_VALIDATE_JOBS": "1"}
    commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "ctxpolicy_validate": ([ctxpolicy_bin, "validate", str(folder)], None),
        "check_jsonschema": ([checker, "--schemafile", str(SCHEMA), *map(str, paths)], None),
    }
    if count >= 1000:
        commands["ctxpolicy_validate_jobs_1"] = (
            [ctxpolicy_bin, "validate", str(folder)],
            one_process,
        )
    samples = _paired(commands, repeats)
    result: dict[str, Any] = {
        "kind": kind,
        "files": len(paths),
        "median_ms": {k: statistics.median(v) for k, v in samples.items()},
        "ratio": _ratio(samples["ctxpolicy_validate"], samples["check_jsonschema"]),
    }
    if "ctxpolicy_validate_jobs_1" in samples:
        result["ratio_jobs_1"] = _ratio(
            samples["ctxpolicy_validate_jobs_1"], samples["check_jsonschema"]
        )
    return result


def run(*, quick: bool = False) -> dict[str, Any]:
    """Per case: median ms of both tools on the same files and their paired ratio."""
    ctxpolicy_bin = _tool("ctxpolicy")
    checker = _tool("check-jsonschema")
    if ctxpolicy_bin is None or checker is None:
        missing = "ctxpolicy" if ctxpolicy_bin is None else "check-jsonschema"
        why = f"{missing} is not installed (pip install -e .[bench])"
        return {"name": "validate", "skipped": why}
    repeats = 3 if quick else 11
    compile_bytecode()
    cases: dict[str, Any] = {}
    for name, kind, count in CASES:
        with tempfile.TemporaryDirectory(prefix=f"ctxpolicy-bench-{name}-") as tmp:
            cases[name] = _case(
                Path(tmp),
                kind,
                count,
                (ctxpolicy_bin, checker),
                repeats if count < 1000 else max(3, repeats // 2),
            )
    first = cases["standalone_100"]
    return {
        "name": "validate",
        "files": first["files"],
        "repeats": repeats,
        "median_ms": first["median_ms"],
        "ratio": first["ratio"],
        "target": TARGET,
        "cases": cases,
        "ratios": {name: case["ratio"] for name, case in cases.items()},
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
    }


def table(result: dict[str, Any]) -> str:
    """Markdown table of a `run` result."""
    if "skipped" in result:
        return f"validate: skipped: {result['skipped']}"
    target = result.get("target", TARGET)
    lines = [
        f"Policy files, same schema, subprocess wall time, median ms (target: ratio <= {target}):",
        "",
        "| case | files | ctxpolicy validate | check-jsonschema | ratio | one process |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, case in result.get("cases", {}).items():
        m = case["median_ms"]
        single = case.get("ratio_jobs_1")
        lines.append(
            f"| {name} | {case['files']} | {m['ctxpolicy_validate']:.0f} "
            f"| {m['check_jsonschema']:.0f} | {case['ratio']:.2f} "
            f"| {'-' if single is None else f'{single:.2f}'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(run(quick="--quick" in sys.argv)))
