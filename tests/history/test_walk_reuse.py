"""`fit_history(previous=...)`: the next turn reuses the last walk and gives the same fit.

The reuse is an optimisation only: with or without ``previous`` the kept messages, the
dropped prefix, the tokens and the repairs are the same, whatever happened to the
history between the two calls (messages appended, replaced, edited in place, removed,
the budget moved). And it must really be used: appending counts only the new messages.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.history import (
    HistoryWalk,
    MessagesView,
    count_newest,
    fit_history,
    latest_walk,
)

from .test_history import ai_calls, budgets, count, histories, ids, recording, tool


def same_fit(a, b):
    assert ids(a.kept) == ids(b.kept)
    assert ids(a.dropped) == ids(b.dropped)
    assert a.tokens == b.tokens
    assert a.repairs == b.repairs


class _CountingTokenizer:
    """What `count_newest` needs of a tokenizer: ``count_message`` (`count`), recorded."""

    def __init__(self):
        self.counted = []

    def count_message(self, message):
        self.counted.append(id(message))
        return count(message)


def assert_dropped_counts(fit, limits):
    """``fit.dropped_counts`` are the counts of the newest dropped messages, and
    `count_newest` gives the same with them as without them, whatever the limit."""
    counted = fit.dropped_counts
    assert len(counted) <= len(fit.dropped)
    for i, tokens in enumerate(counted):
        assert tokens == count(fit.dropped[len(fit.dropped) - 1 - i])
    for limit in limits:
        tok = _CountingTokenizer()
        with_counts = count_newest(tok, fit.dropped, limit, counted=counted)
        assert with_counts == count_newest(_CountingTokenizer(), fit.dropped, limit)
        newest = [id(m) for m in list(fit.dropped)[len(fit.dropped) - len(counted) :]]
        assert not set(tok.counted) & set(newest)  # what the walk counted is not counted again


def fresh(messages, max_tokens):
    return fit_history(messages, max_tokens=max_tokens, count=count)


CHANGES = st.sampled_from(["append", "append", "append", "replace", "edit", "pop", "nothing"])


@st.composite
def sessions(draw):
    """A history, then a few (change, new messages, budget) steps applied to it."""
    history = draw(histories(broken=draw(st.booleans())))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        steps.append((draw(CHANGES), draw(histories(broken=draw(st.booleans()))), draw(budgets)))
    return history, steps


def _change(history, change, new, rng_index):
    if change == "append":
        return history + new
    if not history:
        return history + new
    i = rng_index % len(history)
    if change == "replace":  # what add_messages does for an id it holds: a new object
        copy = history[i].model_copy(update={"content": history[i].content + "!"})
        return [*history[:i], copy, *history[i + 1 :]]
    if change == "edit":  # content assigned in place: the same object
        history[i].content = history[i].content + "?"
        return list(history)
    if change == "pop":
        return history[:-1]
    return list(history)


@given(sessions(), budgets, st.integers(0, 10_000))
@settings(max_examples=300, deadline=None)
def test_reusing_the_previous_walk_gives_the_same_fit(session, first_budget, index):
    history, steps = session
    fit = fresh(history, first_budget)
    for change, new, budget in steps:
        history = _change(history, change, new, index)
        reused = fit_history(history, max_tokens=budget, count=count, previous=fit.walk)
        same_fit(reused, fresh(history, budget))
        assert_dropped_counts(reused, (0, budget // 2, budget, 2 * budget))
        walk = reused.walk
        if walk is not None:  # what the next turn checks is what the window holds now
            assert walk.window == tuple(history[walk.start : walk.end])
            assert walk.contents == tuple(m.content for m in walk.window)
        fit = reused


@given(histories(), budgets, budgets, histories())
@settings(max_examples=200, deadline=None)
def test_appending_counts_only_the_new_messages(history, first_budget, budget, new):
    first = fresh(history, first_budget)
    grown = history + new
    counter, counted = recording()
    second = fit_history(grown, max_tokens=budget, count=counter, previous=first.walk)
    same_fit(second, fresh(grown, budget))
    assert first.walk is not None  # a valid history, messages as given: reusable
    walked = set(ids(first.walk.window))
    if budget <= first_budget or first.walk.reached_start:
        # nothing older than the last walk is needed: the old window is never counted again
        assert not walked & set(counted)


def test_next_turn_reuses_the_walk_through_a_view_and_latest_walk_finds_it():
    history = []
    for i in range(200):
        history += [HumanMessage(f"q{i} " + "x" * 20), ai_calls(f"c{i}"), tool(f"c{i}", "r" * 10)]
        history.append(AIMessage(f"a{i}"))
    first = fit_history(MessagesView(history, argument="h"), max_tokens=300, count=count)
    assert isinstance(first.walk, HistoryWalk)
    assert first.walk.end == len(history)
    history += [HumanMessage("next"), AIMessage("reply")]
    view = MessagesView(history, argument="h")
    assert latest_walk([first.walk], view) is first.walk
    counter, counted = recording()
    second = fit_history(view, max_tokens=300, count=counter, previous=first.walk)
    assert counted == [id(history[-1]), id(history[-2])]
    same_fit(second, fresh(history, 300))


def test_the_next_turn_walks_only_what_the_view_shows():
    # a view that stops before the end of its list: the items after it are not history
    history = []
    for i in range(40):
        history += [HumanMessage(f"q{i} " + "x" * 20), AIMessage(f"a{i}")]
    first = fit_history(MessagesView(history, argument="h"), max_tokens=300, count=count)
    history += [HumanMessage("next"), AIMessage("reply"), HumanMessage("beyond the view")]
    view = MessagesView(history, len(history) - 1, argument="h")
    second = fit_history(view, max_tokens=300, count=count, previous=first.walk)
    assert second.kept[-1] is history[-2]
    same_fit(second, fresh(history[:-1], 300))


def test_a_fit_gives_the_counts_of_the_dropped_units_it_walked():
    """The units dropped so the kept part starts on a HumanMessage, then the one that did
    not fit, as the walk counted them (newest first), while they hold one message."""
    big = HumanMessage("q1 " + "x" * 80)
    history = [big, AIMessage("a1"), AIMessage("a2"), HumanMessage("q2"), AIMessage("a3")]
    fit = fresh(history, count(history[3]) + count(history[4]) + count(history[2]))
    assert fit.kept == (history[3], history[4])
    assert fit.dropped_counts == (count(history[2]), count(history[1]))  # a2 led, a1 over
    assert_dropped_counts(fit, (0, 10, 1_000))
    # a tool unit in the way: counted as a whole, so its messages' counts are not given
    history = [big, ai_calls("c1"), tool("c1", "r"), HumanMessage("q2")]
    fit = fresh(history, count(history[3]) + 1)
    assert fit.kept == (history[3],) and fit.dropped_counts == ()
    # nothing fits: the newest message is the unit over, when it is one message
    assert fresh([big], 1).dropped_counts == (count(big),)
    assert fresh([], 1).dropped_counts == ()


def test_items_appended_as_dicts_after_a_walk_are_read_through_the_view():
    """The appended items are walked as given only when they all are messages: a dict
    appended after a walk is converted (the fresh walk reads it through the view), one
    that cannot be converted is named as the fresh walk names it."""
    history: list[Any] = [HumanMessage("q1"), AIMessage("a1")]
    first = fit_history(MessagesView(history, argument="h"), max_tokens=1_000, count=count)
    assert first.walk is not None
    grown = [*history, {"role": "user", "content": "q2"}, AIMessage("a2")]
    view = MessagesView(grown, argument="h")
    second = fit_history(view, max_tokens=1_000, count=count, previous=first.walk)
    assert [m.content for m in second.kept] == ["q1", "a1", "q2", "a2"]
    assert isinstance(second.kept[2], HumanMessage)
    assert second.walk is None  # a converted item: no walk to reuse
    same_fit(second, fresh(view, 1_000))
    bad = MessagesView([*history, AIMessage("a2"), {"no": "role"}], argument="h")
    with pytest.raises(ValueError, match=r"h\[3\]: not a message") as reused:
        fit_history(bad, max_tokens=1_000, count=count, previous=first.walk)
    with pytest.raises(ValueError) as fresh_error:
        fresh(bad, 1_000)
    assert str(reused.value) == str(fresh_error.value)


def test_a_walk_is_not_made_for_a_repaired_window_or_converted_items():
    broken = [HumanMessage("q"), ToolMessage("orphan", tool_call_id="x"), AIMessage("a")]
    assert fresh(broken, 1_000).walk is None
    dicts = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert fit_history(MessagesView(dicts, argument="h"), max_tokens=100, count=count).walk is None
    shown = MessagesView([HumanMessage("q")]).replaced(0, HumanMessage("expanded"))
    assert fit_history(shown, max_tokens=100, count=count).walk is None


def test_latest_walk_skips_walks_of_other_histories():
    a = [HumanMessage("a")]
    b = [HumanMessage("b")]
    walk_a = fresh(a, 100).walk
    assert latest_walk([walk_a], b) is None
    assert latest_walk([walk_a], [*a, AIMessage("x")]) is walk_a
    assert latest_walk([walk_a], MessagesView([HumanMessage("q")]).replaced(0, a[0])) is None


def test_no_walk_is_made_over_converted_items_even_when_only_the_unit_over_is_one():
    items = [{"role": "user", "content": "x" * 50}]
    fit = fit_history(MessagesView(items, argument="h"), max_tokens=10, count=count)
    assert fit.kept == () and len(fit.dropped) == 1
    assert fit.walk is None
    items = [{"role": "user", "content": "x" * 50}, HumanMessage("q"), AIMessage("a")]
    fit = fit_history(MessagesView(items, argument="h"), max_tokens=10, count=count)
    assert fit.kept == (items[1], items[2]) and len(fit.dropped) == 1
    assert fit.walk is None


def test_the_tokenizer_remembers_the_newest_walks_and_clear_cache_forgets_them():
    from ctxpolicy.tokens import MAX_WALKS, Tokenizer

    tok = Tokenizer("approximate")
    walks = [fresh([HumanMessage(f"q{i}")], 100).walk for i in range(MAX_WALKS + 2)]
    for walk in walks:
        tok.remember_walk(walk)
    tok.remember_walk(walks[-3])  # remembered again: moves to the front, not duplicated
    assert tok.walks[:3] == (walks[-3], walks[-1], walks[-2])
    assert len(tok.walks) == MAX_WALKS
    assert walks[0] not in tok.walks and walks[1] not in tok.walks  # the oldest dropped
    tok.clear_cache()
    assert tok.walks == ()


def test_the_engine_counts_only_the_new_messages_on_the_next_turn():
    from ctxpolicy.tokens import get_tokenizer

    engine = _history_engine("walks")
    history = []
    for i in range(300):
        history += [HumanMessage(f"question {i} " + "x " * 20), AIMessage(f"answer {i}")]
    tok = get_tokenizer("cl100k_base")
    engine.compose(system_prompt="s", checkpoint_messages=history)
    first = latest_walk(tok.walks, history)
    assert first is not None and first.end == len(history)
    history = [*history, HumanMessage("a new question"), AIMessage("its answer")]
    result = engine.compose(system_prompt="s", checkpoint_messages=history)
    assert result.messages[-2:] == history[-2:]
    second = latest_walk(tok.walks, history)
    assert second is not None and second.end == len(history)
    # the old units were reused as they were (not parsed again), the two new ones added
    assert second.units[-2][1] == [history[-2]] and second.units[-1][1] == [history[-1]]
    reused = {id(unit) for unit in first.units}
    assert all(id(unit) in reused for unit in second.units[:-2])


def test_a_long_run_of_one_conversation_keeps_the_others_walks():
    """Each conversation holds one place among the remembered walks: an agent's run of
    many calls (a ReAct loop) does not push out the walk of the agent waiting for it."""
    from ctxpolicy.tokens import MAX_WALKS, get_tokenizer

    engine = _history_engine("walks-per-conversation")
    tok = get_tokenizer("cl100k_base")
    tok.clear_cache()  # other tests' walks share this tokenizer: start from none
    waiting = [HumanMessage("supervisor: plan the migration"), AIMessage("delegated")]
    engine.compose(system_prompt="s", checkpoint_messages=waiting)
    kept = latest_walk(tok.walks, waiting)
    assert kept is not None
    worker = [HumanMessage("worker: migrate table orders")]
    for turn in range(MAX_WALKS + 4):
        worker = [*worker, AIMessage(f"step {turn}"), HumanMessage(f"go on {turn}")]
        engine.compose(system_prompt="s", checkpoint_messages=worker)
    # one place for the worker's conversation (its newest walk), one for the supervisor's
    assert sum(1 for walk in tok.walks if walk is kept) == 1
    assert sum(1 for walk in tok.walks if walk.window and walk.window[0] is worker[0]) == 1
    waiting = [*waiting, HumanMessage("supervisor: status?")]
    engine.compose(system_prompt="s", checkpoint_messages=waiting)
    after = latest_walk(tok.walks, waiting)
    assert after is not None and kept not in tok.walks
    assert all(any(unit is old for old in kept.units) for unit in after.units[:-1])


def _history_engine(name: str) -> Any:
    """An engine whose one process sends the system prompt and 90 % of 2,000 tokens of history."""
    from ctxpolicy.engine import PolicyEngine
    from ctxpolicy.policy import Policy

    return PolicyEngine(
        Policy.model_validate(
            {
                "version": 1,
                "name": name,
                "model": {"context_window": 2_000, "tokenizer": "cl100k_base"},
                "budget": {"output_reserve": 0.0, "ratios": {"checkpoint_messages": 0.9}},
                "order": ["system_prompt", "checkpoint_messages"],
                "processes": {"react": {"checkpoint_messages": True, "query": "checkpoint"}},
                "default_process": "react",
            }
        )
    )


class _ReadCountingHuman(HumanMessage):
    """A HumanMessage that records each read of its ``content`` (in ``READS``)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "content":
            READS.append(object.__getattribute__(self, "id"))
        return super().__getattribute__(name)


