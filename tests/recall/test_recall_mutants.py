"""Exact behaviour of the recall helpers: units, the index protocol helpers, selection.

Every assertion states the exact value a caller observes (texts, spans, labels, orders,
boundaries), so a change of a comparison, a constant or a string in these modules shows.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.recall.floor import _stem, terms_pattern
from ctxpolicy.recall.index import (
    MAX_RANKED_POSTINGS,
    STATEMENT_BOOST,
    STOPWORDS,
    UNIT_COLUMNS,
    RecallHit,
    query_terms,
    terms_within_budget,
    unit_from_row,
)
from ctxpolicy.recall.select import (
    DEFAULT_HEADER,
    MIN_LINE_TOKENS,
    RecalledUnit,
    _missing_from_prompt,
    _statement_subject,
    render_line,
    select_units,
)
from ctxpolicy.recall.units import (
    MAX_CONTEXT_CHARS,
    MAX_UNIT_CHARS,
    MIN_UNIT_CHARS,
    Unit,
    UnitSize,
    _chunks,
    _dump_spans,
    _json_records,
    _paragraphs,
    _records_of,
    _sentences,
    split_message,
    split_text,
    states_value,
)


def unit(position: int = 1, text: str = "x", **kw) -> Unit:
    fields = {
        "message_id": f"m{position}",
        "position": position,
        "part": 0,
        "role": "user",
        "tool": None,
        "start_line": 1,
        "end_line": 1,
        "text": text,
        "context": "",
        "statement": False,
    }
    fields.update(kw)
    return Unit(**fields)


# --- units.py ---------------------------------------------------------------------------


def test_unit_size_defaults_and_constants() -> None:
    assert (MIN_UNIT_CHARS, MAX_UNIT_CHARS, MAX_CONTEXT_CHARS) == (40, 600, 160)
    assert UnitSize() == UnitSize(min_chars=40, max_chars=600)


def test_unit_key_and_labels() -> None:
    assert unit(3, part=2).key == "m3#2"
    assert unit(0).label() == "#0 user"
    assert unit(-5).label() == "user"
    assert unit(7, tool="sh").label() == "#7 user sh"
    assert unit(7, start_line=3, end_line=5).label() == "#7 user L3-5"
    assert unit(7, start_line=2, end_line=2).label() == "#7 user L2"
    assert unit(7, start_line=1, end_line=2).label() == "#7 user L1-2"
    assert unit(7, start_line=0, end_line=0, tool="f").label() == "#7 user f"
    # a span whose end is before its start still names its start line
    assert unit(7, start_line=2, end_line=1).label() == "#7 user L2"
    assert unit(7, start_line=1, end_line=3).label() == "#7 user L1-3"


def test_states_value_ignores_times_and_dates() -> None:
    assert states_value("the port is 6432") is True
    assert states_value("the owner is Ingrid") is True
    assert states_value("it ran at 12:30") is False
    assert states_value("deployed on 2024-06-01T10:57:00Z") is False
    # a time right after a dotted word is not a dotted value
    assert states_value("the value is foo.12:30") is False
    assert states_value("config unchanged") is False


def test_chunks_cut_at_the_last_space_in_the_upper_half() -> None:
    assert list(_chunks("aaaa bbbbbbbbbbbb", 10)) == ["aaaa bbbbb", "bbbbbbb"]
    assert list(_chunks("aaaaaaa bb cccc", 10)) == ["aaaaaaa", "bb cccc"]
    assert list(_chunks("a bcd", 3)) == ["a", "bcd"]
    assert list(_chunks("aaaaaa  bbbbbbb", 10)) == ["aaaaaa", "bbbbbbb"]
    assert list(_chunks("exactly10!", 10)) == ["exactly10!"]
    assert list(_chunks("", 10)) == []
    at_limit = "ab " * 199 + "abc"  # 600 characters
    assert len(at_limit) == 600
    assert list(_chunks(at_limit)) == [at_limit]
    over = at_limit + "d"
    assert list(_chunks(over)) == [("ab " * 199).rstrip(), "abcd"]


def test_json_records() -> None:
    assert _json_records('["é", {"k": "ü", "n": 1}]') == ['"é"', '{"k": "ü", "n": 1}']
    assert _json_records("  [1, 2]  ") == ["1", "2"]
    assert _json_records("") is None
    assert _json_records("   ") is None
    assert _json_records("[not json") is None
    assert _json_records("plain text") is None
    assert _json_records('"a string"') is None
    assert _json_records("{}") == []


def test_records_of_objects() -> None:
    assert _records_of([1, 2]) == [1, 2]
    assert _records_of(5) is None
    assert _records_of("x") is None
    four = {"rows": [1, 2], "a": 1, "b": 2, "c": 3}
    assert _records_of(four) == [1, 2]
    five = {"rows": [1, 2], "a": 1, "b": 2, "c": 3, "d": 4}
    assert _records_of(five) == [{"rows": [1, 2]}, {"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]
    assert _records_of({"a": 1, "b": 2}) == [{"a": 1}, {"b": 2}]
    assert _records_of({"rows": [1, 2], "name": "x"}) == [1, 2]
    assert _records_of({"rows": [1, 2], "empty": []}) == [1, 2]
    assert _records_of({"x": [1], "y": [2]}) == [{"x": [1]}, {"y": [2]}]


def test_sentences_join_short_ones() -> None:
    text = "Short one. This sentence is long enough to stand alone here. Tail."
    assert _sentences(text, 20) == [
        "Short one. This sentence is long enough to stand alone here. Tail."
    ]
    assert _sentences("Tiny.", 20) == ["Tiny."]
    assert _sentences("", 20) == []
    # exactly min_chars long: a unit of its own
    assert _sentences("abcd. Efgh.", 5) == ["abcd.", "Efgh."]
    assert _sentences("abc. Efgh. Ijklm.", 5) == ["abc. Efgh.", "Ijklm."]


def test_paragraphs_spans() -> None:
    assert list(_paragraphs(["a", "b", "", "  ", "c", " d "])) == [(1, 2, "a b"), (5, 6, "c d")]
    assert list(_paragraphs(["", "x"])) == [(2, 2, "x")]
    assert list(_paragraphs([])) == []


def test_dump_spans_number_lines_and_give_the_head_as_context() -> None:
    spans = list(_dump_spans(["", "HEAD", "  ", " row 1 ", "row 2"], UnitSize()))
    assert spans == [(2, 2, "HEAD", ""), (4, 4, "row 1", "HEAD"), (5, 5, "row 2", "HEAD")]
    long_head = "H" * 200
    spans = list(_dump_spans([long_head, "x"], UnitSize()))
    assert spans == [(1, 1, long_head, ""), (2, 2, "x", "H" * 160)]


def test_three_lines_are_a_dump_two_lines_are_prose() -> None:
    dump = split_text(
        "alpha line one\nbeta line two\ngamma line three", message_id="m", position=2, role="tool"
    )
    assert [(u.part, u.start_line, u.end_line, u.text, u.context) for u in dump] == [
        (0, 1, 1, "alpha line one", ""),
        (1, 2, 2, "beta line two", "alpha line one"),
        (2, 3, 3, "gamma line three", "alpha line one"),
    ]
    prose = split_text("alpha line one\nbeta line two", message_id="m", position=2, role="tool")
    assert [(u.start_line, u.end_line, u.text, u.context) for u in prose] == [
        (1, 2, "alpha line one beta line two", "")
    ]


def test_prose_context_is_the_last_160_characters_of_the_sentence_before() -> None:
    first = "A" + "b" * 199 + "."
    second = "Second sentence is here and long enough to stand."
    units = split_text(
        f"{first} {second}", message_id="d", position=0, role="user", size=UnitSize(turn_chars=0)
    )
    assert [u.text for u in units] == [first, second]
    assert units[0].context == ""
    # a later sentence's context: the message's first line, then the sentence before
    assert units[1].context == f"{first[:80]} … {first[-160:]}"


def test_split_text_json_payloads() -> None:
    units = split_text('\n[{"a": 1},\n {"b": 2}]\n', message_id="j", position=4, role="tool")
    assert [(u.part, u.start_line, u.end_line, u.text, u.context) for u in units] == [
        (0, 1, 1, '{"a": 1}', '[{"a": 1},'),
        (1, 1, 1, '{"b": 2}', '[{"a": 1},'),
    ]
    # a tool's output gets no header context
    units = split_text('[{"a": 1}, {"b": 2}]', message_id="j", position=4, role="t", tool="q")
    assert [u.context for u in units] == ["", ""]
    assert [u.tool for u in units] == ["q", "q"]
    head = "[" + ", ".join(f'"{"v" * 20}{i}"' for i in range(10)) + "]"
    units = split_text(head, message_id="j", position=0, role="tool")
    assert len(units) == 10
    assert units[0].context == head[:160]
    one = split_text('{\n "a": 1\n}', message_id="j", position=0, role="tool")
    assert [(u.start_line, u.end_line, u.text, u.context) for u in one] == [
        (1, 3, '{\n "a": 1\n}', "")
    ]
    long_records = split_text(
        '["' + "word " * 30 + '", "x y"]',
        message_id="j",
        position=0,
        role="tool",
        size=UnitSize(max_chars=60),
    )
    assert [u.part for u in long_records] == list(range(len(long_records)))
    assert all(len(u.text) <= 60 for u in long_records)
    assert long_records[-1].text == '"x y"'


def test_split_text_first_part_and_blank_text() -> None:
    units = split_text("one\ntwo\nthree", message_id="m", position=1, role="tool", first_part=5)
    assert [u.part for u in units] == [5, 6, 7]
    assert split_text("\n \n", message_id="m", position=1, role="tool") == []
    assert split_text("", message_id="m", position=1, role="tool") == []


def test_split_message_roles_tools_and_calls() -> None:
    (s,) = split_message(SystemMessage("sys text here", id="s"), message_id="k", position=0)
    assert (s.role, s.tool, s.text) == ("system", None, "sys text here")
    (h,) = split_message(HumanMessage("hi"), message_id="k", position=0)
    assert h.role == "user"
    named = split_message(
        ToolMessage("out", tool_call_id="c", name="nm"), message_id="k", position=0
    )
    assert [(u.role, u.tool) for u in named] == [("tool", "nm")]
    unnamed = split_message(ToolMessage("out", tool_call_id="c"), message_id="k", position=0)
    assert [(u.role, u.tool) for u in unnamed] == [("tool", None)]
    looked_up = split_message(
        ToolMessage("out", tool_call_id="c"), message_id="k", position=0, tool_names={"c": "ls"}
    )
    assert [u.tool for u in looked_up] == ["ls"]
    call = AIMessage("", tool_calls=[{"name": "f", "args": {"z": "é", "a": 1}, "id": "c1"}])
    (u,) = split_message(call, message_id="k", position=3)
    assert u == Unit("k", 3, 0, "assistant", "f", 0, 0, 'f({"a": 1, "z": "é"})')
    long_call = AIMessage("", tool_calls=[{"name": "g", "args": {"q": "w " * 40}, "id": "c2"}])
    pieces = split_message(long_call, message_id="k", position=3, size=UnitSize(max_chars=40))
    assert [p.part for p in pieces] == list(range(len(pieces)))
    assert len(pieces) > 1 and all(len(p.text) <= 40 for p in pieces)
    assert pieces[0].text.startswith('g({"q": "w w')
    sized = split_message(
        HumanMessage("Aa. Bb. Cc."),
        message_id="k",
        position=0,
        size=UnitSize(min_chars=1, turn_chars=0),
    )
    assert [x.text for x in sized] == ["Aa.", "Bb.", "Cc."]


# --- index.py ---------------------------------------------------------------------------


def test_query_terms() -> None:
    assert query_terms("What is the Port of DB-7? the port!") == ["port", "db", "7"]
    assert query_terms("a b 5 ab") == ["5", "ab"]
    words = " ".join(f"w{i}" for i in range(40))
    assert query_terms(words) == [f"w{i}" for i in range(32)]
    assert query_terms("x1 x2 x3 x4", limit=2) == ["x1", "x2"]
    assert query_terms("x1 x1 x2 x3", limit=2) == ["x1", "x2"]
    assert {"the", "remind", "asked", "a"} <= STOPWORDS


def test_terms_within_budget() -> None:
    assert MAX_RANKED_POSTINGS == 6_000
    postings = {"a": 3000, "b": 3000, "c": 1}
    assert terms_within_budget(postings, ["a", "b", "c"]) == ["c", "a"]
    assert terms_within_budget(postings, ["b", "a", "c"]) == ["c", "b"]
    assert terms_within_budget({"a": 5, "b": 5}, ["b", "a"], budget=10) == ["b", "a"]
    assert terms_within_budget({"a": 5, "b": 6}, ["a", "b"], budget=10) == ["a"]
    # the rarest matching term is kept even over the budget; unknown or 0 terms are dropped
    assert terms_within_budget({"a": 50, "z": 0}, ["z", "a", "q"], budget=10) == ["a"]
    assert terms_within_budget({"a": 1, "b": 2, "c": 3}, ["c", "b", "a", "a"], budget=6) == [
        "a",
        "b",
        "c",
    ]
    assert terms_within_budget({"a": 1, "b": 2, "c": 3}, ["a", "b", "c"], budget=5) == ["a", "b"]
    assert terms_within_budget({}, ["a"]) == []


def test_unit_from_row_and_columns() -> None:
    assert UNIT_COLUMNS == (
        "message_id",
        "position",
        "part",
        "role",
        "tool",
        "start_line",
        "end_line",
        "text",
        "context",
        "statement",
    )
    row = (7, "3", "1", "tool", None, "2", "4", 99, "ctx", 1, -1.5)
    got = unit_from_row(row)
    assert got == Unit("7", 3, 1, "tool", None, 2, 4, "99", "ctx", True)
    assert unit_from_row(("m", 0, 0, "user", "t", 1, 1, "x", "", 0)).statement is False
    assert Unit(**dict(zip(UNIT_COLUMNS, row, strict=False))).context == "ctx"
    assert RecallHit(got, 1.0).source == "session"
    assert STATEMENT_BOOST == 1.5


# --- select.py --------------------------------------------------------------------------


def lines(text: str) -> int:
    """A token counter: one token per line (exact packing arithmetic)."""
    return max(1, text.count("\n"))


def pick(hits, terms=("zzz",), *, cap=100, kept_from=10_000, prompt="", count=lines, **kw):
    return select_units(
        hits,
        terms=list(terms),
        in_history=lambda position, message_id: message_id == f"m{position}",
        kept_from=kept_from,
        prompt_text=prompt,
        cap_tokens=cap,
        count_tokens=count,
        **kw,
    )


def test_recalled_unit_to_dict_rounds_the_score() -> None:
    got = RecalledUnit("#1 user", "session", 1.23456789, 5, "m1", "t").to_dict()
    assert got == {
        "label": "#1 user",
        "source": "session",
        "score": 1.2346,
        "tokens": 5,
        "message_id": "m1",
        "text": "t",
    }


def test_stem() -> None:
    words = ["running", "thing", "wing", "bred", "boxed", "cases", "yes", "bus", "cats", "ports"]
    assert [_stem(w) for w in words] == [
        "runn",
        "thing",
        "wing",
        "bred",
        "box",
        "cas",
        "yes",
        "bus",
        "cat",
        "port",
    ]


def test_terms_pattern() -> None:
    assert terms_pattern([]) is None
    assert terms_pattern(["", ""]) is None
    pattern = terms_pattern(["Ports", "database", ""])
    assert pattern is not None
    assert pattern.pattern == r"((?<!\w)database|(?<!\w)port)\w*"
    assert [m.group(1) for m in pattern.finditer("PORTAL of DATABASES, report")] == [
        "PORT",
        "DATABASE",
    ]
    nested = terms_pattern(["port", "portal"])
    assert nested is not None
    assert [m.group(1) for m in nested.finditer("portal port")] == ["portal", "port"]
    # a Han term is found inside a run of Han characters (no word boundary there)
    han = terms_pattern(["分区", "port"])
    assert han is not None
    assert [m.group(1) for m in han.finditer("把表的分区改成 dt, import port")] == ["分区", "port"]


def test_statement_subject() -> None:
    pattern = terms_pattern(["port", "db"])
    assert _statement_subject("the DB Port is 6432", pattern) == {"db", "port"}
    assert _statement_subject("the db port is unchanged", pattern) == frozenset()
    assert _statement_subject("6432 is the db port", pattern) == frozenset()
    assert _statement_subject("nothing here is 5", pattern) == frozenset()
    assert _statement_subject("the port is 5", None) == frozenset()
    assert _statement_subject("port -> host.internal", pattern) == {"port"}
    assert _statement_subject("port is #team-x", pattern) == {"port"}
    # a whole turn: a later sentence that only mentions the port again hides nothing
    turn = "The db port is 6432 now. I will tell the port owners tomorrow."
    assert _statement_subject(turn, pattern) == {"db", "port"}
    assert _statement_subject("数据库端口是 6432。明天再说端口的事", terms_pattern(["端口"])) == {
        "端口"
    }
    owner = terms_pattern(["owner"])
    assert _statement_subject("owner is Ingrid", owner) == {"owner"}
    assert _statement_subject("owner: 'Ingrid'", owner) == {"owner"}
    assert _statement_subject("owner is ingrid", owner) == frozenset()


def test_render_line() -> None:
    assert render_line(RecallHit(unit(3, "abc"), 1.0)) == "[#3 user] abc"
    memory = Unit("memory:x", -9, 0, "l4", None, 0, 0, "fact")
    assert render_line(RecallHit(memory, 1.0, "memory")) == "[memory l4] fact"


def test_missing_from_prompt_boundaries() -> None:
    hits = [
        RecallHit(unit(4, "at kept_from"), 1.0),
        RecallHit(unit(3, "just before"), 1.0),
        RecallHit(unit(0, "another branch", message_id="zz"), 1.0),
        RecallHit(unit(2, "   "), 1.0),
        RecallHit(unit(1, "In   The\nPrompt"), 1.0),
        RecallHit(Unit("memory:1", -3, 0, "l4", None, 0, 0, "memory fact"), 1.0, "memory"),
    ]
    got = _missing_from_prompt(
        hits,
        in_history=lambda position, message_id: message_id == f"m{position}",
        kept_from=4,
        prompt_text="xx in the prompt yy",
    )
    assert [h.unit.text for h in got] == ["just before", "memory fact"]


def test_repeated_text_keeps_the_newest_copy_in_the_first_slot() -> None:
    first = RecallHit(unit(5, "same line"), 3.0)
    twin = RecallHit(unit(5, "same line", part=1), 2.0)
    newer = RecallHit(unit(9, "Same  line"), 1.0)
    other = RecallHit(unit(2, "other line"), 0.5)
    got = _missing_from_prompt(
        [first, twin, other, newer],
        in_history=lambda position, message_id: True,
        kept_from=100,
        prompt_text="",
    )
    assert got == [newer, other]
    got = _missing_from_prompt(
        [first, twin], in_history=lambda p, m: True, kept_from=100, prompt_text=""
    )
    assert got == [first]


def test_select_units_exact_text_and_units() -> None:
    hits = [RecallHit(unit(8, "later"), 2.5), RecallHit(unit(3, "earlier", part=1), 1.25)]
    text, units = pick(hits)
    assert text == f"{DEFAULT_HEADER}\n[#3 user] earlier\n[#8 user] later"
    assert DEFAULT_HEADER == (
        "Recalled from earlier in this session (oldest first; a later line supersedes an "
        "earlier one about the same thing):"
    )
    assert units == (
        RecalledUnit("#3 user", "session", 1.25, 1, "m3", "earlier"),
        RecalledUnit("#8 user", "session", 2.5, 1, "m8", "later"),
    )
    text, _ = pick(hits, header="")
    assert text == "[#3 user] earlier\n[#8 user] later"
    text, _ = pick(hits, header="H")
    assert text == "H\n[#3 user] earlier\n[#8 user] later"
    assert pick([], header="H") == (None, ())


def test_select_units_parts_of_one_message_in_part_order() -> None:
    hits = [RecallHit(unit(4, "second", part=1), 2.0), RecallHit(unit(4, "first"), 1.0)]
    text, _ = pick(hits, header="")
    assert text == "[#4 user] first\n[#4 user] second"


def test_select_units_budget_arithmetic_with_chars() -> None:
    # count = characters: header "HDR\n" is 4, each line "[#1 user] abc\n" is 14
    hits = [RecallHit(unit(1, "abc"), 1.0)]
    assert pick(hits, cap=18, count=len, header="HDR")[0] == "HDR\n[#1 user] abc"
    assert pick(hits, cap=17, count=len, header="HDR") == (None, ())
    assert pick(hits, cap=14, count=len, header="")[0] == "[#1 user] abc"
    assert pick(hits, cap=13, count=len, header="") == (None, ())
    assert pick(hits, cap=4, count=len, header="HDR") == (None, ())
    _, units = pick(hits, cap=18, count=len, header="HDR")
    assert [u.tokens for u in units] == [14]


def test_packing_stops_when_less_than_a_line_is_left() -> None:
    assert MIN_LINE_TOKENS == 8
    hits = [RecallHit(unit(i, f"line {i}"), 1.0) for i in range(1, 20)]
    # one token per line: header 1, then lines while at least 8 tokens are left
    assert len(pick(hits, cap=9, header="H")[1]) == 1
    assert len(pick(hits, cap=10, header="H")[1]) == 2
    assert len(pick(hits, cap=8, header="H")[1]) == 0
    assert len(pick(hits, cap=16, header="H")[1]) == 8


def test_a_too_big_unit_is_refused_and_later_ones_are_still_considered() -> None:
    big = RecallHit(unit(1, "big\nbig\nbig"), 9.0)  # 3 tokens with its newline
    small = RecallHit(unit(2, "small"), 1.0)
    _, units = pick([big, small], cap=12, header="H")  # budget 11: big 3 fits, 8 left
    assert [u.message_id for u in units] == ["m1", "m2"]
    huge = RecallHit(unit(1, "x\n" * 20), 9.0)
    _, units = pick([huge, small], cap=20, header="H")
    assert [u.message_id for u in units] == ["m2"]
    exact = RecallHit(unit(1, "x\n" * 9 + "x"), 9.0)  # 10 tokens
    _, units = pick([exact, small], cap=11, header="H")  # budget 10: exactly fits
    assert [u.message_id for u in units] == ["m1"]


def stmt(position: int, text: str, score: float = 1.0) -> RecallHit:
    return RecallHit(unit(position, text, statement=states_value(text)), score)


def test_an_old_statement_comes_with_its_correction_or_not_at_all() -> None:
    old = stmt(1, "the db port is 5432", 9.0)
    new = stmt(5, "the db port is now 6432", 1.0)
    other = stmt(3, "the weather is fine", 0.5)
    # old taken as a group with its correction; the correction's own turn is skipped,
    # and later candidates are still considered
    _, units = pick([old, new, other], ["db", "port"], header="H")
    assert [u.message_id for u in units] == ["m1", "m3", "m5"]
    # the correction is too big: refused first, then the old one cannot come alone
    huge_new = stmt(5, "the db port is now 6432" + "\n" * 30, 9.0)
    small_old = stmt(1, "the db port is 5432", 1.0)
    _, units = pick([huge_new, small_old, other], ["db", "port"], cap=20, header="H")
    assert [u.message_id for u in units] == ["m3"]
    # not a statement (marked so by the index): no group
    plain_old = RecallHit(unit(1, "the db port is 5432"), 9.0)
    _, units = pick([huge_new, plain_old], ["db", "port"], cap=20, header="H")
    assert [u.message_id for u in units] == ["m1"]


def test_a_statement_about_fewer_terms_does_not_need_the_old_one() -> None:
    old = stmt(1, "the db port is 5432", 1.0)
    narrower = stmt(5, "the port is 7000" + "\n" * 30, 9.0)
    _, units = pick([narrower, old], ["db", "port"], cap=20, header="H")
    # narrower (refused: too big) does not cover old's subject {db, port}: old goes alone
    assert [u.message_id for u in units] == ["m1"]
    wider = stmt(5, "the prod db port is 7000" + "\n" * 30, 9.0)
    _, units = pick([wider, old], ["db", "port", "prod"], cap=20, header="H")
    assert units == ()
    same_time = stmt(1, "db port is 9999" + "\n" * 30, 9.0)
    other_part = RecallHit(unit(1, "db port is 5432", part=1, statement=True), 1.0)
    _, units = pick([same_time, other_part], ["db", "port"], cap=20, header="H")
    assert [u.text for u in units] == ["db port is 5432"]


def test_memory_units_are_checked_for_statements() -> None:
    old_memory = RecallHit(
        Unit("memory:a", -10, 0, "l4", None, 0, 0, "the db port is 5432"), 9.0, "memory"
    )
    newer_session = stmt(3, "the db port is now 6432" + "\n" * 30, 1.0)
    _, units = pick([newer_session, old_memory], ["db", "port"], cap=20, header="H")
    assert units == ()
    _, units = pick([old_memory], ["db", "port"], cap=20, header="H")
    assert [(u.label, u.source) for u in units] == [("l4", "memory")]


@pytest.mark.parametrize("cap", [0, 1])
def test_no_room_for_the_header(cap: int) -> None:
    assert pick([RecallHit(unit(1, "a"), 1.0)], cap=cap, header="H") == (None, ())


def test_prompt_text_comparison_is_lower_case_with_single_spaces() -> None:
    sharp = RecallHit(unit(1, "Straße"), 1.0)
    # "STRASSE" lower-cases to "strasse", not to "straße": the unit is not in the prompt
    assert [u.text for u in pick([sharp], prompt="STRASSE")[1]] == ["Straße"]
    assert pick([sharp], prompt="in der straße") == (None, ())
    short = RecallHit(unit(1, "xx"), 1.0)
    assert [u.text for u in pick([short], prompt="a b")[1]] == ["xx"]


def test_dump_spans_of_blank_lines_and_with_a_narrow_unit_size() -> None:
    assert list(_dump_spans(["", "  "], UnitSize())) == []
    long_line = "word " * 20
    spans = list(_dump_spans(["head", long_line, "x"], UnitSize(max_chars=40)))
    assert [s[0] for s in spans] == [1, 2, 2, 2, 3]
    assert all(len(s[2]) <= 40 for s in spans)


def test_a_candidate_taken_with_an_older_one_is_not_counted_twice() -> None:
    old = stmt(1, "the db port is 5432", 9.0)
    new = stmt(5, "the db port is now 6432", 8.0)
    other = RecallHit(unit(3, "unrelated line"), 1.0)
    # one token a line: header 1, then old+new (2): 8 left, room for one more line
    _, units = pick([old, new, other], ["db", "port"], cap=11, header="H")
    assert [u.message_id for u in units] == ["m1", "m3", "m5"]


def test_a_plain_unit_at_position_zero_is_not_a_statement() -> None:
    huge_new = stmt(5, "the db port is now 6432" + "\n" * 30, 9.0)
    plain_first = RecallHit(unit(0, "the db port is 5432"), 1.0)
    _, units = pick([huge_new, plain_first], ["db", "port"], cap=20, header="H")
    assert [u.message_id for u in units] == ["m0"]


def test_edges_of_the_text_and_line_numbers() -> None:
    units = split_text("  \nfirst line\nsecond line", message_id="m", position=0, role="tool")
    assert [(u.start_line, u.text, u.context) for u in units] == [
        (2, "first line", ""),
        (3, "second line", "first line"),
    ]
    units = split_text("X\nab cd\nef gh", message_id="m", position=0, role="tool")
    assert [u.text for u in units] == ["X", "ab cd", "ef gh"]
    (one,) = split_text("X marks the spot", message_id="m", position=0, role="user")
    assert one.text == "X marks the spot"


def test_json_context_is_the_first_line_and_one_record_is_part_zero() -> None:
    text = '[{"a": 1},\n {"b": 2},\n {"c": 3}]'
    units = split_text(text, message_id="m", position=0, role="tool")
    assert [u.context for u in units] == ['[{"a": 1},'] * 3
    (one,) = split_text('{"a": 1}', message_id="m", position=0, role="tool", first_part=3)
    assert (one.part, one.message_id, one.position) == (3, "m", 0)


def test_tool_name_of_a_result_with_an_empty_call_id() -> None:
    message = ToolMessage("out", tool_call_id="")
    (got,) = split_message(message, message_id="k", position=0, tool_names={"": "named"})
    assert got.tool == "named"
