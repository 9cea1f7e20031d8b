"""``ctxpolicy validate`` beside ``check-jsonschema`` on the same 100 policy files.

Both run as subprocesses (what CI and pre-commit pay, start-up included) on the same
100 small generated policy files in a temporary folder, with the same JSON Schema
(``schemas/ctxpolicy.schema.json``), interleaved (the order alternates every
repetition); medians and the median of the paired ratios are reported. ``ctxpolicy
validate`` does more than the schema check (line:column of every finding, semantic
rules, template compilation), so the comparison is conservative.

Target (issue 8): ``ctxpolicy validate`` <= 0.35 x ``check-jsonschema``.

Run through ``benchmarks/run.py`` (``make bench``); ``run(quick=...)`` returns a dict.
"""

from __future__ import annotations

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
FILES = 100

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


def write_policies(folder: Path, count: int = FILES) -> list[Path]:
    """``count`` small, valid, distinct policy files in ``folder``."""
    paths = []
    for i in range(count):
        path = folder / f"policy_{i:03d}.yaml"
        path.write_text(POLICY.format(i=i, window=32_000 + 100 * i, k=1 + i % 9))
        paths.append(path)
    return paths


def _tool(name: str) -> str | None:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter_ns()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    ms = (time.perf_counter_ns() - start) / 1e6
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return ms


def run(*, quick: bool = False) -> dict[str, Any]:
    """Median ms of both tools on the same files, and their paired ratio."""
    ctxpolicy_bin = _tool("ctxpolicy")
    checker = _tool("check-jsonschema")
    if ctxpolicy_bin is None or checker is None:
        missing = "ctxpolicy" if ctxpolicy_bin is None else "check-jsonschema"
        why = f"{missing} is not installed (pip install -e .[bench])"
        return {"name": "validate", "skipped": why}
    repeats = 3 if quick else 11
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-bench-") as tmp:
        folder = Path(tmp)
        paths = write_policies(folder)
        cases = {
            "ctxpolicy_validate": [ctxpolicy_bin, "validate", str(folder)],
            "check_jsonschema": [checker, "--schemafile", str(SCHEMA), *map(str, paths)],
        }
        for cmd in cases.values():  # warm-up: file system and bytecode caches
            _timed(cmd)
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for rep in range(repeats):
            order = list(cases.items())
            for key, cmd in order if rep % 2 == 0 else reversed(order):
                samples[key].append(_timed(cmd))
    return {
        "name": "validate",
        "files": FILES,
        "repeats": repeats,
        "median_ms": {k: statistics.median(v) for k, v in samples.items()},
        "ratio": statistics.median(
            a / b
            for a, b in zip(samples["ctxpolicy_validate"], samples["check_jsonschema"], strict=True)
        ),
    }


def table(result: dict[str, Any]) -> str:
    """Markdown table of a `run` result."""
    if "skipped" in result:
        return f"validate: skipped: {result['skipped']}"
    m = result["median_ms"]
    return "\n".join(
        [
            f"{result['files']} policy files, same schema, subprocess wall time, median ms:",
            "",
            "| ctxpolicy validate | check-jsonschema | ratio |",
            "|---:|---:|---:|",
            (
                f"| {m['ctxpolicy_validate']:.0f} | {m['check_jsonschema']:.0f} "
                f"| {result['ratio']:.2f} |"
            ),
        ]
    )


if __name__ == "__main__":
    print(table(run(quick="--quick" in sys.argv)))
