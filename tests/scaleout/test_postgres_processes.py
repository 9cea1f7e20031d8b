"""Scale-out on a real PostgreSQL: agents of one LangGraph thread in separate OS processes.

Each agent process (`tests.scaleout.agent_process`) holds its own ``PostgresSaver``
connection. Two processes continue one thread in turn, run different threads at the
same time, and take over a thread whose process was SIGKILLed mid-turn: no duplicated
input, no lost summary, one result per MapReduce task.

Skips (with the reason) only where the PostgreSQL server binaries are not installed.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres")

ROOT = Path(__file__).resolve().parents[2]
#: Seconds one command may take (a hang fails the test instead of blocking the run).
COMMAND_TIMEOUT_S = 60

pytestmark = pytest.mark.postgres


class Agent:
    """One agent OS process speaking JSON lines."""

    def __init__(self, dsn: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.scaleout.agent_process", dsn],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self._read() == {"ready": True}

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], COMMAND_TIMEOUT_S)
        if not ready:
            raise AssertionError(f"agent process silent for {COMMAND_TIMEOUT_S} s")
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"agent process died:\n{err[-3000:]}")
        return dict(json.loads(line))

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def ask(self, **command: Any) -> dict[str, Any]:
        self.send(**command)
        return self._read()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL
        self.close()

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def agents(postgres_dsn: str) -> Iterator[Any]:
    """``agents()`` starts an agent process; all are stopped at the end."""
    from tests.integrations.graphs import open_checkpointer

    open_checkpointer(postgres_dsn).conn.close()  # tables created once, before any race
    started: list[Agent] = []

    def start() -> Agent:
        agent = Agent(postgres_dsn)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        if agent.proc.poll() is None:
            agent.close()


def thread_id(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def texts(messages: list[list[str]], kind: str) -> list[str]:
    return [content for type_, content in messages if type_ == kind]


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def test_two_processes_continue_one_thread_in_turn_and_run_threads_in_parallel(
    agents: Any,
) -> None:
    first, second = agents(), agents()
    shared = thread_id("shared")
    for n in range(1, 7):
        agent = first if n % 2 else second  # alternate processes on one thread
        out = agent.ask(op="chat", thread=shared, text=f"q{n}", reply=f"a{n}")
        assert texts(out["messages"], "human") == [f"q{i}" for i in range(1, n + 1)]
        assert texts(out["seen"], "human") == [f"q{i}" for i in range(1, n + 1)]
        assert texts(out["seen"], "ai") == [f"a{i}" for i in range(1, n)]

    # both processes at once, each on its own threads, interleaved turns
    own = {first: thread_id("first"), second: thread_id("second")}
    results: dict[Agent, list[dict[str, Any]]] = {first: [], second: []}

    def converse(agent: Agent) -> None:
        for n in range(1, 6):
            results[agent].append(
                agent.ask(
                    op="chat",
                    thread=own[agent],
                    text=f"{own[agent]} q{n}",
                    reply=f"{own[agent]} a{n}",
                )
            )

    workers = [threading.Thread(target=converse, args=(a,)) for a in (first, second)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=5 * COMMAND_TIMEOUT_S)
    for agent, thread in own.items():
        last = results[agent][-1]
        assert texts(last["messages"], "human") == [f"{thread} q{n}" for n in range(1, 6)]
        assert texts(last["messages"], "ai") == [f"{thread} a{n}" for n in range(1, 6)]
        other = own[second if agent is first else first]
        assert not any(other in content for _, content in last["messages"])
    # and the shared thread is untouched by the parallel runs
    out = second.ask(op="chat", thread=shared, text="q7", reply="a7")
    assert texts(out["messages"], "human") == [f"q{i}" for i in range(1, 8)]


def summarized_words(summary: str | None) -> list[str]:
    return summary.removeprefix("SUMMARY:").split() if summary else []


def check_nothing_lost(out: dict[str, Any], asked: list[str]) -> None:
    """Every query is in the kept history or the summary, exactly once; answers likewise."""
    kept = [content.split()[0] for content in texts(out["messages"], "human")]
    folded = [w for w in summarized_words(out["summary"]) if w.startswith("q")]
    assert sorted(kept + folded, key=lambda w: int(w[1:])) == asked
    assert kept == asked[len(folded) :]


def test_killed_mid_turn_another_process_resumes_without_loss(agents: Any, tmp_path: Path) -> None:
    first = agents()
    thread = thread_id("summary")
    long = " and more words" * 6
    asked: list[str] = []
    out: dict[str, Any] = {}
    while not out.get("summary"):
        n = len(asked) + 1
        asked.append(f"q{n}")
        out = first.ask(
            op="chat", thread=thread, text=f"q{n}{long}", reply=f"a{n}{long}", policy="summarize"
        )
        assert n < 10, "the history never overflowed: the test policy is too large"
    summary_before = out["summary"]
    assert summary_before.startswith("SUMMARY: q1")
    check_nothing_lost(out, asked)

    # the next turn: the model blocks, the process is killed while the node runs
    n = len(asked) + 1
    asked.append(f"q{n}")
    flag = tmp_path / "turn"
    first.send(
        op="chat",
        thread=thread,
        text=f"q{n}{long}",
        reply="never",
        policy="summarize",
        block=str(flag),
    )
    wait_for(Path(f"{flag}.entered"))
    first.kill()

    second = agents()
    out = second.ask(op="resume", thread=thread, reply=f"a{n}{long}", policy="summarize")
    check_nothing_lost(out, asked)
    assert out["summary"].startswith(summary_before)  # the summary survived the kill
    humans = texts(out["seen"], "human")
    assert humans[-1] == f"q{n}{long}"
    assert len(humans) == len(set(humans))
    # one merged SystemMessage by default: its layers are joined by a blank line
    system = [
        part
        for type_, content in out["seen"]
        if type_ == "system"
        for part in content.split("\n\n")
    ]
    assert any(part.startswith("SUMMARY:") for part in system)
    assert texts(out["messages"], "ai")[-1] == f"a{n}{long}"

    # a third turn from a third process: still nothing duplicated or lost
    third = agents()
    asked.append(f"q{n + 1}")
    out = third.ask(
        op="chat", thread=thread, text=f"q{n + 1}{long}", reply="done", policy="summarize"
    )
    check_nothing_lost(out, asked)


def test_client_retry_after_a_killed_process_does_not_duplicate_the_input(
    agents: Any, tmp_path: Path
) -> None:
    first = agents()
    thread = thread_id("retry")
    first.ask(op="chat", thread=thread, text="q1", reply="a1", turn_id="req-1")
    flag = tmp_path / "retry"
    first.send(op="chat", thread=thread, text="q2", reply="never", turn_id="req-2", block=str(flag))
    wait_for(Path(f"{flag}.entered"))
    first.kill()
    second = agents()  # the client sends the same turn again, to another process
    out = second.ask(op="chat", thread=thread, text="q2", reply="a2", turn_id="req-2")
    assert texts(out["messages"], "human") == ["q1", "q2"]
    assert texts(out["messages"], "ai") == ["a1", "a2"]
    assert texts(out["seen"], "human") == ["q1", "q2"]


def test_mapreduce_worker_killed_mid_task_gives_one_result_per_task(
    agents: Any, tmp_path: Path
) -> None:
    first = agents()
    thread = thread_id("mapreduce")
    flag = tmp_path / "worker"
    first.send(
        op="mapreduce",
        thread=thread,
        goal="profile the orders table",
        block_task="check nulls",
        block=str(flag),
    )
    wait_for(Path(f"{flag}.entered"))
    time.sleep(0.5)  # let the sibling workers finish and record their writes
    first.kill()

    second = agents()
    out = second.ask(op="mapreduce_resume", thread=thread)
    ids = [r["task_id"] for r in out["results"]]
    assert sorted(ids) == ["task-1", "task-2", "task-3"]
    assert {r["task_id"]: r["output"] for r in out["results"]} == {
        "task-1": "result of count rows",
        "task-2": "result of check nulls",
        "task-3": "result of sample values",
    }
    reducer_query = out["seen"][-1][1]
    for text in ("result of count rows", "result of check nulls", "result of sample values"):
        assert reducer_query.count(text) == 1
    assert texts(out["messages"], "human") == ["profile the orders table"]
    assert len(texts(out["messages"], "ai")) == 1
