"""The LangGraph example runs offline and shows what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_datapillar.py"), *args],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def test_example_runs_and_prints_every_agents_prompt() -> None:
    out = run_example()
    for agent in ("analyst", "planner", "worker", "reducer"):
        assert f"--- prompt of {agent}" in out
    assert "enable_share_context=True" in out
    assert "mapreduce results: ['task-1', 'task-2', 'task-3']" in out
    assert "after restart" in out


def test_example_central_switch_removes_shared_layers_from_the_react_agent() -> None:
    out = run_example("--no-share-context")
    assert "enable_share_context=False" in out
    first = out.split("--- prompt of analyst (")[1].split(" messages)")[0]
    assert first == "2"
