"""MapReduce planner → Send workers → reducer on a real graph with SQLite checkpoints."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.integrations.langgraph import parse_plan, render_reduce_query
from ctxpolicy.state import MapReduceSnapshot
from tests.integrations.fakes import EchoWorkerModel, ModelDown, RecordingChatModel, replies
from tests.integrations.graphs import (
    FRAMEWORK,
    SignallingSaver,
    make_policy,
    mapreduce_graph,
    open_saver,
)

CONFIG = {"configurable": {"thread_id": "mr-1"}}
RESULTS = "mapreduce_results"
PLAN_1 = "Tasks:\n- count rows\n- check nulls\n- sample values"
PLAN_2 = (
    '{"understanding": "profile", "tasks": '
    '["list columns", {"id": "t-types", "description": "infer types"}]}'
)


def worker_write(channels: tuple[str, ...]) -> bool:
    """A worker's saved write: its result (the planner resets the results beside its tasks)."""
    return RESULTS in channels and "mapreduce_tasks" not in channels


def build(
    tmp_path: Path,
    worker: EchoWorkerModel,
    prompts: list[tuple[str, ComposeResult]],
    saver: SqliteSaver | None = None,
):
    engine = PolicyEngine(make_policy())
    planner = RecordingChatModel(responses=replies(PLAN_1, PLAN_2))
    reducer = RecordingChatModel(responses=replies("final answer 1", "final answer 2"))
    graph = mapreduce_graph(
        engine,
        planner_model=planner,
        worker_model=worker,
        reducer_model=reducer,
        saver=saver or open_saver(tmp_path / "mr.sqlite"),
        hook=lambda name, result: prompts.append((name, result)),
    )
    return graph, planner, reducer


def test_worker_crash_then_resume_gives_one_result_per_task(tmp_path: Path) -> None:
    # The failing worker fails only once its two siblings' results are saved. Left to the
    # scheduler, a sibling still running when the failure ends the step loses its write
    # (LangGraph's executor is shut down before the sibling's completion callback can
    # save it) and is pending too: that made this test fail on a loaded machine. The case
    # of two pending workers is its own test below.
    saver = open_saver(tmp_path / "mr.sqlite", SignallingSaver)
    worker = EchoWorkerModel(
        fail_once=("check nulls",),
        before_failing=lambda: saver.wait_for_writes(worker_write, 2),
    )
    prompts: list[tuple[str, ComposeResult]] = []
    graph, planner, reducer = build(tmp_path, worker, prompts, saver)
    # the history carries a message the workers must never see
    with pytest.raises(ModelDown):
        graph.invoke({"messages": [HumanMessage("profile the orders table")]}, CONFIG)
    # the failed worker alone is pending, with its error; its siblings' results are kept
    snapshot = graph.get_state(CONFIG)
    assert snapshot.next == ("mapreduce_worker",)
    (failed,) = [task for task in snapshot.tasks if task.error is not None]
    assert "check nulls" in repr(failed.error)
    saved = [task.result[RESULTS] for task in snapshot.tasks if task.result is not None]
    assert sorted(r["task_id"] for (r,) in saved) == ["task-1", "task-3"]
    assert len(worker.seen) == 3

    state = graph.invoke(None, CONFIG)
    results = state["mapreduce_results"]
    assert sorted(r["task_id"] for r in results) == ["task-1", "task-2", "task-3"]
    by_id = {r["task_id"]: r["output"] for r in results}
    assert by_id["task-2"] == "result of check nulls"
    assert [m.content for m in state["messages"]] == ["profile the orders table", "final answer 1"]
    assert state["mapreduce_goal"] == "profile the orders table"

    # the planner's query is the goal; every worker saw only its task, no history
    planner_prompt = planner.seen[0]
    assert planner_prompt[-1].content == "profile the orders table"
    for messages in worker.seen:
        assert [m.type for m in messages] == ["system", "human"]  # one merged SystemMessage
        assert messages[0].content.endswith("\n\n" + FRAMEWORK)
        assert "profile the orders table" not in [m.content for m in messages]
    # the reducer's query holds every result once
    reducer_query = str(reducer.seen[0][-1].content)
    for text in ("result of count rows", "result of check nulls", "result of sample values"):
        assert reducer_query.count(text) == 1
    assert {name for name, _ in prompts} == {"planner", "worker", "reducer"}
    # the resume ran the failed worker alone: its siblings' saved results were not redone
    assert len(worker.seen) == 4


def test_two_pending_workers_resume_to_one_result_per_task(tmp_path: Path) -> None:
    # two of three workers fail, both once the third's result is saved and neither before
    # the other has started (a barrier): two are pending whatever the scheduler does, what
    # a sibling still running at the failure comes to
    saver = open_saver(tmp_path / "mr.sqlite", SignallingSaver)
    both_failing = threading.Barrier(2)

    def before_failing() -> None:
        saver.wait_for_writes(worker_write, 1)
        both_failing.wait(timeout=60)

    worker = EchoWorkerModel(
        fail_once=("check nulls", "sample values"), before_failing=before_failing
    )
    graph, _, _ = build(tmp_path, worker, [], saver)
    with pytest.raises(ModelDown):
        graph.invoke({"messages": [HumanMessage("profile the orders table")]}, CONFIG)
    assert graph.get_state(CONFIG).next == ("mapreduce_worker", "mapreduce_worker")

    state = graph.invoke(None, CONFIG)
    assert sorted(r["task_id"] for r in state["mapreduce_results"]) == [
        "task-1",
        "task-2",
        "task-3",
    ]
    assert {r["task_id"]: r["output"] for r in state["mapreduce_results"]} == {
        "task-1": "result of count rows",
        "task-2": "result of check nulls",
        "task-3": "result of sample values",
    }
    assert len(worker.seen) == 5  # three, then the two that failed


def test_a_new_plan_resets_the_results(tmp_path: Path) -> None:
    worker = EchoWorkerModel()
    graph, _, _ = build(tmp_path, worker, [])
    graph.invoke({"messages": [HumanMessage("profile the orders table")]}, CONFIG)
    state = graph.invoke({"messages": [HumanMessage("now profile customers")]}, CONFIG)
    assert [r["task_id"] for r in state["mapreduce_results"]] == ["task-1", "t-types"]
    assert [t["description"] for t in state["mapreduce_tasks"]] == ["list columns", "infer types"]
    assert state["mapreduce_understanding"] == "profile"
    humans = [m.content for m in state["messages"] if m.type == "human"]
    assert humans == ["profile the orders table", "now profile customers"]


def test_parse_plan_forms() -> None:
    assert parse_plan("1. a\n2) b\n* c") == (None, ["a", "b", "c"])
    assert parse_plan('["a", "b"]') == (None, ["a", "b"])
    assert parse_plan('```json\n{"understanding": "u", "tasks": ["a"]}\n```') == ("u", ["a"])
    with pytest.raises(ValueError, match="no task"):
        parse_plan("Plan:\n")


def test_render_reduce_query_lists_goal_and_results() -> None:
    snapshot = MapReduceSnapshot(
        goal="g",
        understanding=None,
        tasks=({"id": "t1", "description": "count"},),
        task=None,
        results=({"task_id": "t1", "output": "42"},),
    )
    assert render_reduce_query(snapshot) == "Goal: g\n\nResults:\n## t1: count\n42"
