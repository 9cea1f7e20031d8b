"""Unit splitting: units the size of a fact, each knowing its message and span."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.recall.units import UnitSize, split_message, split_text


def test_short_message_is_one_unit_with_its_span() -> None:
    units = split_message(HumanMessage("The prod DB port is 6432."), message_id="m1", position=7)
    assert len(units) == 1
    (unit,) = units
    assert (unit.message_id, unit.position, unit.role, unit.text) == (
        "m1",
        7,
        "user",
        "The prod DB port is 6432.",
    )
    assert (unit.start_line, unit.end_line) == (1, 1)
    assert unit.label() == "#7 user"


def test_line_buried_in_a_tool_dump_is_its_own_unit_with_tool_name_and_line() -> None:
    lines = [f"2024-06-01T10:{i:02d} svc-a INFO ok latency={i}ms" for i in range(100)]
    lines[57] = "2024-06-01T10:57 svc-a WARN failover region is now eu-west-3"
    dump = "\n".join(lines)
    call = AIMessage("", tool_calls=[{"name": "get_logs", "args": {"svc": "a"}, "id": "c1"}])
    message = ToolMessage(dump, tool_call_id="c1")
    units = split_message(message, message_id="t1", position=3, tool_names={"c1": "get_logs"})
    assert len(units) == 100
    buried = [u for u in units if "eu-west-3" in u.text]
    assert len(buried) == 1
    unit = buried[0]
    assert unit.text == lines[57]
    assert (unit.start_line, unit.end_line) == (58, 58)
    assert unit.tool == "get_logs"
    assert unit.role == "tool"
    assert unit.label() == "#3 tool get_logs L58"
    # a little context (the first line of the dump) is indexed with it, not shown
    assert unit.context == lines[0]
    assert call.tool_calls  # the AI message names the tool the ToolMessage answers


def test_json_payload_splits_into_records() -> None:
    rows = [{"table": f"t{i}", "owner": f"team{i}", "rows": i * 10} for i in range(30)]
    rows[12]["owner"] = "orders-squad"
    units = split_text(json.dumps({"rows": rows}), message_id="j", position=0, role="tool")
    assert len(units) == 30
    assert sum("orders-squad" in u.text for u in units) == 1
    assert json.loads(units[12].text)["owner"] == "orders-squad"


def test_prose_splits_into_paragraphs_and_long_lines_are_cut() -> None:
    para = "word " * 200
    text = f"First paragraph about the deploy.\nIt spans two lines.\n\n{para}\n\nLast one."
    units = split_text(text, message_id="p", position=1, role="assistant")
    assert units[0].text == "First paragraph about the deploy.\nIt spans two lines."
    assert (units[0].start_line, units[0].end_line) == (1, 2)
    assert all(len(u.text) <= UnitSize().max_chars for u in units)
    assert units[-1].text == "Last one."
    assert units[-1].start_line == 6


def test_ai_tool_calls_are_units_too() -> None:
    message = AIMessage(
        "Let me look.",
        tool_calls=[{"name": "lookup_host", "args": {"host": "db-7.internal"}, "id": "c9"}],
    )
    units = split_message(message, message_id="a", position=2)
    assert [u.text for u in units] == ["Let me look.", 'lookup_host({"host": "db-7.internal"})']
    assert units[1].tool == "lookup_host"
    assert [u.part for u in units] == [0, 1]


def test_unit_size_is_configurable() -> None:
    text = "alpha beta gamma delta epsilon " * 10
    big = split_text(text, message_id="x", position=0, role="user")
    small = split_text(
        text, message_id="x", position=0, role="user", size=UnitSize(short_chars=40, max_chars=60)
    )
    assert len(big) == 1
    assert len(small) > 1
    assert all(len(u.text) <= 60 for u in small)


@given(st.text(max_size=3000))
def test_every_non_blank_line_is_covered_by_some_unit(text: str) -> None:
    units = split_text(text, message_id="m", position=0, role="tool")
    joined = " ".join(" ".join(u.text.split()) for u in units)
    for line in text.splitlines():
        for word in line.split():
            assert word in joined
    assert all(u.text.strip() for u in units)
    assert [u.part for u in units] == list(range(len(units)))
