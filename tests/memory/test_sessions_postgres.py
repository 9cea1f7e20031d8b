"""Memory scopes on LangGraph's Postgres store, across two OS processes.

Process 1 runs an agent's session and ends it (L2 → the agent's L3 → the global L4).
Process 2, a fresh interpreter with its own connection, sees the agent's L3 and the
global L4; another agent sees the global L4 only. Skips (with the reason) only where
the PostgreSQL server binaries are not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.postgres", reason="langgraph-checkpoint-postgres")

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.postgres

_PRELUDE = """
import json, sys
from langgraph.store.postgres import PostgresStore
from ctxpolicy.memory import MemorySessions
"""

WRITER = (
    _PRELUDE
    + """
with PostgresStore.from_conn_string(sys.argv[1]) as store:
    store.setup()
    sessions = MemorySessions(store=store, agent="analyst")
    memory = sessions.session("s1")
    memory.add("the billing DB moved to cluster B7", importance=0.9)
    memory.add("small talk", importance=0.1)
    written = sessions.end("s1")
    print(json.dumps({"written": [item.content for item in written],
                      "status": sessions.status("s1")}))
"""
)

READER = (
    _PRELUDE
    + """
with PostgresStore.from_conn_string(sys.argv[1]) as store:
    sessions = MemorySessions(store=store, agent=sys.argv[2])
    hits = sessions.global_memory().search("billing cluster", 5)
    print(json.dumps({"l3": [item.content for item in sessions.agent_l3()],
                      "l4": [hit.content for hit in hits],
                      "status": sessions.status("s1")}))
"""
)


def _run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_second_process_sees_the_agent_l3_and_the_global_l4(postgres_dsn: str) -> None:
    wrote = _run(WRITER, postgres_dsn)
    assert wrote["status"] == "ended"
    assert any("B7" in text for text in wrote["written"])  # L3 → L4 at the session's end
    assert not any("small talk" in text for text in wrote["written"])  # L1 stays private

    same_agent = _run(READER, postgres_dsn, "analyst")
    assert any("B7" in text for text in same_agent["l3"])  # the agent's L3
    assert any("B7" in text for text in same_agent["l4"])  # the global L4
    assert same_agent["status"] == "ended"  # the lifecycle is shared too

    other_agent = _run(READER, postgres_dsn, "planner")
    assert other_agent["l3"] == []  # L3 belongs to one agent
    assert any("B7" in text for text in other_agent["l4"])  # L4 is global
    assert other_agent["status"] == "active"
