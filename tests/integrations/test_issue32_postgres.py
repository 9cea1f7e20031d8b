"""Issue 32 across two OS processes on LangGraph's Postgres checkpointer and store.

Process 1 (``tests/integrations/issue32_process.py write``) runs seed 002's agent in
sessions A and Z and seed 004's memory service; process 2 (``read``), a fresh
interpreter with its own connections, finds A's L1/L2 and the service's L1 as process 1
left them, thread C never sees Z's L1, and ``end("A")`` moves what both processes heard
into the agent's L3. Skips only where the PostgreSQL server binaries are not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.postgres", reason="langgraph-checkpoint-postgres")

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.postgres


def _run(phase: str, dsn: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tests.integrations.issue32_process", phase, dsn],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_session_tiers_scopes_and_a_memory_service_survive_another_process(
    postgres_dsn: str,
) -> None:
    wrote = _run("write", postgres_dsn)
    assert any("eu-west-3" in text for text in wrote["a_l2"])
    read = _run("read", postgres_dsn)
    assert read["a_l1_restored"] == wrote["a_l1"]  # L1 of session A, in another process
    assert read["service_l1"] == wrote["service_l1"] != []  # the memory service too
    assert "Z-SECRET" not in read["c_prompt"]  # L1 stays private to its session
    l3 = " ".join(read["agent_l3"])
    assert "eu-west-3" in l3 and "ops-7" in l3 and "02:00" in l3  # the whole session
