"""Exact behaviour of the memory building blocks: messages, items, summaries, packing and
strategies (`ctxpolicy.memory.messages`, ``.items``, ``.summaries``, ``.packing``,
``.strategies``)."""

from __future__ import annotations

import math
import re

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from ctxpolicy.memory import summaries
from ctxpolicy.memory.items import (
    CHITCHAT_IMPORTANCE,
    DEFAULT_IMPORTANCE,
    IMPORTANCE_BY_KIND,
    ITEM_KINDS,
    MemoryHit,
    MemoryItem,
    check_importance,
    check_kind,
    new_item_id,
    score_importance,
)
from ctxpolicy.memory.messages import analysis_text, describe_message
from ctxpolicy.memory.packing import pack_pieces
from ctxpolicy.memory.strategies import (
    L3_POOL,
    MAX_SEARCH_POOL,
    SEARCH_POOL,
    SOURCE_TIER,
    STRATEGY_SHARES,
    TIER_DEFAULT_LIMITS,
    Candidate,
    _packing_done,
    check_shares,
    content_key,
    dedupe_candidates,
    item_key,
    order_for_reading,
    pack_candidates,
    pack_memory,
    pack_shares,
    read_source,
    read_tier,
    render_candidates,
    render_item,
    search_pool,
    select_memory,
    source_pools,
    strategy_shares,
)
from ctxpolicy.memory.summaries import (
    CHARS_PER_TOKEN,
    EXTRACTIVE_MAX_TOKENS,
    GAP,
    SUMMARY_PROMPT,
    check_summarizer,
    summarize_extractive,
    summarize_item,
)


def _exact(text: str) -> str:
    return "^" + re.escape(text) + "$"


def _item(content: str = "x", *, seq: int = 1, id: str | None = None, kind=None, **kw):
    return MemoryItem(id=id or f"i{seq}", content=content, importance=0.5, seq=seq, kind=kind, **kw)


# ================================================================== messages


def test_analysis_text_drops_only_the_tool_prefix():
    assert analysis_text("calc -> 42", {"tool": "calc"}) == "42"
    assert analysis_text("calc -> 42", {"tool": "other"}) == "calc -> 42"
    assert analysis_text("calc -> 42", None) == "calc -> 42"
    assert analysis_text("calc -> 42", {"tool": 5}) == "calc -> 42"
    assert analysis_text("calc->42", {"tool": "calc"}) == "calc->42"
    assert analysis_text("ab -> ", {"tool": "ab"}) == ""


def test_describe_human_message():
    assert describe_message(HumanMessage("hi there", id="m1")) == (
        "hi there",
        "user",
        {"role": "human", "message_id": "m1"},
    )
    assert describe_message(HumanMessage("no id")) == ("no id", "user", {"role": "human"})


def test_describe_tool_messages():
    ok = ToolMessage("42", tool_call_id="c1", name="calc", id="t1")
    assert describe_message(ok) == (
        "calc -> 42",
        "tool_success",
        {
            "role": "tool",
            "message_id": "t1",
            "tool_call_id": "c1",
            "status": "success",
            "tool": "calc",
        },
    )
    bad = ToolMessage("boom", tool_call_id="c2", status="error")
    assert describe_message(bad) == (
        "tool -> boom",
        "tool_failure",
        {"role": "tool", "tool_call_id": "c2", "status": "error", "tool": "tool"},
    )


def test_describe_ai_message_lists_its_calls():
    calls = [
        {"name": "find", "args": {"b": 1, "a": "é"}, "id": "c1"},
        {"name": "ping", "args": {}, "id": "c2"},
    ]
    text, kind, meta = describe_message(AIMessage("let me look", tool_calls=calls, id="a1"))
    assert text == 'let me look calls find({"a": "é", "b": 1}), ping({})'
    assert (kind, meta) == ("agent", {"role": "ai", "message_id": "a1"})
    assert describe_message(AIMessage("", tool_calls=calls[1:]))[0] == "calls ping({})"
    assert describe_message(AIMessage("just text"))[0] == "just text"
    assert describe_message(AIMessage(""))[0] == ""


def test_describe_other_messages_as_notes():
    assert describe_message(SystemMessage("be brief")) == ("be brief", "note", {"role": "system"})


def test_describe_message_refuses_non_messages():
    with pytest.raises(TypeError, match=_exact("message must be a BaseMessage, got dict")):
        describe_message({"content": "hi"})  # type: ignore[arg-type]


# ================================================================== items


def test_importance_tables():
    assert dict(IMPORTANCE_BY_KIND) == {
        "user": 0.9,
        "tool_failure": 0.8,
        "tool_success": 0.7,
        "subtask": 0.5,
        "agent": 0.5,
        "note": 0.5,
        "summary": 0.5,
    }
    assert ITEM_KINDS == (
        "user",
        "tool_failure",
        "tool_success",
        "subtask",
        "agent",
        "note",
        "summary",
    )
    assert (DEFAULT_IMPORTANCE, CHITCHAT_IMPORTANCE) == (0.5, 0.3)


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (1, 1.0), (0.25, 0.25), (1.0, 1.0)])
def test_check_importance_accepts_the_closed_unit_interval(value, expected):
    got = check_importance(value)
    assert got == expected
    assert type(got) is float


@pytest.mark.parametrize("value", [True, False, "0.5", None, -0.01, 1.01, math.nan, math.inf])
def test_check_importance_refuses(value):
    with pytest.raises(
        ValueError, match=_exact(f"importance must be a number in [0, 1], got {value!r}")
    ):
        check_importance(value)
    with pytest.raises(ValueError, match=_exact(f"w must be a number in [0, 1], got {value!r}")):
        check_importance(value, name="w")