READS: list[str | None] = []


def test_the_next_turn_reads_each_old_message_content_once():
    """Checking that the old window is unchanged reads each old content once; the new walk
    takes those contents from the old walk instead of reading them again."""
    history: list[Any] = []
    for i in range(30):
        history += [_ReadCountingHuman(f"question {i} " * 5, id=f"h{i}"), AIMessage(f"a{i}")]
    first = fresh(history, 10_000)
    assert first.walk is not None and first.walk.reached_start
    history += [_ReadCountingHuman("the next question", id="new"), AIMessage("answer")]
    READS.clear()
    second = fit_history(history, max_tokens=10_000, count=count, previous=first.walk)
    old = [m.id for m in first.walk.window if isinstance(m, _ReadCountingHuman)]
    reads = [r for r in READS if r in old]
    assert sorted(reads) == sorted(old)  # once each: the check, not the new record
    same_fit(second, fresh(history, 10_000))
    # the same history again, nothing appended: the whole window is taken from the walk
    assert second.walk is not None
    READS.clear()
    third = fit_history(history, max_tokens=10_000, count=count, previous=second.walk)
    again = [m.id for m in second.walk.window if isinstance(m, _ReadCountingHuman)]
    assert sorted(r for r in READS if r in again) == sorted(again)
    same_fit(third, second)


