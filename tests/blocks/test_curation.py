from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.blocks import BlocksError
from ctxpolicy.blocks.curation import (
    CurationLog,
    create_dismiss_memory_tool,
    curate_messages,
    describe_tool_call,
    format_placeholder,
    unmatched_dismissals,
)


def _conversation():
    return [
        HumanMessage("explain the equation", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[
                {
                    "id": "call_1",
                    "name": "read_file",
                    "args": {"path": "ground-truth.md", "start_line": 30, "end_line": 50},
                },
                {"id": "call_2", "name": "read_block", "args": {"path": "g.md", "block_id": "X"}},
            ],
        ),
        ToolMessage("fact 30 ... fact 50", tool_call_id="call_1", id="t1"),
        ToolMessage("block X", tool_call_id="call_2", id="t2"),
        AIMessage("here it is", id="a2"),
    ]


def test_placeholder_text_matches_the_seed():
    assert (
        format_placeholder("read ground-truth.md:30-50", "not relevant")
        == "[read ground-truth.md:30-50 — dismissed: not relevant]"
    )
    assert describe_tool_call("search", {"pattern": "x"}) == "searched 'x' in ."


def test_dismissed_tool_result_becomes_a_placeholder_and_structure_is_kept():
    log = CurationLog()
    log.dismiss("call_1", summary="not relevant", by="model")
    original = _conversation()
    curated = curate_messages(original, log)
    assert curated[2].content == "[read ground-truth.md:30-50 — dismissed: not relevant]"
    assert isinstance(curated[2], ToolMessage) and curated[2].tool_call_id == "call_1"
    assert curated[2].id == "t1"
    assert curated[3] is original[3] and curated[1] is original[1]
    assert original[2].content == "fact 30 ... fact 50"  # the record is untouched


def test_dismiss_by_message_id_and_latest_wins():
    log = CurationLog()
    log.dismiss("t2", summary="dup")
    log.dismiss("t2", summary="duplicate of call_1")
    log.dismiss("h1", summary="greeting")
    curated = curate_messages(_conversation(), log)
    assert curated[3].content == "[read g.md#X — dismissed: duplicate of call_1]"
    assert curated[0].content == "[human message — dismissed: greeting]"
    assert [r.summary for r in log.records] == ["dup", "duplicate of call_1", "greeting"]


def test_dismiss_memory_tool_records_for_audit():
    log = CurationLog()
    tool = create_dismiss_memory_tool(log)
    assert tool.name == "dismiss_memory"
    out = tool.invoke({"target_message_id": "call_1", "summary": "not relevant"})
    assert "dismissed call_1" in out
    (record,) = log.records
    assert (record.target_id, record.summary, record.by, record.sequence) == (
        "call_1",
        "not relevant",
        "model",
        0,
    )
    err = tool.invoke({"target_message_id": "call_1", "summary": "  "})
    assert "summary must say" in err and len(log.records) == 1


def test_log_round_trips_and_reports_unmatched():
    log = CurationLog()
    log.dismiss("call_1", summary="a", by="model")
    log.dismiss("ghost", summary="b")
    again = CurationLog.from_data(log.to_data())
    assert again.records == log.records
    assert [r.target_id for r in unmatched_dismissals(_conversation(), again)] == ["ghost"]
    with pytest.raises(BlocksError, match="by must be"):
        CurationLog.from_data([{"target_id": "x", "summary": "s", "by": "robot"}])
    with pytest.raises(BlocksError, match="lacks 'summary'"):
        CurationLog.from_data([{"target_id": "x", "by": "user"}])


@pytest.mark.parametrize(("target", "summary"), [("", "s"), ("x", ""), ("x", "y" * 501)])
def test_bad_dismissals_are_refused(target, summary):
    with pytest.raises(BlocksError):
        CurationLog().dismiss(target, summary=summary)