def test_check_kind():
    assert check_kind(None) is None
    assert check_kind("note") == "note"
    message = (
        "kind must be one of user, tool_failure, tool_success, subtask, agent, note, summary; "
        "got 'fact'"
    )
    with pytest.raises(ValueError, match=_exact(message)):
        check_kind("fact")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, 0.5),
        ({"kind": "user"}, 0.9),
        ({"kind": "tool_failure"}, 0.8),
        ({"kind": "tool_success"}, 0.7),
        ({"kind": "summary"}, 0.5),
        ({"metadata": {"source": "user"}}, 0.9),
        ({"metadata": {"role": "user"}}, 0.9),
        ({"metadata": {"role": "ai"}}, 0.5),
        ({"metadata": {"status": "FAILED"}}, 0.8),
        ({"metadata": {"status": "failure"}}, 0.8),
        ({"metadata": {"status": "Error"}}, 0.8),
        ({"metadata": {"status": "completed"}}, 0.7),
        ({"metadata": {"status": "success"}}, 0.7),
        ({"metadata": {"status": "succeeded"}}, 0.7),
        ({"metadata": {"status": "OK"}}, 0.7),
        ({"metadata": {"status": "pending"}}, 0.5),
        ({"kind": "note", "metadata": {"role": "user", "status": "error"}}, 0.5),
        ({"metadata": {"source": "user", "status": "error"}}, 0.9),
        ({"kind": "user", "metadata": {"importance": 0.1}}, 0.1),
        ({"kind": "user", "metadata": {"importance": 1}, "content": "thanks"}, 1.0),
    ],
)
def test_score_importance_rules(kwargs, expected):
    assert score_importance(**kwargs) == expected


@pytest.mark.parametrize(
    ("kind", "content", "expected"),
    [
        (None, "thanks", 0.3),
        ("user", "thanks", 0.3),
        ("agent", "ok", 0.3),
        ("subtask", "thanks", 0.3),
        ("note", "ok", 0.3),
        ("summary", "thanks", 0.5),
        ("tool_success", "ok", 0.7),
        ("tool_failure", "thanks", 0.8),
        ("tool_success", "the port is 5432", 0.85),
        ("note", "the port is 5432", 0.65),
        ("user", "the port is 5432", 1.0),
        ("tool_failure", "remember: port is 5432, actually 6000, we decided", 1.0),
    ],
)
def test_score_importance_with_content(kind, content, expected):
    assert score_importance(kind=kind, content=content) == expected


def test_score_importance_errors_name_the_field():
    with pytest.raises(
        ValueError, match=_exact("metadata['importance'] must be a number in [0, 1], got 2")
    ):
        score_importance(metadata={"importance": 2})
    with pytest.raises(ValueError, match=r"got 'bogus'$"):
        score_importance(kind="bogus")  # type: ignore[arg-type]


def test_new_item_id_is_a_fresh_hex_uuid():
    first, second = new_item_id(), new_item_id()
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first != second


def test_memory_item_to_data_and_back():
    item = MemoryItem("a", "text", 0.7, 3, kind="note", tags=("x", "y"), metadata={"k": 1})
    data = item.to_data()
    assert data == {
        "id": "a",
        "content": "text",
        "importance": 0.7,
        "seq": 3,
        "kind": "note",
        "tags": ["x", "y"],
        "metadata": {"k": 1},
    }
    assert MemoryItem.from_data(data) == item
    assert MemoryItem("a", "t", 0.5, 1).to_data()["tags"] == []


def test_memory_item_from_data_defaults():
    item = MemoryItem.from_data({"id": "a", "content": "", "seq": 0})
    assert item == MemoryItem("a", "", 0.5, 0, kind=None, tags=(), metadata={})
    assert item.importance == DEFAULT_IMPORTANCE
    assert item.tags == ()
    loaded = MemoryItem.from_data(
        {"id": "a", "content": "c", "seq": 1, "metadata": None, "tags": ["t"], "importance": 1}
    )
    assert loaded.metadata == {}
    assert loaded.tags == ("t",)
    assert loaded.importance == 1.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "memory item data must be a mapping, got list"),
        (None, "memory item data must be a mapping, got NoneType"),
        ({"content": "c", "seq": 1}, "memory item data lacks field 'id'"),
        ({"id": "a", "seq": 1}, "memory item data lacks field 'content'"),
        ({"id": "a", "content": "c"}, "memory item data lacks field 'seq'"),
        (
            {"id": "", "content": "c", "seq": 1},
            "memory item 'id' must be a non-empty string, got ''",
        ),
        ({"id": 5, "content": "c", "seq": 1}, "memory item 'id' must be a non-empty string, got 5"),
        ({"id": "a", "content": 5, "seq": 1}, "memory item 'content' must be a string, got 5"),
        (
            {"id": "a", "content": "c", "seq": True},
            "memory item 'seq' must be an integer, got True",
        ),
        ({"id": "a", "content": "c", "seq": "1"}, "memory item 'seq' must be an integer, got '1'"),
        ({"id": "a", "content": "c", "seq": 1.0}, "memory item 'seq' must be an integer, got 1.0"),
        (
            {"id": "a", "content": "c", "seq": 1, "tags": "ab"},
            "memory item 'tags' must be a list of strings, got 'ab'",
        ),
        (
            {"id": "a", "content": "c", "seq": 1, "tags": ["a", 2]},
            "memory item 'tags' must be a list of strings, got ['a', 2]",
        ),
        (
            {"id": "a", "content": "c", "seq": 1, "metadata": ["k"]},
            "memory item 'metadata' must be a mapping, got ['k']",
        ),
        (
            {"id": "a", "content": "c", "seq": 1, "importance": 2},
            "importance must be a number in [0, 1], got 2",
        ),
        (
            {"id": "a", "content": "c", "seq": 1, "kind": "x"},
            (
                "kind must be one of user, tool_failure, tool_success, subtask, agent, note, "
                "summary; got 'x'"
            ),
        ),
    ],
)
def test_memory_item_from_data_errors(data, message):
    with pytest.raises(ValueError, match=_exact(message)):
        MemoryItem.from_data(data)


def test_memory_hit_key_and_defaults():
    hit = MemoryHit("a", "t", 0.5, 1)
    assert (hit.tier, hit.score, hit.part, hit.whole) == ("l4", 0.0, 0, True)
    assert hit.key == "a"
    assert MemoryHit("a", "t", 0.5, 1, part=2, whole=False).key == "a#2"
    assert MemoryHit("a", "t", 0.5, 1, part=2, whole=True).key == "a"


# ================================================================== summaries


