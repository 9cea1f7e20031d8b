"""MapReduce planner → Send workers → reducer on a real graph with SQLite checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.integrations.langgraph import parse_plan, render_reduce_query
from ctxpolicy.state import MapReduceSnapshot
from tests.integrations.fakes import EchoWorkerModel, ModelDown, RecordingChatModel, replies
from tests.integrations.graphs import FRAMEWORK, make_policy, mapreduce_graph, open_saver

CONFIG = {"configurable": {"thread_id": "mr-1"}}
PLAN_1 = "Tasks:\n- count rows\n- check nulls\n- sample values"
PLAN_2 = (
    '{"understanding": "profile", "tasks": '
    '["list columns", {"id": "t-types", "description": "infer types"}]}'
)


def build(tmp_path: Path, worker: EchoWorkerModel, prompts: list[tuple[str, ComposeResult]]):
    engine = PolicyEngine(make_policy())
    planner = RecordingChatModel(responses=replies(PLAN_1, PLAN_2))
    reducer = RecordingChatModel(responses=replies("final answer 1", "final answer 2"))
    graph = mapreduce_graph(
        engine,
        planner_model=planner,
        worker_model=worker,
        reducer_model=reducer,
        saver=open_saver(tmp_path / "mr.sqlite"),
        hook=lambda name, result: prompts.append((name, result)),
    )
    return graph, planner, reducer


def test_worker_crash_then_resume_gives_one_result_per_task(tmp_path: Path) -> None:
    worker = EchoWorkerModel(fail_once="check nulls")
    prompts: list[tuple[str, ComposeResult]] = []
    graph, planner, reducer = build(tmp_path, worker, prompts)
    # the history carries a message the workers must never see
    with pytest.raises(ModelDown):
        graph.invoke({"messages": [HumanMessage("profile the orders table")]}, CONFIG)
    # The failing worker is pending, with its error; a sibling worker that finished first
    # kept its write, one still running when the failure ended the step did not: how many
    # siblings are pending depends on the scheduler (on a loaded machine, two can be), so
    # only "workers only, one of them failed" is asserted. The resume must then give one
    # result per task either way.
    snapshot = graph.get_state(CONFIG)
    assert set(snapshot.next) == {"mapreduce_worker"}
    assert 1 <= len(snapshot.next) <= 3
    failed = [task for task in snapshot.tasks if task.error is not None]
    assert len(failed) == 1
    assert "check nulls" in repr(failed[0].error)

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
        assert [m.type for m in messages] == ["system", "system", "human"]
        assert messages[1].content == FRAMEWORK
        assert "profile the orders table" not in [m.content for m in messages]
    # the reducer's query holds every result once
    reducer_query = str(reducer.seen[0][-1].content)
    for text in ("result of count rows", "result of check nulls", "result of sample values"):
        assert reducer_query.count(text) == 1
    assert {name for name, _ in prompts} == {"planner", "worker", "reducer"}


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
