"""Task records (`ctxpolicy.memory.tasks`): exact fields, summaries and errors."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.memory.items import MemoryItem
from ctxpolicy.memory.messages import message_key
from ctxpolicy.memory.tasks import (
    PARAM_VALUE_CHARS,
    RESULT_SUMMARY_CHARS,
    TASK_KEY,
    TASK_SUMMARY_KEY,
    TaskRecord,
    summarize_params,
    summarize_task,
    task_of,
    task_records,
)


def _record(**changes) -> TaskRecord:
    fields = {
        "task_id": "call-1",
        "action": "lookup",
        "parameters": {"host": "db1", "port": 5432},
        "result": "port is 5432",
        "success": True,
        "parent_task_id": "h1",
        "metadata": {"agent": "planner", "message_id": "t1"},
    }
    fields.update(changes)
    return TaskRecord(**fields)


def test_constants():
    assert (TASK_KEY, TASK_SUMMARY_KEY) == ("task", "task_summary")
    assert (PARAM_VALUE_CHARS, RESULT_SUMMARY_CHARS) == (60, 240)


def test_record_defaults():
    record = TaskRecord("c", "a", {}, "r", False)
    assert record.parent_task_id is None
    assert record.metadata == {}


# --- to_data / from_data ---------------------------------------------------------------


def test_to_data_is_exact_plain_data():
    data = _record().to_data()
    assert data == {
        "task_id": "call-1",
        "action": "lookup",
        "parameters": {"host": "db1", "port": 5432},
        "result": "port is 5432",
        "success": True,
        "parent_task_id": "h1",
        "metadata": {"agent": "planner", "message_id": "t1"},
    }
    assert list(data) == [
        "task_id",
        "action",
        "parameters",
        "result",
        "success",
        "parent_task_id",
        "metadata",
    ]
    assert type(data["parameters"]) is dict
    assert type(data["metadata"]) is dict


def test_to_data_copies_its_mappings():
    record = _record()
    data = record.to_data()
    data["parameters"]["extra"] = 1
    data["metadata"]["extra"] = 2
    assert record.parameters == {"host": "db1", "port": 5432}
    assert record.metadata == {"agent": "planner", "message_id": "t1"}


def test_from_data_round_trips():
    record = _record()
    assert TaskRecord.from_data(record.to_data()) == record
    failed = _record(success=False, parent_task_id=None, metadata={})
    assert TaskRecord.from_data(failed.to_data()) == failed


def test_from_data_copies_parameters_and_metadata():
    params = {"q": "x"}
    meta = {"agent": "a"}
    record = TaskRecord.from_data(
        {"task_id": "c", "action": "a", "parameters": params, "metadata": meta}
    )
    params["q"] = "changed"
    meta["agent"] = "changed"
    assert record.parameters == {"q": "x"}
    assert record.metadata == {"agent": "a"}
    assert type(record.parameters) is dict
    assert type(record.metadata) is dict


def test_from_data_defaults():
    record = TaskRecord.from_data({"task_id": "c", "action": "a"})
    assert record == TaskRecord(
        task_id="c",
        action="a",
        parameters={},
        result="",
        success=True,
        parent_task_id=None,
        metadata={},
    )
    assert record.result == ""
    assert record.success is True


def test_from_data_normalizes_values():
    record = TaskRecord.from_data(
        {
            "task_id": "c",
            "action": "a",
            "parameters": None,
            "result": 42,
            "success": 0,
            "parent_task_id": 7,
            "metadata": ["not", "a", "mapping"],
        }
    )
    assert record.parameters == {}
    assert record.result == "42"
    assert record.success is False
    assert record.parent_task_id is None
    assert record.metadata == {}
    assert TaskRecord.from_data({"task_id": "c", "action": "a", "success": 1}).success is True
    assert TaskRecord.from_data({"task_id": "c", "action": "a", "metadata": None}).metadata == {}
    kept = TaskRecord.from_data({"task_id": "c", "action": "a", "parent_task_id": "p"})
    assert kept.parent_task_id == "p"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "a"}, "task data lacks field 'task_id'"),
        ({"task_id": "c"}, "task data lacks field 'action'"),
        ({}, "task data lacks field 'task_id'"),
    ],
)
def test_from_data_missing_fields(data, message):
    with pytest.raises(ValueError) as info:
        TaskRecord.from_data(data)
    assert str(info.value) == message
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ is True


@pytest.mark.parametrize(("data", "kind"), [(None, "NoneType"), (["task_id"], "list")])
def test_from_data_of_non_mapping_data_is_a_value_error(data: object, kind: str) -> None:
    with pytest.raises(ValueError, match=rf"^task data must be a mapping, got {kind}$") as info:
        TaskRecord.from_data(data)  # type: ignore[arg-type]
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    "data",
    [
        {"task_id": 1, "action": "a"},
        {"task_id": "c", "action": None},
        {"task_id": None, "action": None},
    ],
)
def test_from_data_id_and_action_must_be_strings(data):
    with pytest.raises(ValueError) as info:
        TaskRecord.from_data(data)
    assert str(info.value) == f"task 'task_id' and 'action' must be strings, got {data!r}"


@pytest.mark.parametrize("params", [["a", 1], "k=v", 5])
def test_from_data_parameters_must_be_a_mapping(params):
    with pytest.raises(ValueError) as info:
        TaskRecord.from_data({"task_id": "c", "action": "a", "parameters": params})
    assert str(info.value) == f"task 'parameters' must be a mapping, got {params!r}"


# --- task_of -----------------------------------------------------------------------------


def _item(metadata) -> MemoryItem:
    return MemoryItem(id="i", content="x", importance=0.5, seq=1, metadata=metadata)


def test_task_of_reads_the_record_under_the_task_key():
    record = _record()
    assert task_of(_item({"task": record.to_data()})) == record
    assert task_of(_item({})) is None
    assert task_of(_item({"task": "lookup"})) is None
    assert task_of(_item({"task": {"task_id": "c"}})) is None  # invalid: no action
    assert task_of(_item({"task_summary": record.to_data()})) is None


# --- summarize_params / summarize_task ----------------------------------------------------


def test_summarize_params_exact_text():
    params = {"q": "café", "n": 3, "opts": {"é": [1, None]}, "flag": True, "when": {1}}
    assert summarize_params(params) == ('q=café, n=3, opts={"é": [1, null]}, flag=true, when="{1}"')
    assert summarize_params({}) == ""


def test_summarize_params_cuts_long_values_at_the_limit():
    exact = "a" * PARAM_VALUE_CHARS
    assert summarize_params({"k": exact}) == f"k={exact}"
    longer = "b" * (PARAM_VALUE_CHARS + 1)
    assert summarize_params({"k": longer}) == "k=" + "b" * (PARAM_VALUE_CHARS - 1) + "…"
    assert summarize_params({"k": "abcdef", "m": "xyz"}, max_value=4) == "k=abc…, m=xyz"
    assert summarize_params({"k": "abcd"}, max_value=4) == "k=abcd"
    assert summarize_params({"k": [1, 2, 3]}, max_value=5) == "k=[1, …"


def test_summarize_task_text_and_fields():
    record = _record(parameters={"q": "x", "n": 2})
    text, fields = summarize_task(record, "found 3 rows")
    assert text == "lookup(q=x, n=2) -> ok: found 3 rows"
    assert fields == {
        "task_id": "call-1",
        "action": "lookup",
        "param_summary": "q=x, n=2",
        "result_summary": "found 3 rows",
        "success": True,
        "parent_task_id": "h1",
    }
    text, fields = summarize_task(_record(success=False, parameters={}, parent_task_id=None), "")
    assert text == "lookup() -> failed:"
    assert fields["success"] is False
    assert fields["parent_task_id"] is None
    assert fields["result_summary"] == ""
    assert fields["param_summary"] == ""


# --- task_records ---------------------------------------------------------------------------


def _turn():
    return [
        HumanMessage("find the port", id="h1"),
        AIMessage(
            "",
            id="a1",
            name="planner",
            tool_calls=[
                {"name": "lookup", "args": {"host": "db1"}, "id": "c1"},
                {"name": "ping", "args": {}, "id": "c2"},
            ],
        ),
        ToolMessage("port is 5432", tool_call_id="c1", id="t1", name="lookup"),
        ToolMessage("timeout", tool_call_id="c2", id="t2", status="error"),
    ]


def test_task_records_of_a_turn():
    records = task_records(_turn())
    assert list(records) == ["t1", "t2"]
    assert records["t1"] == TaskRecord(
        task_id="c1",
        action="lookup",
        parameters={"host": "db1"},
        result="port is 5432",
        success=True,
        parent_task_id="h1",
        metadata={"agent": "planner", "message_id": "t1"},
    )
    assert records["t2"] == TaskRecord(
        task_id="c2",
        action="ping",
        parameters={},
        result="timeout",
        success=False,
        parent_task_id="h1",
        metadata={"agent": "planner", "message_id": "t2"},
    )
    assert type(records["t1"].parameters) is dict
    assert type(records["t1"].metadata) is dict


def test_task_records_without_ids_names_or_parent():
    ai = AIMessage("", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c9"}])
    tool = ToolMessage("2", tool_call_id="c9")
    records = task_records([SystemMessage("sys"), ai, tool])
    assert records == {
        message_key(tool): TaskRecord(
            task_id="c9",
            action="calc",
            parameters={"x": 1},
            result="2",
            success=True,
            parent_task_id=None,
            metadata={},
        )
    }


def test_task_records_parent_is_the_last_human_message_before_the_call():
    first = HumanMessage("first")
    second = HumanMessage("second")
    messages = [
        first,
        second,
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        HumanMessage("later", id="h-late"),
        ToolMessage("done", tool_call_id="c1", id="t1"),
    ]
    assert task_records(messages)["t1"].parent_task_id == message_key(second)


def test_task_records_skip_unanswered_and_unknown_calls():
    messages = [
        HumanMessage("q", id="h1"),
        ToolMessage("early", tool_call_id="c1", id="t0"),  # before its call: unknown
        AIMessage("", tool_calls=[{"name": "t", "args": {"a": 1}, "id": "c1"}]),
        ToolMessage("stray", tool_call_id="zz", id="t-stray"),
        ToolMessage("answer", tool_call_id="c1", id="t1"),
    ]
    records = task_records(messages)
    assert list(records) == ["t1"]
    assert records["t1"].result == "answer"
    assert records["t1"].parameters == {"a": 1}


def test_task_records_ignore_calls_without_an_id():
    messages = [
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": None}]),
        AIMessage("", tool_calls=[{"name": "u", "args": {}, "id": ""}]),
        ToolMessage("r", tool_call_id="None", id="t1"),
        ToolMessage("r", tool_call_id="", id="t2"),
    ]
    assert task_records(messages) == {}


def test_task_records_use_known_calls_without_changing_them():
    known = {
        "c1": {"name": "search", "args": {"q": "x"}, "parent_task_id": "h0", "agent": "bot"},
        "c2": {"name": "", "args": None, "parent_task_id": None, "agent": None},
        "c3": {},
    }
    before = {k: dict(v) for k, v in known.items()}
    messages = [
        AIMessage("", tool_calls=[{"name": "other", "args": {}, "id": "c4"}]),
        ToolMessage("hits", tool_call_id="c1", id="t1"),
        ToolMessage("x", tool_call_id="c2", id="t2", name="named"),
        ToolMessage("y", tool_call_id="c3", id="t3"),
    ]
    records = task_records(messages, known_calls=known)
    assert known == before
    assert records["t1"] == TaskRecord(
        task_id="c1",
        action="search",
        parameters={"q": "x"},
        result="hits",
        success=True,
        parent_task_id="h0",
        metadata={"agent": "bot", "message_id": "t1"},
    )
    assert records["t2"].action == "named"
    assert records["t2"].parameters == {}
    assert records["t2"].metadata == {"message_id": "t2"}
    assert records["t3"].action == "tool"
    assert records["t3"].parent_task_id is None
    assert records["t3"].metadata == {"message_id": "t3"}
    assert task_records([], known_calls=known) == {}
    assert task_records([ToolMessage("z", tool_call_id="c1", id="t9")]) == {}
    alone = task_records([ToolMessage("z", tool_call_id="c1", id="t9")], known_calls=known)
    assert alone["t9"].action == "search"


def test_task_records_a_later_call_with_the_same_id_wins():
    messages = [
        HumanMessage("q1", id="h1"),
        AIMessage("", tool_calls=[{"name": "old", "args": {"v": 1}, "id": "c1"}]),
        HumanMessage("q2", id="h2"),
        AIMessage("", name="b", tool_calls=[{"name": "new", "args": {"v": 2}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1", id="t1"),
    ]
    record = task_records(messages)["t1"]
    assert (record.action, record.parameters, record.parent_task_id) == ("new", {"v": 2}, "h2")
    assert record.metadata == {"agent": "b", "message_id": "t1"}


def test_task_records_status_error_only_is_a_failure():
    messages = [
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("boom", tool_call_id="c1", id="t1", status="error"),
        ToolMessage("fine", tool_call_id="c1", id="t2", status="success"),
    ]
    records = task_records(messages)
    assert records["t1"].success is False
    assert records["t2"].success is True