@pytest.mark.parametrize("first_budget", [25, 35, 45])
def test_a_grown_budget_reaches_the_unit_the_last_walk_stopped_at_when_it_fits_exactly(
    first_budget,
):
    # every message counts 10, so some budget of the next turn leaves exactly the room of
    # the unit the last walk stopped at: that unit fits then, and the walk goes on past it
    def turn(i):
        return [HumanMessage(f"q{i:06d}"), AIMessage(f"a{i:06d}")]

    history = [m for i in range(8) for m in turn(i)]
    assert {count(m) for m in history} == {10}
    first = fresh(history, first_budget)
    grown = history + turn(8)
    for budget in range(first_budget, first_budget + 50):
        second = fit_history(grown, max_tokens=budget, count=count, previous=first.walk)
        same_fit(second, fresh(grown, budget))


@pytest.mark.parametrize(
    "removed",
    [SystemMessage("an instruction in the middle"), ToolMessage("orphan", tool_call_id="x")],
    ids=["system", "orphan-tool"],
)
@pytest.mark.parametrize("budget", [40, 1_000])
def test_a_message_removed_at_the_old_end_of_an_appended_part_is_removed_as_fresh(removed, budget):
    """An appended part that starts with a message a repair removes (a SystemMessage, an
    orphan ToolMessage) ends its walk where the last walk ended, with a note older than
    its oldest unit: the next turn then walks afresh, so the message is removed and noted
    as a fresh fit removes it, never kept for having been appended."""
    history = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2"), AIMessage("a2")]
    first = fresh(history, budget)
    assert first.walk is not None
    grown = [*history, removed, HumanMessage("q3"), AIMessage("a3")]
    second = fit_history(grown, max_tokens=budget, count=count, previous=first.walk)
    same_fit(second, fresh(grown, budget))
    assert removed not in second.kept
    assert second.repairs
