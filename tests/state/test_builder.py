"""StateBuilder and its domain modules (seed 001), one behaviour per test."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Overwrite

from ctxpolicy.errors import PersistenceError
from ctxpolicy.policy import Policy
from ctxpolicy.state import (
    StateBuilder,
    UnknownStateKeyError,
    blackboard_schema,
    persisted_layers,
)


def policy(**layers: Any) -> Policy:
    order = [
        "system_prompt",
        "framework__context",
        "knowledge__context",
        "todo__context",
        "compression__context",
        "profile__context",
        "checkpoint_messages",
        "query",
    ]
    return Policy.model_validate({"version": 1, "name": "t", "order": order, "layers": layers})


def apply(state: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """What LangGraph's channels do with one patch (for unit tests of the reducer rules)."""
    from ctxpolicy.state import merge_keys, merge_results

    out = dict(state)
    for key, value in patch.items():
        if key == "messages":
            out[key] = add_messages(out.get(key, []), value)
        elif key == "mapreduce_results":
            out[key] = merge_results(out.get(key, []), value)
        elif key == "deliverable_keys":
            out[key] = merge_keys(out.get(key, []), value)
        else:
            out[key] = value
    return out


# ----------------------------------------------------------------------------- keys


def test_unknown_key_in_state_raises_naming_it() -> None:
    with pytest.raises(UnknownStateKeyError, match="'bogus'") as info:
        StateBuilder({"bogus": 1})
    assert info.value.key == "bogus"
    assert isinstance(info.value, PersistenceError)


def test_state_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="state must be a mapping"):
        StateBuilder([("messages", [])])  # type: ignore[arg-type]


def test_custom_persisted_layer_is_a_known_key_with_its_policy() -> None:
    p = policy(profile__context={"persist": True})
    with pytest.raises(UnknownStateKeyError):
        StateBuilder({"profile__context": "x"})
    sb = StateBuilder({"profile__context": "x"}, p)
    assert sb.contexts.snapshot().get("profile__context") == "x"


def test_schema_extension_accepts_its_fields() -> None:
    schema = blackboard_schema(["profile__context"])
    sb = StateBuilder({"profile__context": "x"}, schema=schema)
    assert sb.patch() == {}


def test_empty_builder_patch_is_empty() -> None:
    assert StateBuilder({}).patch() == {}


# ----------------------------------------------------------------------------- session / routing


def test_session_open_and_snapshot() -> None:
    sb = StateBuilder({"namespace": "ns"})
    assert sb.session.snapshot().namespace == "ns"
    assert sb.session.snapshot().session_id is None
    sb.session.open(namespace="n2", session_id="s1")
    assert sb.patch() == {"namespace": "n2", "session_id": "s1"}
    with pytest.raises(TypeError, match="session_id"):
        sb.session.open(namespace="n", session_id=3)  # type: ignore[arg-type]


def test_routing_activate_assign_and_finish() -> None:
    sb = StateBuilder({})
    sb.routing.activate("analyst")
    sb.routing.assign_task("count rows")
    snap = sb.routing.snapshot()
    assert (snap.active_agent, snap.assigned_task) == ("analyst", "count rows")
    sb.routing.finish_agent("failed", "model_error", "boom")
    assert sb.patch() == {
        "active_agent": None,
        "assigned_task": None,
        "last_agent_status": "failed",
        "last_agent_failure_kind": "model_error",
        "last_agent_error": "boom",
    }


def test_finish_agent_validates_status_and_failure_details() -> None:
    sb = StateBuilder({})
    with pytest.raises(ValueError, match="status must be one of"):
        sb.routing.finish_agent("done")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only for a failed"):
        sb.routing.finish_agent("completed", error="x")
    sb.routing.finish_agent("completed")
    assert sb.routing.snapshot().last_agent_status == "completed"


# ----------------------------------------------------------------------------- memory


def test_memory_snapshot_holds_only_history_messages() -> None:
    state = {"messages": [SystemMessage("sys", id="s"), HumanMessage("hi", id="h")]}
    assert [m.id for m in StateBuilder(state).memory.snapshot()] == ["h"]


