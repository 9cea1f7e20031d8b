"""The same thread continued by several OS processes through LangGraph's Postgres checkpointer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrations.graphs import run_turn

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.postgres


def turn_in_subprocess(dsn: str, thread: str, text: str, reply: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tests.integrations.graphs", dsn, thread, text, reply],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_turns_from_several_processes_share_one_postgres_thread(postgres_dsn: str) -> None:
    run_turn(postgres_dsn, "pg-thread", "q1", "a1")
    turn_in_subprocess(postgres_dsn, "pg-thread", "q2", "a2")
    last = turn_in_subprocess(postgres_dsn, "pg-thread", "q3", "a3")
    assert [c for t, c in last["state"] if t == "human"] == ["q1", "q2", "q3"]
    assert [c for t, c in last["state"] if t == "ai"] == ["a1", "a2", "a3"]
    assert [c for t, c in last["seen"] if t == "human"] == ["q1", "q2", "q3"]
    back = run_turn(postgres_dsn, "pg-thread", "q4", "a4")
    assert [c for t, c in back["state"] if t == "human"] == ["q1", "q2", "q3", "q4"]