def test_summary_constants():
    assert (EXTRACTIVE_MAX_TOKENS, CHARS_PER_TOKEN, GAP) == (96, 4, " … ")


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("abcde", 5, "abcde"),
        ("abcdefghij", 5, "abcd…"),
        ("aaaa bbbbbbbbbb", 10, "aaaa bbbb…"),  # space before half: cut inside the word
        ("aaaaa bbbbbbb", 10, "aaaaa…"),  # space at half: cut at the space
        ("aaaaa bbbbbbbbb", 11, "aaaaa…"),  # half of 11 is 5
        ("aaaa bbbbbbbbbbbb", 12, "aaaa bbbbbb…"),
        ("aaaaaa bb cccccc", 12, "aaaaaa bb…"),  # the last space
        ("aaaaaa  bbbbbbbb", 10, "aaaaaa…"),
        (" aaaaaaaaaaaa", 6, " aaaa…"),
    ],
)
def test_cut(text, max_chars, expected):
    assert summaries._cut(text, max_chars) == expected


def test_shape_is_the_lowercase_words_without_values():
    assert summaries._shape("Port 5432 is OPEN on A1 ß") == frozenset(
        {"port", "is", "open", "on", "ß"}
    )
    assert summaries._shape("Straße") != summaries._shape("STRASSE")


def test_pieces_are_lines_then_sentences():
    text = "First line. Second  sentence!\n\n  third\tline? yes\n"
    assert summaries._pieces(text) == ["First line.", "Second sentence!", "third line?", "yes"]


def test_piece_scores_plain_below_six_pieces():
    pieces = ["the port is 5432", "hello there", "item 5", "x=1", "alpha beta"]
    assert summaries._piece_scores(pieces) == [3, 0, 1, 3, 0]


def test_piece_scores_of_a_dump_reward_unusual_lines():
    pieces = [
        "row 1 value 7",
        "row 2 value 8",
        "row 3 value 9",
        "row 4 value 10 alpha beta gamma delta",  # 4 words no other line has: +3 at most
        "row 5 value 11 omega",  # 1 unique word
        "hello there",  # score 0 stays 0
    ]
    assert [summaries.fact_score(p) for p in pieces] == [1, 1, 1, 1, 1, 0]
    assert summaries._piece_scores(pieces) == [1, 1, 1, 4, 2, 0]


def test_piece_scores_words_seen_twice_are_not_unusual():
    pieces = [
        "row 1 value 7 twin",
        "row 2 value 8 twin",
        "row 3 value 9",
        "row 4 value 10",
        "row 5 value 11",
        "row 6 value 12",
    ]
    assert summaries._piece_scores(pieces) == [1, 1, 1, 1, 1, 1]


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (4, []),
        (6, [2]),  # the better pieces do not fit
        (7, [1]),
        (9, [1]),  # equal scores: the earlier piece first
        (20, [1, 3]),
        (21, [1, 2, 3]),  # exactly fits
        (100, [1, 2, 3]),  # a zero score ends the choice
    ],
)
def test_chosen_pieces(budget, expected):
    pieces = ["head", "aaaa", "bb", "cccccc", "d"]
    assert summaries._chosen_pieces(pieces, [5, 3, 1, 3, 0], budget) == expected


def test_chosen_pieces_skips_a_piece_that_does_not_fit_and_takes_later_ones():
    pieces = ["head", "a" * 20, "bb"]
    assert summaries._chosen_pieces(pieces, [0, 5, 1], 6) == [2]


def test_summarize_extractive_budget_errors():
    with pytest.raises(
        ValueError, match=_exact("the summary budget must be >= 8 characters, got 4")
    ):
        summarize_extractive("text", max_tokens=1)
    with pytest.raises(
        ValueError, match=_exact("the summary budget must be >= 8 characters, got 7")
    ):
        summarize_extractive("text", max_tokens=100, max_chars=7)
    assert summarize_extractive("text", max_tokens=2) == "text"
    assert summarize_extractive("a b", max_chars=8) == "a b"


def test_summarize_extractive_keeps_a_short_text_whole():
    assert summarize_extractive("  a\n b\t c  ", max_chars=8) == "a b c"
    assert summarize_extractive("12345678", max_chars=8) == "12345678"
    assert summarize_extractive("x" * 384) == "x" * 384
    assert summarize_extractive("x" * 385) == "x" * 383 + "…"


def test_summarize_extractive_keeps_the_first_piece_and_the_facts():
    text = "\n".join(
        [
            "Deploy report for today",
            "hello there",
            "the port is 5432",
            "nothing much here",
            "we decided to use redis",
            "more chatter",
        ]
    )
    assert summarize_extractive(text, max_chars=68) == (
        "Deploy report for today … the port is 5432 … we decided to use redis"
    )
    assert summarize_extractive(text, max_chars=67) == "Deploy report for today … the port is 5432"
    assert summarize_extractive(text, max_chars=42) == "Deploy report for today … the port is 5432"
    assert summarize_extractive(text, max_chars=41) == "Deploy report for today"


def test_summarize_extractive_adjacent_pieces_join_with_a_space():
    text = "Report\nthe port is 5432\nhello there friend of mine"
    assert summarize_extractive(text, max_chars=30) == "Report the port is 5432"


def test_summarize_extractive_cuts_a_long_first_piece():
    assert summarize_extractive("word " * 10, max_chars=12) == "word word…"


