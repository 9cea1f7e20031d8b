"""Unit splitting: units the size of a fact, each knowing its message and span."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.recall.units import UnitSize, split_message, split_text, turn_text

#: Sentence units for every message (the rules for long prose, on short texts).
SENTENCES = UnitSize(turn_chars=0)


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


def test_prose_splits_into_sentences_and_long_lines_are_cut() -> None:
    para = "word " * 200
    text = f"First paragraph about the deploy.\nIt spans two lines.\n\n{para}\n\nLast one."
    units = split_text(text, message_id="p", position=1, role="assistant")
    # a sentence under min_chars (40) joins the next one; lines of a paragraph are joined
    assert units[0].text == "First paragraph about the deploy. It spans two lines."
    assert (units[0].start_line, units[0].end_line) == (1, 2)
    assert all(len(u.text) <= UnitSize().max_chars for u in units)
    assert units[-1].text == "Last one."
    assert units[-1].start_line == 6


def test_the_sentence_that_states_a_fact_is_its_own_unit_with_the_one_before_as_context() -> None:
    text = (
        "Did anyone rotate the credentials of the payments service recently? Chen asked in "
        "standup. By the way, search-indexer's Grafana dashboard is grafana.acme.io/d/x1y2, "
        "Marcus confirmed it this morning."
    )
    units = split_text(text, message_id="m", position=4, role="user", size=SENTENCES)
    assert [u.text for u in units] == [
        "Did anyone rotate the credentials of the payments service recently?",
        (
            "Chen asked in standup. By the way, search-indexer's Grafana dashboard is "
            "grafana.acme.io/d/x1y2, Marcus confirmed it this morning."
        ),
    ]
    assert units[1].context == f"{text[:80]} … {units[0].text}"


def test_a_sentence_carries_its_messages_first_line_as_context() -> None:
    text = "(08.01.2024) Kate: " + " ".join(f"Sentence number {i} is here." for i in range(40))
    units = split_text(text, message_id="n", position=4, role="user")
    assert len(units) > 1
    assert units[0].context == ""
    assert all(u.context.startswith("(08.01.2024) Kate:") for u in units[1:])


def test_turn_text_is_a_short_prose_turn_on_one_line() -> None:
    turn = "(07.01.2024) elise: Thanks Kate!\nI tried the Emsibeth shampoo. It works great."
    assert turn_text(turn, turn_chars=600) == turn.replace("\n", " ")
    assert turn_text(turn, turn_chars=40) is None  # longer than a turn
    zh = "(2024-06-01) 用户：订单表的分区字段改成 dt 了。"
    assert turn_text(zh, turn_chars=600) == zh
    assert turn_text('[{"a": 1}, {"b": 2}]', turn_chars=600) is None  # a JSON payload
    assert turn_text("02:01 ok\n02:02 ok\n02:03 ERROR", turn_chars=600) is None  # a dump
    assert turn_text("  \n", turn_chars=600) is None


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
    text = "Alpha beta gamma. Delta epsilon zeta eta theta. " * 3
    default = split_text(text, message_id="x", position=0, role="user", size=SENTENCES)
    assert [u.text for u in default][:1] == ["Alpha beta gamma. Delta epsilon zeta eta theta."]
    fine = split_text(
        text, message_id="x", position=0, role="user", size=UnitSize(min_chars=1, turn_chars=0)
    )
    assert len(fine) == 6
    narrow = split_text(
        "word " * 100, message_id="x", position=0, role="user", size=UnitSize(max_chars=60)
    )
    assert len(narrow) > 1
    assert all(len(u.text) <= 60 for u in narrow)


@given(st.text(max_size=3000))
def test_every_non_blank_line_is_covered_by_some_unit(text: str) -> None:
    units = split_text(text, message_id="m", position=0, role="tool")
    joined = " ".join(" ".join(u.text.split()) for u in units)
    for line in text.splitlines():
        for word in line.split():
            assert word in joined
    assert all(u.text.strip() for u in units)
    assert [u.part for u in units] == list(range(len(units)))


STATEMENTS = [
    "For the record, the deployment region of auth-gateway is eu-west-3.",
    "Small fix: the release build id of session-cache is actually 470f51d.",
    "15:41:10 INFO ledger [kafka-stg-03] startup: resolved release build id -> b17d4ed",
    '{"ts": "14:52:13", "setting": "release build id", "value": "c36d466"}',
    "Heads-up: we settled on fe8a974 as the release build id of search-indexer.",
    "The on-call owner of billing-worker is Ingrid Solberg.",
    "The Slack channel of notify-svc is #team-notify-ab.",
]
MENTIONS = [
    "Who touched the release build id settings of checkout-web last week? OPS-1228 did.",
    "06:32:30 ERROR checkout-web [redis-dev-14] config check: release build id unchanged",
    '{"ts": "14:52:13", "service": "checkout-web", "setting": "build id", "status": "unchanged"}',
    "I could not confirm the release build id of inventory-sync from the logs alone.",
    "Is the release build id of checkout-web documented anywhere?",
]


def test_statements_of_a_value_are_told_from_mere_mentions() -> None:
    from ctxpolicy.recall.units import states_value

    assert [states_value(t) for t in STATEMENTS] == [True] * len(STATEMENTS)
    assert [states_value(t) for t in MENTIONS] == [False] * len(MENTIONS)


def test_a_statement_outranks_mentions_of_its_subject() -> None:
    from langchain_core.messages import HumanMessage as H

    from ctxpolicy.recall.index import query_terms
    from ctxpolicy.recall.ingest import HistorySync
    from ctxpolicy.recall.sqlite import SQLiteRecallIndex

    index = SQLiteRecallIndex()
    mentions = [
        H(f"Is the release build id of checkout-web documented? ({i})", id=f"m{i}")
        for i in range(30)
    ]
    fact = H(
        "A note: the release build id of checkout-web is c36d466, deployed by Lena on Monday.",
        id="f",
    )
    HistorySync(index).sync("t", [fact, *mentions])
    hits = index.search("t", query_terms("What is the release build id of checkout-web?"), limit=5)
    assert hits[0].unit.message_id == "f"
