"""Selection: only what the prompt lacks, whole units, corrections win, session order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxpolicy.recall.index import RecallHit, query_terms
from ctxpolicy.recall.select import select_units
from ctxpolicy.recall.units import Unit, states_value
from ctxpolicy.tokens import get_tokenizer

TOK = get_tokenizer("cl100k_base")


def hit(position: int, text: str, score: float = 1.0, part: int = 0) -> RecallHit:
    # like the index: a unit knows whether it states a value
    unit = Unit(f"m{position}", position, part, "user", None, 1, 1, text, "", states_value(text))
    return RecallHit(unit, score)


def choose(hits: list[RecallHit], query: str, *, cap: int = 500, kept_from: int = 10_000, **kw):
    return select_units(
        hits,
        terms=query_terms(query),
        in_history=lambda position, message_id: message_id == f"m{position}",
        kept_from=kept_from,
        prompt_text=kw.pop("prompt_text", ""),
        cap_tokens=cap,
        count_tokens=TOK.count,
        **kw,
    )


def test_units_are_shown_in_session_order_with_labels() -> None:
    hits = [hit(50, "deploy region is eu-west-3", 9.0), hit(3, "deploy window is Friday", 5.0)]
    text, units = choose(hits, "deploy region window")
    assert text is not None
    assert [u.label for u in units] == ["#3 user", "#50 user"]
    assert text.index("[#3 user] deploy window is Friday") < text.index("[#50 user] deploy region")


def test_correction_reads_after_what_it_corrects_and_is_never_left_out() -> None:
    old = hit(10, "the prod database port is 5432", 9.0)
    new = hit(900, "correction: the prod database port is now 6432", 2.0)
    # room for exactly one of the two lines plus the header: the stale one must not be chosen
    header_and_one = TOK.count(choose([old], "prod database port")[0] or "")
    text, _ = choose([old, new], "prod database port", cap=header_and_one + 2)
    assert text is None or "5432" not in text or "6432" in text
    text, units = choose([old, new], "prod database port", cap=500)
    assert text is not None
    assert text.index("5432") < text.index("6432")
    assert [u.message_id for u in units] == ["m10", "m900"]


def test_newer_value_in_kept_history_lets_the_old_one_in() -> None:
    # the correction sits in the kept history (position >= kept_from): the old line may
    # be recalled, and the history (later in the prompt) reads as newer
    old = hit(10, "the prod database port is 5432", 9.0)
    new = hit(900, "correction: the prod database port is now 6432", 2.0)
    text, units = choose([old, new], "prod database port", kept_from=800)
    assert [u.message_id for u in units] == ["m10"]
    assert text is not None and "6432" not in text


def test_nothing_already_in_the_prompt_is_repeated() -> None:
    hits = [hit(1, "owner of orders_v7 is Dana"), hit(2, "orders_v7 has 12 partitions")]
    _, units = choose(
        hits, "orders_v7 owner partitions", prompt_text="Summary: owner of orders_v7 is Dana."
    )
    assert [u.message_id for u in units] == ["m2"]
    # units from kept messages are not recalled either
    _text, units = choose(hits, "orders_v7 owner partitions", kept_from=2)
    assert [u.message_id for u in units] == ["m1"]


def test_units_of_another_branch_are_skipped() -> None:
    stray = RecallHit(Unit("other", 4, 0, "user", None, 1, 1, "region is us-east-1"), 5.0)
    _text, units = choose([stray, hit(5, "region is eu-west-3")], "region")
    assert [u.message_id for u in units] == ["m5"]


def test_repeated_lines_are_shown_once_the_newest_copy() -> None:
    hits = [hit(1, "ERROR disk full on db-7", 3.0), hit(8, "ERROR  disk full on db-7", 2.0)]
    _, units = choose(hits, "disk full db-7")
    assert [u.message_id for u in units] == ["m8"]


def test_a_unit_too_big_is_skipped_and_smaller_ones_still_fill() -> None:
    big = hit(1, "latency " * 400, 9.0)
    small = hit(2, "latency p99 is 840ms", 1.0)
    text, units = choose([big, small], "latency", cap=80)
    assert [u.message_id for u in units] == ["m2"]
    assert text is not None and TOK.count(text) <= 80


@given(
    st.lists(
        st.tuples(st.integers(0, 200), st.text(alphabet="abc xyz 0123\n", min_size=1, max_size=80)),
        max_size=40,
    ),
    st.integers(0, 400),
)
def test_never_over_cap_and_always_in_session_order(items, cap) -> None:
    hits = [hit(p, t, score=float(-i), part=i) for i, (p, t) in enumerate(items)]
    text, units = choose(hits, "abc xyz 0123", cap=cap)
    if text is None:
        assert units == ()
        return
    assert sum(u.tokens for u in units) + TOK.count(text.split("\n", 1)[0] + "\n") <= cap
    positions = [int(u.message_id[1:]) for u in units]
    assert positions == sorted(positions)