def test_memory_append_gives_stable_ids_and_is_idempotent_on_rerun() -> None:
    state = {"messages": [HumanMessage("hi", id="h1")]}
    first = StateBuilder(state)
    first.memory.append([AIMessage("hello")])
    patch1 = first.patch()
    again = StateBuilder(state)  # the node re-runs on the same restored state
    again.memory.append([AIMessage("hello")])
    patch2 = again.patch()
    assert patch1["messages"][0].id == patch2["messages"][0].id
    after = apply(apply(state, patch1), patch2)
    assert [m.content for m in after["messages"]] == ["hi", "hello"]


def test_memory_append_keeps_existing_ids() -> None:
    sb = StateBuilder({})
    sb.memory.append([HumanMessage("a", id="mine")])
    assert sb.patch()["messages"][0].id == "mine"


def test_memory_same_text_in_a_later_turn_gets_a_new_id() -> None:
    sb = StateBuilder({})
    sb.memory.append([HumanMessage("ok"), AIMessage("ok"), HumanMessage("ok")])
    ids = [m.id for m in sb.patch()["messages"]]
    assert len(set(ids)) == 3


def test_memory_append_refuses_system_and_remove_messages() -> None:
    sb = StateBuilder({})
    with pytest.raises(PersistenceError, match="SystemMessage"):
        sb.memory.append([SystemMessage("prompt")])
    with pytest.raises(PersistenceError, match=r"memory\.replace"):
        sb.memory.append([RemoveMessage(id="x")])
    with pytest.raises(TypeError, match=r"delta\[0\]"):
        sb.memory.append(["hi"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="delta must be a sequence"):
        sb.memory.append("hi")  # type: ignore[arg-type]
    assert sb.patch() == {}


def test_memory_replace_starts_with_remove_all() -> None:
    state = {"messages": [HumanMessage("old", id="o"), AIMessage("x", id="x")]}
    sb = StateBuilder(state)
    sb.memory.replace([HumanMessage("kept", id="k")])
    sb.memory.append([AIMessage("reply")])
    patch = sb.patch()
    first = patch["messages"][0]
    assert isinstance(first, RemoveMessage)
    assert first.id == REMOVE_ALL_MESSAGES
    assert [m.content for m in apply(state, patch)["messages"]] == ["kept", "reply"]
    assert [m.content for m in sb.memory.snapshot()] == ["kept", "reply"]


def test_memory_replace_after_append_is_refused() -> None:
    sb = StateBuilder({})
    sb.memory.append([HumanMessage("a")])
    with pytest.raises(PersistenceError, match="replace"):
        sb.memory.replace([])


def test_memory_append_then_snapshot_shows_the_delta() -> None:
    sb = StateBuilder({"messages": [HumanMessage("a", id="a")]})
    sb.memory.append([AIMessage("b"), ToolMessage("t", tool_call_id="c")])
    assert [m.content for m in sb.memory.snapshot()] == ["a", "b", "t"]


# ----------------------------------------------------------------------------- deliverables / todo


def test_deliverables_record_saved_deduplicates() -> None:
    sb = StateBuilder({"deliverable_keys": ["report.md"]})
    sb.deliverables.record_saved("report.md")
    sb.deliverables.record_saved("chart.png")
    sb.deliverables.record_saved("chart.png")
    assert sb.deliverables.snapshot() == ("report.md", "chart.png")
    assert sb.patch() == {"deliverable_keys": ["report.md", "chart.png"]}
    with pytest.raises(ValueError, match="non-empty"):
        sb.deliverables.record_saved("")


def test_todo_replace_copies_and_clear() -> None:
    todo = {"items": [{"title": "a", "done": False}]}
    sb = StateBuilder({})
    sb.todo.replace(todo)
    todo["items"].append({"title": "mutated later"})
    assert sb.todo.snapshot() == {"items": [{"title": "a", "done": False}]}
    sb.todo.clear()
    assert sb.patch() == {"todo": None}
    with pytest.raises(TypeError, match="todo must be"):
        sb.todo.replace("a")  # type: ignore[arg-type]
    sb.todo.replace(["x"])
    assert sb.todo.snapshot() == ["x"]


# ------------------------------------------------------------------- contexts / compression


def test_contexts_persist_writes_persisted_layers() -> None:
    p = policy(profile__context={"persist": True})
    sb = StateBuilder({}, p)
    sb.contexts.persist({"compression__context": "summary", "profile__context": "me"})
    assert sb.patch() == {"compression__context": "summary", "profile__context": "me"}
    assert persisted_layers(p) == ("compression__context", "profile__context")


@pytest.mark.parametrize(
    ("layer", "why"),
    [
        ("knowledge__context", "marks it runtime-only"),
        ("framework__context", "may never be persisted"),
        ("system_prompt", "only __context block layers"),
        ("query", "only __context block layers"),
        ("messages", "only __context block layers"),
        ("missing__context", "has no such layer"),
    ],
)
def test_contexts_persist_refuses_runtime_only_layers(layer: str, why: str) -> None:
    sb = StateBuilder({}, policy())
    with pytest.raises(PersistenceError, match=why) as info:
        sb.contexts.persist({"compression__context": "ok", layer: "x"})
    assert repr(layer) in str(info.value)
    assert sb.patch() == {}  # nothing written when one layer is refused


def test_contexts_persist_without_policy_allows_only_compression() -> None:
    sb = StateBuilder({})
    sb.contexts.persist({"compression__context": "s"})
    with pytest.raises(PersistenceError, match="no policy"):
        sb.contexts.persist({"todo__context": "x"})


def test_contexts_persist_refuses_non_text() -> None:
    with pytest.raises(PersistenceError, match="must be text"):
        StateBuilder({}).contexts.persist({"compression__context": 3})  # type: ignore[dict-item]


def test_compression_persist_and_snapshot() -> None:
    sb = StateBuilder({"compression__context": "old"})
    assert sb.compression.snapshot() == "old"
    sb.compression.persist_compression("new")
    assert sb.compression.snapshot() == "new"
    assert sb.patch() == {"compression__context": "new"}


def test_compression_obeys_a_policy_that_makes_it_runtime_only() -> None:
    sb = StateBuilder({}, policy(compression__context={"persist": False}))
    with pytest.raises(PersistenceError, match="compression__context"):
        sb.compression.persist_compression("s")


# ----------------------------------------------------------------------------- react


def test_react_module() -> None:
    sb = StateBuilder({"error_retry_count": 2})
    sb.react.save_goal("g")
    sb.react.save_plan(["a", "b"])
    sb.react.save_reflection("r")
    assert sb.react.inc_error_retry() == 3
    assert sb.react.inc_error_retry() == 4
    snap = sb.react.snapshot()
    assert (snap.goal, snap.plan, snap.reflection, snap.error_retry_count) == (
        "g",
        ("a", "b"),
        "r",
        4,
    )
    sb.react.reset_error_retry()
    assert sb.patch() == {
        "goal": "g",
        "plan": ["a", "b"],
        "reflection": "r",
        "error_retry_count": 0,
    }
    with pytest.raises(TypeError, match="single string"):
        sb.react.save_plan("abc")


# ----------------------------------------------------------------------------- mapreduce


def test_mapreduce_init_plan_normalizes_tasks_and_resets_results() -> None:
    sb = StateBuilder({"mapreduce_results": [{"task_id": "old", "output": "x"}]})
    tasks = sb.mapreduce.init_plan("goal", "u", ["a", {"id": "custom", "description": "b"}])
    assert [t["id"] for t in tasks] == ["task-1", "custom"]
    patch = sb.patch()
    assert isinstance(patch["mapreduce_results"], Overwrite)
    assert patch["mapreduce_results"].value == []
    assert patch["mapreduce_task"] is None
    assert sb.mapreduce.snapshot().results == ()


def test_mapreduce_init_plan_refuses_duplicate_ids_and_bad_tasks() -> None:
    sb = StateBuilder({})
    with pytest.raises(ValueError, match="duplicate task id"):
        sb.mapreduce.init_plan(
            "g", None, [{"id": "x", "description": "a"}, {"id": "x", "description": "b"}]
        )
    with pytest.raises(TypeError, match="description"):
        sb.mapreduce.init_plan("g", None, [{"id": "x"}])
    with pytest.raises(TypeError, match="single string"):
        sb.mapreduce.init_plan("g", None, "abc")
    assert sb.patch() == {}


def test_mapreduce_append_result_deduplicates_on_rerun() -> None:
    state: dict[str, Any] = {"mapreduce_results": [{"task_id": "task-1", "output": "a"}]}
    sb = StateBuilder(state)
    sb.mapreduce.append_result({"task_id": "task-1", "output": "a2"})
    sb.mapreduce.append_results([{"task_id": "task-2", "output": "b"}])
    patch = sb.patch()
    assert patch["mapreduce_results"] == [
        {"task_id": "task-1", "output": "a2"},
        {"task_id": "task-2", "output": "b"},
    ]
    after = apply(apply(state, patch), patch)
    assert [x["task_id"] for x in after["mapreduce_results"]] == ["task-1", "task-2"]
    with pytest.raises(ValueError, match="task_id"):
        sb.mapreduce.append_result({"output": "x"})


def test_mapreduce_reset_then_append_is_one_overwrite() -> None:
    sb = StateBuilder({"mapreduce_results": [{"task_id": "a"}]})
    sb.mapreduce.reset_results()
    sb.mapreduce.append_result({"task_id": "b"})
    patch = sb.patch()
    assert patch["mapreduce_results"] == Overwrite([{"task_id": "b"}])


def test_mapreduce_set_current_task_and_missing_tasks() -> None:
    state = {
        "mapreduce_tasks": [{"id": "t1", "description": "a"}, {"id": "t2", "description": "b"}],
        "mapreduce_results": [{"task_id": "t1", "output": "x"}],
    }
    sb = StateBuilder(state)
    assert [t["id"] for t in sb.mapreduce.snapshot().missing_tasks()] == ["t2"]
    task = sb.mapreduce.set_current_task({"id": "t2", "description": "b"})
    assert sb.mapreduce.snapshot().task == task
    assert sb.patch() == {"mapreduce_task": {"id": "t2", "description": "b"}}


# ----------------------------------------------------------------------------- timeline


def test_timeline_append_flush_and_autoflush() -> None:
    sb = StateBuilder({"timeline": [{"event": "start"}]})
    sb.timeline.append([{"event": "a"}])
    assert sb.timeline.dirty
    assert [e["event"] for e in sb.timeline.snapshot().entries] == ["start", "a"]
    sb.timeline.flush()
    assert not sb.timeline.dirty
    sb.timeline.append([{"event": "b"}])
    patch = sb.patch()  # flushes "b" too: nothing appended is silently lost
    assert [e["event"] for e in patch["timeline"]] == ["start", "a", "b"]


def test_timeline_refuses_non_mappings() -> None:
    sb = StateBuilder({})
    with pytest.raises(TypeError, match="single mapping"):
        sb.timeline.append({"event": "x"})
    with pytest.raises(TypeError, match=r"entries\[0\]"):
        sb.timeline.append(["x"])  # type: ignore[list-item]


# ----------------------------------------------------------------------------- reducer fields


def test_reducer_fields_cannot_be_written_as_plain_fields() -> None:
    sb = StateBuilder({})
    with pytest.raises(PersistenceError, match="reducer field"):
        sb._buf.write("messages", [])
    with pytest.raises(UnknownStateKeyError, match="'nope'"):
        sb._buf.write("nope", 1)


def test_memory_delta_gives_the_appended_messages_with_their_stored_ids() -> None:
    sb = StateBuilder({"messages": [HumanMessage("hi", id="h1")]})
    assert sb.memory.delta() == ()
    sb.memory.append([AIMessage("hello")])
    (reply,) = sb.memory.delta()
    assert reply.id  # the stable id the reducer will store it under
    assert [m.id for m in sb.memory.snapshot()] == ["h1", reply.id]