class _EchoModel(BaseChatModel):
    """A chat model answering with its prompt, padded with spaces."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        reply = AIMessage(f"  {messages[-1].content}  ")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_summarize_item_with_each_kind_of_summarizer():
    item = _item("the port is 5432. " + "filler words here. " * 30)
    assert summarize_item(item, None) == summarize_extractive(item.content)
    assert summarize_item(item, None, max_tokens=5) == summarize_extractive(
        item.content, max_tokens=5
    )
    assert summarize_item(item, lambda text: f"  S{len(text)} ") == f"S{len(item.content)}"
    assert summarize_item(_item("abc"), _EchoModel()) == SUMMARY_PROMPT.format(text="abc")
    assert SUMMARY_PROMPT == (
        "Summarize the following agent memory item in one or two short sentences. "
        "Keep names, numbers, errors and decisions.\n\nabc"
    ).replace("abc", "{text}")


def test_summarize_item_errors():
    with pytest.raises(
        TypeError,
        match=_exact("summarizer must be a BaseChatModel or a callable (text) -> str, got 42"),
    ):
        summarize_item(_item(), 42)
    with pytest.raises(TypeError, match=_exact("summarizer returned int, expected str")):
        summarize_item(_item(), lambda text: 7)


def test_check_summarizer():
    for ok in (None, len, _EchoModel()):
        assert check_summarizer(ok) is None
    with pytest.raises(
        ValueError,
        match=_exact("summarizer must be a BaseChatModel or a callable (text) -> str, got 'x'"),
    ):
        check_summarizer("x")


# ================================================================== packing


def test_pack_pieces_greedy_skips_and_continues():
    assert pack_pieces(
        ["aaaa", "bbbbbbbb", "cc"], cap_tokens=8, count_tokens=len, separator=""
    ) == [0, 2]
    # the separator costs after the first piece
    assert pack_pieces(["aaa", "bbb", "c"], cap_tokens=7, count_tokens=len) == [0, 1]
    assert pack_pieces(["aaa", "bbb"], cap_tokens=6, count_tokens=len) == [0]
    assert pack_pieces(["aaa", "bbb"], cap_tokens=6, count_tokens=len, separator="") == [0, 1]
    assert pack_pieces(["aaa"], cap_tokens=2, count_tokens=len) == []
    assert pack_pieces([], cap_tokens=5, count_tokens=len) == []


def test_pack_pieces_skips_empty_pieces():
    assert pack_pieces(["", "a", "", "b"], cap_tokens=3, count_tokens=len) == [1, 3]


def test_pack_pieces_stops_when_the_cap_is_full():
    def count(text: str) -> int:
        return 0 if text == "z" else len(text)

    assert pack_pieces(["aaaa", "z"], cap_tokens=4, count_tokens=count, separator="") == [0]
    assert pack_pieces(["aaa", "z"], cap_tokens=4, count_tokens=count, separator="") == [0, 1]
    assert pack_pieces(["z", "a"], cap_tokens=0, count_tokens=count) == []


def test_pack_pieces_checks_the_joined_text():
    def count(text: str) -> int:  # joining costs more than the parts
        return 0 if text == "\n" else len(text) + text.count("\n") * 10

    assert pack_pieces(["ab", "cd", "e"], cap_tokens=10, count_tokens=count) == [0]


def test_pack_pieces_refuses_a_negative_cap():
    with pytest.raises(ValueError, match=_exact("cap_tokens must be >= 0, got -1")):
        pack_pieces(["a"], cap_tokens=-1, count_tokens=len)


# ================================================================== strategies


class _FakeMemory:
    """The reads `ctxpolicy.memory.strategies` makes, recorded."""

    def __init__(self, l1=(), l2=(), l3=(), hits=(), *, l1_size=3, l3_size=150):
        self.l1, self.l2, self.l3, self.hits = list(l1), list(l2), list(l3), list(hits)
        self.l1_size, self.l3_size = l1_size, l3_size
        self.calls: list[tuple] = []

    def get_l1(self, limit=None):
        self.calls.append(("l1", limit))
        return self.l1[-limit:] if limit else list(self.l1)

    def get_l2(self):
        self.calls.append(("l2",))
        return list(self.l2)

    def get_l3(self, limit=None):
        self.calls.append(("l3", limit))
        return self.l3[-limit:] if limit else list(self.l3)

    def search(self, query, limit=5, *, tiers=None):
        self.calls.append(("search", query, limit, tiers))
        return self.hits[:limit]


def _fake() -> _FakeMemory:
    return _FakeMemory(
        l1=[_item(f"recent {i}", seq=10 + i) for i in range(4)],
        l2=[_item("work a", seq=3), _item("work b", seq=2)],
        l3=[_item(f"sum {i}", seq=i, id=f"s{i}") for i in range(3)],
        hits=[_item(f"hit {i}", seq=20 + i, id=f"h{i}") for i in range(8)],
    )


def _contents(items):
    return [getattr(i, "item", i).content for i in items]


def test_strategy_tables():
    assert STRATEGY_SHARES == {
        "minimal": {},
        "balanced": {"search": 0.5, "l1": 0.2, "l2": 0.3},
        "comprehensive": {"search": 0.45, "l1": 0.2, "l2": 0.2, "l3": 0.15},
    }
    assert (SEARCH_POOL, MAX_SEARCH_POOL, L3_POOL) == (96, 500, 100)
    assert SOURCE_TIER == {"search": "l4", "l1": "l1", "l2": "l2", "l3": "l3"}
    assert TIER_DEFAULT_LIMITS == {"l1": 10, "l2": None, "l3": 20, "l4": 5}


def test_content_key_and_item_key():
    assert content_key("  Hello\n\tWORLD  ") == "hello world"
    assert content_key("Straße") == "strasse"
    assert item_key(_item(id="a")) == "a"
    assert item_key(MemoryHit("a", "t", 0.5, 1, part=3, whole=False)) == "a#3"


def test_check_shares():
    assert check_shares({}) == {}
    assert check_shares({"l1": 0, "l3": 1}) == {"l1": 0.0, "l3": 1.0}
    assert check_shares({"search": 0.5, "l1": 0.5}) == {"search": 0.5, "l1": 0.5}
    assert check_shares({"search": 1, "l1": 0.25}) == {"search": 0.8, "l1": 0.2}
    got = check_shares({"l2": 1})
    assert type(got["l2"]) is float


@pytest.mark.parametrize(
    ("shares", "message"),
    [
        ({"l4": 0.1}, "shares: unknown source 'l4' (one of search, l1, l2, l3)"),
        ({"l1": -0.1}, "shares['l1'] must be a number in [0, 1], got -0.1"),
        ({"l1": 1.5}, "shares['l1'] must be a number in [0, 1], got 1.5"),
        ({"l2": True}, "shares['l2'] must be a number in [0, 1], got True"),
        ({"l2": "0.5"}, "shares['l2'] must be a number in [0, 1], got '0.5'"),
        ({"l2": None}, "shares['l2'] must be a number in [0, 1], got None"),
        ({"l3": math.nan}, "shares['l3'] must be a number in [0, 1], got nan"),
        ({"l3": math.inf}, "shares['l3'] must be a number in [0, 1], got inf"),
    ],
)
def test_check_shares_errors(shares, message):
    with pytest.raises(ValueError, match=_exact(message)):
        check_shares(shares)


def test_strategy_shares():
    assert strategy_shares(None) == {"search": 0.5, "l1": 0.2, "l2": 0.3}
    assert strategy_shares("comprehensive") == dict(STRATEGY_SHARES["comprehensive"])
    assert strategy_shares("minimal") == {}
    assert strategy_shares("minimal", {"l1": 1}) == {"l1": 1.0}
    copy = strategy_shares("balanced")
    copy["l1"] = 0.9
    assert STRATEGY_SHARES["balanced"]["l1"] == 0.2
    with pytest.raises(
        ValueError,
        match=_exact("strategy must be one of minimal, balanced, comprehensive; got 'huge'"),
    ):
        strategy_shares("huge")  # type: ignore[arg-type]


def test_read_tier_exact_reads():
    mem = _fake()
    assert _contents(read_tier(mem, "l1", count=None, query=None)) == [
        "recent 3",
        "recent 2",
        "recent 1",
    ]
    assert _contents(read_tier(mem, "l1", count=2, query=None)) == ["recent 3", "recent 2"]
    assert _contents(read_tier(mem, "l2", count=None, query=None)) == ["work a", "work b"]
    assert _contents(read_tier(mem, "l2", count=1, query=None)) == ["work a"]
    assert _contents(read_tier(mem, "l3", count=None, query=None)) == ["sum 2", "sum 1", "sum 0"]
    assert _contents(read_tier(mem, "l3", count=1, query=None)) == ["sum 2"]
    assert mem.calls == [("l1", 3), ("l1", 2), ("l2",), ("l2",), ("l3", 150), ("l3", 1)]


def test_read_tier_l4_searches_the_older_tiers():
    mem = _fake()
    assert read_tier(mem, "l4", count=None, query=None) == []
    assert read_tier(mem, "l4", count=3, query="  ") == []
    assert mem.calls == []
    assert _contents(read_tier(mem, "l4", count=None, query="q")) == [f"hit {i}" for i in range(5)]
    assert len(read_tier(mem, "l4", count=7, query="q")) == 7
    assert mem.calls == [
        ("search", "q", 5, ("l2", "l3", "l4")),
        ("search", "q", 7, ("l2", "l3", "l4")),
    ]


@pytest.mark.parametrize(
    ("cap", "expected"),
    [(None, 96), (0, 96), (2327, 96), (2328, 97), (4800, 200), (12000, 500), (12024, 500)],
)
def test_search_pool(cap, expected):
    assert search_pool(cap) == expected


def test_read_source_exact_reads():
    mem = _fake()
    assert read_source(mem, "search", query=None) == []
    assert read_source(mem, "search", query=" \n") == []
    assert mem.calls == []
    read_source(mem, "search", query="q")
    read_source(mem, "search", query="q", cap_tokens=4800)
    read_source(mem, "search", query="q", cap_tokens=4800, search_hits=3)
    assert _contents(read_source(mem, "l3", query="q")) == ["sum 2", "sum 1", "sum 0"]
    assert _contents(read_source(mem, "l1", query="q")) == ["recent 3", "recent 2", "recent 1"]
    assert _contents(read_source(mem, "l2", query="q")) == ["work a", "work b"]
    assert mem.calls == [
        ("search", "q", 96, None),
        ("search", "q", 200, None),
        ("search", "q", 3, None),
        ("l3", 100),
        ("l1", 3),
        ("l2",),
    ]
    small = _FakeMemory(l3_size=20)
    read_source(small, "l3", query=None)
    assert small.calls == [("l3", 20)]


def test_select_memory_argument_errors():
    mem = _fake()
    with pytest.raises(ValueError, match=_exact("give either strategy or tier, not both")):
        select_memory(mem, strategy="balanced", tier="l1")
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match=_exact(f"limit must be an integer >= 1, got {bad!r}")):
            select_memory(mem, tier="l1", limit=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=_exact("tier must be one of l1, l2, l3, l4; got 'l9'")):
        select_memory(mem, tier="l9")  # type: ignore[arg-type]
    assert mem.calls == []


def test_select_single_tiers_with_their_default_limits():
    mem = _fake()
    assert [c.tier for c in select_memory(mem, tier="l1")] == ["l1"] * 4
    select_memory(mem, tier="l3")
    select_memory(mem, tier="l4", query="q")
    assert mem.calls == [("l1", 10), ("l3", 20), ("search", "q", 5, ("l2", "l3", "l4"))]
    got = select_memory(mem, tier="l2", limit=1)
    assert [(c.tier, c.item.content) for c in got] == [("l2", "work a")]


def test_select_l4_falls_back_to_the_newest_l1_item():
    mem = _fake()
    select_memory(mem, tier="l4")
    assert mem.calls == [("l1", 1), ("search", "recent 3", 5, ("l2", "l3", "l4"))]
    empty = _FakeMemory(hits=[_item("h")])
    assert select_memory(empty, tier="l4") == []
    assert empty.calls == [("l1", 1)]
    given = _fake()
    select_memory(given, tier="l4", query="")
    assert given.calls == []


def test_select_memory_strategy_reads_and_limit():
    mem = _fake()
    got = select_memory(mem, query="q", limit=4)
    assert [(c.tier, c.item.content) for c in got] == [
        ("l4", "hit 0"),
        ("l4", "hit 1"),
        ("l4", "hit 2"),
        ("l4", "hit 3"),
    ]
    assert mem.calls == [("search", "q", 96, None), ("l1", 3), ("l2",)]
    got = select_memory(_fake(), query="q", shares={"l1": 0.3, "l3": 0.2})
    assert [(c.tier, c.item.content) for c in got] == [
        ("l1", "recent 3"),
        ("l1", "recent 2"),
        ("l1", "recent 1"),
        ("l3", "sum 2"),
        ("l3", "sum 1"),
        ("l3", "sum 0"),
    ]


def test_source_pools_read_only_positive_shares_in_source_order():
    mem = _fake()
    pools = source_pools(mem, {"l2": 0.5, "l1": 0.1, "search": 0, "l3": 0.0}, query=None)
    assert list(pools) == ["l1", "l2"]
    assert mem.calls == [("l1", 3), ("l2",)]
    assert [c.tier for c in pools["l1"]] == ["l1"] * 3
    mem = _fake()
    pools = source_pools(mem, {"l3": 0.1, "search": 0.2}, query=None, cap_tokens=4800)
    assert list(pools) == ["search", "l3"]
    assert {c.tier for c in pools["search"]} == {"l4"}
    assert mem.calls == [("l1", 1), ("search", "recent 3", 200, None), ("l3", 100)]
    mem = _fake()
    source_pools(mem, {"search": 1}, query="q", cap_tokens=4800, search_hits=2)
    assert mem.calls == [("search", "q", 2, None)]


def _cands(tier, *contents, start=0):
    return [
        Candidate(tier, _item(text, seq=start + i, id=f"{tier}{start + i}"))
        for i, text in enumerate(contents)
    ]


def test_pack_shares_each_source_within_its_share_then_the_rest():
    pools = {
        "search": _cands("l4", "aaaa", "bbbb", "cccc", start=10),
        "l1": _cands("l1", "dddd", "eeee", start=20),
    }
    shares = {"search": 0.5, "l1": 0.5}
    used: list[int] = []
    got = pack_shares(pools, shares, cap_tokens=30, count_tokens=len, used_out=used)
    # lines "- xxxx" cost 6, the separator 1: search takes 2 (6 + 7 <= 15), l1 2 (14)
    assert [c.item.content for c in got] == ["aaaa", "bbbb", "dddd", "eeee"]
    assert used == [27]
    got = pack_shares(pools, shares, cap_tokens=34, count_tokens=len, used_out=used)
    assert [c.item.content for c in got] == ["aaaa", "bbbb", "cccc", "dddd", "eeee"]
    assert used == [27, 34]
    # search's share holds one line; the rest of the cap then takes the next search hit
    got = pack_shares(pools, {"search": 0.2, "l1": 0.8}, cap_tokens=30, count_tokens=len)
    assert [c.item.content for c in got] == ["aaaa", "bbbb", "dddd", "eeee"]
    got = pack_shares(pools, {"search": 0.2, "l1": 0.1}, cap_tokens=30, count_tokens=len)
    assert [c.item.content for c in got] == ["aaaa", "bbbb", "cccc", "dddd"]


def test_pack_shares_skips_sources_without_share_or_items():
    pools = {"search": _cands("l4", "aaaa"), "l1": _cands("l1", "bbbb"), "l2": []}
    got = pack_shares(pools, {"l1": 1.0, "search": 0, "l2": 0.5}, cap_tokens=99, count_tokens=len)
    assert [c.item.content for c in got] == ["bbbb"]
    assert pack_shares({}, {"l1": 1.0}, cap_tokens=99, count_tokens=len) == []


def test_pack_shares_counts_repeats_once_and_respects_limit():
    pools = {
        "search": [
            Candidate("l4", _item("Same  TEXT", id="a", seq=1)),
            Candidate("l4", _item("other", id="a", seq=2)),
            Candidate("l4", _item("same text", id="b", seq=3)),
            Candidate("l4", _item("third", id="c", seq=4)),
        ],
        "l1": [Candidate("l1", _item("fourth", id="d", seq=5))],
    }
    got = pack_shares(pools, {"search": 0.5, "l1": 0.5}, cap_tokens=99, count_tokens=len)
    assert [c.item.id for c in got] == ["a", "c", "d"]
    got = pack_shares(pools, {"search": 0.5, "l1": 0.5}, cap_tokens=99, count_tokens=len, limit=2)
    assert [c.item.id for c in got] == ["a", "c"]


def test_pack_shares_stops_when_only_a_separator_fits():
    pools = {"l1": _cands("l1", "a", "b")}  # lines cost 3
    assert [
        c.item.content for c in pack_shares(pools, {"l1": 1}, cap_tokens=4, count_tokens=len)
    ] == ["a"]

    def count(text: str) -> int:
        return 2 if text == "\n" else len(text)

    assert pack_shares(pools, {"l1": 1}, cap_tokens=2, count_tokens=count) == []
    assert len(pack_shares(pools, {"l1": 1}, cap_tokens=3, count_tokens=count)) == 1


def test_pack_shares_checks_the_joined_text_and_refuses_a_negative_cap():
    def count(text: str) -> int:
        return 0 if text == "\n" else len(text) + text.count("\n") * 10

    pools = {"l1": _cands("l1", "a", "b", "c")}
    used: list[int] = []
    got = pack_shares(pools, {"l1": 1}, cap_tokens=12, count_tokens=count, used_out=used)
    assert [c.item.content for c in got] == ["a"]
    assert used == [9]
    with pytest.raises(ValueError, match=_exact("cap_tokens must be >= 0, got -1")):
        pack_shares(pools, {"l1": 1}, cap_tokens=-1, count_tokens=len)


def _words(text: str) -> int:
    """Tokens as words, the bullet not counted (a newline costs nothing)."""
    return len([w for w in text.split() if w != "-"])


def test_pack_memory_small_caps_and_argument_errors():
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return _words(text)

    mem = _fake()
    assert pack_memory(mem, cap_tokens=0, count_tokens=counting) == []
    assert pack_memory(mem, cap_tokens=-1, count_tokens=counting) == []
    assert pack_memory(mem, cap_tokens=99, count_tokens=counting, strategy="minimal") == []
    assert calls == []
    assert mem.calls == []
    got = pack_memory(_fake(), cap_tokens=2, count_tokens=_words, query="q")
    assert [c.item.content for c in got] == ["hit 0"]
    got = pack_memory(
        _FakeMemory(l1=[_item("one")]), cap_tokens=1, count_tokens=_words, shares={"l1": 1}
    )
    assert [c.item.content for c in got] == ["one"]
    with pytest.raises(ValueError, match=_exact("limit must be an integer >= 1, got 0")):
        pack_memory(mem, cap_tokens=99, count_tokens=_words, limit=0)


def _limits(memory: _FakeMemory) -> list[int]:
    return [call[2] for call in memory.calls if call[0] == "search"]


def test_pack_memory_reads_more_search_hits_until_the_pool_is_at_most():
    repeats = _FakeMemory(hits=[_item("same", id=f"h{i}", seq=i) for i in range(600)])
    got = pack_memory(repeats, cap_tokens=100, count_tokens=_words, query="q")
    assert [c.item.content for c in got] == ["same"]
    assert _limits(repeats) == [96, 192, 384, 500]
    short = _FakeMemory(hits=[_item("same", id=f"h{i}", seq=i) for i in range(100)])
    pack_memory(short, cap_tokens=100, count_tokens=_words, query="q")
    assert _limits(short) == [96, 192]
    exact = _FakeMemory(hits=[_item("same", id=f"h{i}", seq=i) for i in range(96)])
    pack_memory(exact, cap_tokens=100, count_tokens=_words, query="q")
    assert _limits(exact) == [96, 192]


def test_pack_memory_stops_when_full_or_at_the_limit():
    many = [_item(f"w{i} x", id=f"h{i}", seq=i) for i in range(200)]
    full = _FakeMemory(hits=many)
    got = pack_memory(full, cap_tokens=10, count_tokens=_words, query="q")
    assert len(got) == 5
    assert _limits(full) == [96]
    limited = _FakeMemory(hits=[_item("same", id="s0"), *many])
    got = pack_memory(limited, cap_tokens=1000, count_tokens=_words, query="q", limit=3)
    assert len(got) == 3
    assert _limits(limited) == [96]


def test_packing_done():
    pools = {"search": _cands("l4", *[f"h{i}" for i in range(4)])}
    packed = _cands("l4", "a", "b")

    def done(*, pools=pools, used=0, hits=4, cap=100, limit=None):
        return _packing_done(pools, packed, used=used, hits=hits, cap_tokens=cap, limit=limit)

    assert done() is False
    assert done(hits=5) is True  # the search had fewer than asked: nothing more to read
    assert done(pools={}, hits=1) is True
    assert done(used=90) is True
    assert done(used=89) is False
    assert done(limit=2) is True
    assert done(limit=3) is False
    assert done(hits=MAX_SEARCH_POOL, pools={"search": [packed[0]] * MAX_SEARCH_POOL}) is True
    assert done(hits=MAX_SEARCH_POOL - 1, pools={"search": [packed[0]] * 499}) is False


def test_dedupe_candidates():
    hit0 = MemoryHit("a", "part zero", 0.5, 1, part=0, whole=False)
    hit1 = MemoryHit("a", "part one", 0.5, 1, part=1, whole=False)
    cands = [
        Candidate("l1", _item("One", id="x")),
        Candidate("l2", _item("two", id="x")),
        Candidate("l2", _item(" one ", id="y")),
        Candidate("l4", hit0),
        Candidate("l4", hit1),
        Candidate("l3", _item("three", id="z")),
    ]
    assert [c.item.content for c in dedupe_candidates(cands)] == [
        "One",
        "part zero",
        "part one",
        "three",
    ]
    assert [c.item.content for c in dedupe_candidates(cands, limit=2)] == ["One", "part zero"]
    assert [c.item.content for c in dedupe_candidates(cands, limit=1)] == ["One"]


def test_render_items_and_candidates():
    assert render_item(_item("  text \n", kind="user")) == "- [user] text"
    assert render_item(_item("text")) == "- text"
    cands = [Candidate("l1", _item("a", kind="note")), Candidate("l1", _item("b"))]
    assert render_candidates(cands) == "- [note] a\n- b"
    assert render_candidates([]) == ""


def test_order_for_reading():
    cands = [
        Candidate("l4", MemoryHit("h", "h2", 0.5, 5, part=2, whole=False)),
        Candidate("l2", _item("imp low", seq=1)),
        Candidate("l4", MemoryHit("h", "h1", 0.5, 5, part=1, whole=False)),
        Candidate("l1", _item("new", seq=9)),
        Candidate("l2", _item("imp high", seq=7)),
        Candidate("l4", _item("old", seq=2)),
        Candidate("l1", _item("old l1", seq=8)),
    ]
    assert [c.item.content for c in order_for_reading(cands)] == [
        "old",
        "h1",
        "h2",
        "imp low",
        "imp high",
        "old l1",
        "new",
    ]


def test_pack_candidates_chooses_in_priority_order_and_reads_in_time_order():
    cands = [
        Candidate("l1", _item("newest", seq=9)),
        Candidate("l1", _item("too long to fit at all", seq=5)),
        Candidate("l1", _item("old", seq=1)),
    ]
    got = pack_candidates(cands, cap_tokens=3, count_tokens=_words)
    assert [c.item.content for c in got] == ["old", "newest"]
    assert pack_candidates(cands, cap_tokens=0, count_tokens=_words) == []


# ------------------------------------------------------------------ boundaries and call counts


def test_summarize_extractive_keeps_a_multi_line_text_of_exactly_the_budget():
    assert summarize_extractive("aaa\nbbbb", max_chars=8) == "aaa bbbb"
    assert summarize_extractive("aaa\nbbbbb", max_chars=8) == "aaa"


def test_summarize_item_passes_its_token_budget():
    item = _item("word " * 100)
    assert summarize_item(item, None, max_tokens=5) == "word word word…"
    assert summarize_item(item, None) == summarize_extractive(item.content, max_tokens=96)
    assert summarize_item(item, None) != summarize_item(item, None, max_tokens=5)


def test_select_memory_reads_the_sources_of_the_given_strategy():
    mem = _fake()
    got = select_memory(mem, strategy="comprehensive", query="q")
    assert [c.tier for c in got] == ["l4"] * 8 + ["l1"] * 3 + ["l2"] * 2 + ["l3"] * 3
    assert mem.calls == [("search", "q", 96, None), ("l1", 3), ("l2",), ("l3", 100)]
    minimal = _fake()
    assert select_memory(minimal, strategy="minimal", query="q") == []
    assert minimal.calls == []


def test_source_pools_without_a_search_share_do_not_look_for_a_query():
    mem = _fake()
    source_pools(mem, {"l2": 1.0}, query=None)
    assert mem.calls == [("l2",)]


def test_pack_shares_zero_cap_and_sources_left_out_of_the_shares():
    pools = {"l1": _cands("l1", "a"), "l2": _cands("l2", "b", start=5)}
    used: list[int] = []
    assert pack_shares(pools, {"l1": 1.0}, cap_tokens=0, count_tokens=len, used_out=used) == []
    assert used == [0]
    got = pack_shares(pools, {"l1": 1.0}, cap_tokens=99, count_tokens=len)
    assert [c.item.content for c in got] == ["a"]


def test_pack_shares_skips_a_candidate_too_big_and_takes_a_later_one():
    pools = {"l1": _cands("l1", "a" * 20, "b")}
    got = pack_shares(pools, {"l1": 1.0}, cap_tokens=10, count_tokens=len)
    assert [c.item.content for c in got] == ["b"]


def test_pack_shares_costs_each_line_by_its_own_text():
    pools = {
        "search": _cands("l4", "aaaaaaaaaa", "b", start=10),  # lines cost 12 and 3
        "l1": _cands("l1", "c", "dddddddddd", start=20),  # 3 and 12
    }
    got = pack_shares(pools, {"search": 0.5, "l1": 0.5}, cap_tokens=33, count_tokens=len)
    assert [c.item.content for c in got] == ["aaaaaaaaaa", "b", "c", "dddddddddd"]
    got = pack_shares(pools, {"search": 0.5, "l1": 0.5}, cap_tokens=32, count_tokens=len)
    assert [c.item.content for c in got] == ["aaaaaaaaaa", "b", "c"]
    got = pack_shares(pools, {"search": 0.5, "l1": 0.5}, cap_tokens=20, count_tokens=len)
    assert [c.item.content for c in got] == ["aaaaaaaaaa", "b", "c"]


def test_pack_shares_counts_each_line_once():
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    pools = {"search": _cands("l4", "aaaa", "bbbbbbbbbbbb"), "l1": _cands("l1", "cc", start=5)}
    got = pack_shares(pools, {"search": 0.3, "l1": 0.7}, cap_tokens=40, count_tokens=count)
    assert [c.item.content for c in got] == ["aaaa", "bbbbbbbbbbbb", "cc"]
    # the separator, each line once (the second search line is looked at twice), the result
    assert calls == ["\n", "- aaaa", "- bbbbbbbbbbbb", "- cc", "- aaaa\n- cc\n- bbbbbbbbbbbb"]


def test_pack_shares_stops_when_the_rest_only_holds_a_separator():
    def count(text: str) -> int:
        return 2 if text == "\n" else 1

    pools = {"l1": _cands("l1", "a", "b")}
    assert pack_shares(pools, {"l1": 1}, cap_tokens=2, count_tokens=count) == []
    got = pack_shares(pools, {"l1": 1}, cap_tokens=3, count_tokens=count)
    assert [c.item.content for c in got] == ["a"]

    def free_z(text: str) -> int:  # the line "- z" costs nothing
        return 2 if text == "\n" else 0 if text == "- z" else 1

    pools = {"l1": _cands("l1", "a", "z")}
    got = pack_shares(pools, {"l1": 1}, cap_tokens=3, count_tokens=free_z)
    assert [c.item.content for c in got] == ["a"]
    got = pack_shares(pools, {"l1": 1}, cap_tokens=4, count_tokens=free_z)
    assert [c.item.content for c in got] == ["a", "z"]


def test_pack_memory_uses_the_given_shares_and_reads_hits_for_its_cap():
    mem = _fake()
    got = pack_memory(mem, cap_tokens=99, count_tokens=_words, shares={"l2": 1})
    assert [c.item.content for c in got] == ["work a", "work b"]
    assert mem.calls == [("l2",)]
    big = _fake()
    pack_memory(big, cap_tokens=4800, count_tokens=_words, query="q")
    assert _limits(big) == [200]


def test_order_for_reading_keeps_l2_by_importance():
    cands = [
        Candidate("l2", _item("imp high", seq=7)),
        Candidate("l2", _item("imp low", seq=1)),
        Candidate("l3", _item("b", seq=4, id="b")),
        Candidate("l3", _item("a", seq=3, id="a")),
    ]
    assert [c.item.content for c in order_for_reading(cands)] == ["imp high", "imp low", "a", "b"]


def test_order_for_reading_units_without_a_usable_part_count_as_the_first():
    item = _item("whole", seq=5, id="w")
    unit = MemoryHit("u", "unit 0", 0.5, 5, part=0, whole=False)
    odd = MemoryHit("o", "odd", 0.5, 5, part=None, whole=False)  # type: ignore[arg-type]
    later = MemoryHit("u", "unit 1", 0.5, 5, part=1, whole=False)
    got = order_for_reading([Candidate("l4", c) for c in (later, item, odd, unit)])
    assert [c.item.content for c in got] == ["whole", "odd", "unit 0", "unit 1"]
    same = [Candidate("l1", _item("x", seq=2, id="x")), Candidate("l1", _item("y", seq=2, id="y"))]
    assert [c.item.content for c in order_for_reading(same)] == ["x", "y"]


def test_pack_pieces_separator_costs_and_skipping():
    assert pack_pieces(["aaa", "bbbb", "c"], cap_tokens=7, count_tokens=len) == [0, 2]
    assert pack_pieces(["aa", "bb", "ccc", "d"], cap_tokens=5, count_tokens=len, separator="") == [
        0,
        1,
        3,
    ]

    def with_overhead(text: str) -> int:
        return len(text) + 1

    assert pack_pieces(["a", "b"], cap_tokens=4, count_tokens=with_overhead, separator="") == [0, 1]


def test_score_importance_a_failed_tool_does_not_count_its_error_twice():
    assert score_importance(kind="tool_failure", content="deploy failed with error 500") == 0.85
    assert score_importance(kind="tool_success", content="deploy failed with error 500") == 0.85
