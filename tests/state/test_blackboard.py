"""Reducers and schema helpers of the Blackboard."""

from __future__ import annotations

import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite

from ctxpolicy.state import (
    Blackboard,
    blackboard_schema,
    merge_keys,
    merge_results,
    result_key,
    state_keys,
)


def r(task_id: str, output: str = "out") -> dict[str, str]:
    return {"task_id": task_id, "output": output}


def test_merge_results_appends_new_tasks_in_order() -> None:
    assert merge_results([r("a")], [r("b"), r("c")]) == [r("a"), r("b"), r("c")]


def test_merge_results_replaces_a_task_in_place() -> None:
    merged = merge_results([r("a", "old"), r("b")], [r("a", "new")])
    assert merged == [r("a", "new"), r("b")]


def test_merge_results_accepts_a_single_mapping() -> None:
    assert merge_results([], r("a")) == [r("a")]


def test_merge_results_deduplicates_within_one_update() -> None:
    assert merge_results(None, [r("a", "1"), r("a", "2")]) == [r("a", "2")]


@pytest.mark.parametrize(
    "reset",
    [Overwrite([]), {"__overwrite__": []}, {"type": "__overwrite__", "value": []}],
    ids=["typed", "sentinel-dict", "json-erased"],
)
def test_merge_results_honours_overwrite(reset: object) -> None:
    assert merge_results([r("a"), r("b")], reset) == []


@pytest.mark.parametrize(
    "result",
    [
        {"task_id": "b", "value": []},
        {"task_id": "b", "type": "summary", "value": "v"},
        {"task_id": "b"},
        {"task_id": "b", "__overwrite__": "not a reset"},
    ],
    ids=["value-key", "type-and-value", "single-key", "sentinel-among-others"],
)
def test_a_result_that_only_looks_like_an_overwrite_is_appended(result: dict) -> None:
    """Only the exact erased forms of ``Overwrite`` reset; a result with a ``value`` key,
    a ``type`` key or a single key is an ordinary result."""
    assert merge_results([r("a")], result) == [r("a"), result]
    assert merge_results([r("a")], [result]) == [r("a"), result]


def test_merge_results_overwrite_with_values_deduplicates() -> None:
    assert merge_results([r("z")], Overwrite([r("a"), r("a", "2")])) == [r("a", "2")]


@pytest.mark.parametrize("bad", [{"output": "x"}, {"task_id": ""}, {"task_id": 3}])
def test_result_without_task_id_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="task_id"):
        merge_results([], [bad])


def test_result_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="mapping"):
        result_key("task-1")  # type: ignore[arg-type]


def test_merge_results_refuses_a_scalar_update() -> None:
    with pytest.raises(ValueError, match="list of items"):
        merge_results([], 3)


results_lists = st.lists(
    st.builds(r, st.sampled_from(["a", "b", "c", "d"]), st.text(max_size=3)), max_size=8
)


@given(results_lists, results_lists)
def test_merge_results_never_holds_a_task_twice(left: list, right: list) -> None:
    merged = merge_results(merge_results([], left), right)
    keys = [x["task_id"] for x in merged]
    assert len(keys) == len(set(keys))
    assert set(keys) == {x["task_id"] for x in left + right}


@given(results_lists, results_lists)
def test_merge_results_is_idempotent(left: list, right: list) -> None:
    once = merge_results(left, right)
    assert merge_results(once, right) == once


def test_merge_keys_is_an_ordered_union() -> None:
    assert merge_keys(["a", "b"], ["b", "c", "a", "d"]) == ["a", "b", "c", "d"]
    assert merge_keys(None, ["solo"]) == ["solo"]


def test_merge_keys_honours_overwrite_and_rejects_non_strings() -> None:
    assert merge_keys(["a"], Overwrite(["b"])) == ["b"]
    with pytest.raises(TypeError, match="deliverable key"):
        merge_keys([], [1])


@given(st.lists(st.text(max_size=2), max_size=6), st.lists(st.text(max_size=2), max_size=6))
def test_merge_keys_unique_and_idempotent(left: list[str], right: list[str]) -> None:
    once = merge_keys(left, right)
    assert len(once) == len(set(once))
    assert merge_keys(once, right) == once
    assert set(once) == set(left) | set(right)


def test_state_keys_lists_every_seed_field() -> None:
    keys = state_keys()
    seed_fields = {
        "namespace",
        "session_id",
        "active_agent",
        "assigned_task",
        "last_agent_status",
        "last_agent_failure_kind",
        "last_agent_error",
        "messages",
        "deliverable_keys",
        "todo",
        "compression__context",
        "goal",
        "plan",
        "reflection",
        "error_retry_count",
        "mapreduce_goal",
        "mapreduce_understanding",
        "mapreduce_tasks",
        "mapreduce_task",
        "mapreduce_results",
        "timeline",
    }
    assert seed_fields <= keys
    assert "framework__context" not in keys  # may never be persisted


def test_state_keys_refuses_a_non_typeddict() -> None:
    with pytest.raises(TypeError, match="TypedDict"):
        state_keys(dict)


def test_reducers_are_declared_with_annotated() -> None:
    hints = typing.get_type_hints(Blackboard, include_extras=True)
    assert hints["mapreduce_results"].__metadata__ == (merge_results,)
    assert hints["deliverable_keys"].__metadata__ == (merge_keys,)
    assert hints["messages"].__metadata__ == (add_messages,)


def test_blackboard_schema_adds_custom_persisted_layers() -> None:
    schema = blackboard_schema(["profile__context", "compression__context"])
    assert state_keys(schema) == state_keys() | {"profile__context"}
    hints = typing.get_type_hints(schema, include_extras=True)
    assert hints["mapreduce_results"].__metadata__ == (merge_results,)


def test_blackboard_schema_without_extras_is_the_base() -> None:
    assert blackboard_schema(["compression__context"]) is Blackboard


def test_blackboard_schema_refuses_non_block_names() -> None:
    with pytest.raises(ValueError, match="system_prompt"):
        blackboard_schema(["system_prompt"])


def test_blackboard_schema_is_identity_stable() -> None:
    assert blackboard_schema(["a__context"]) is blackboard_schema(("a__context",))
