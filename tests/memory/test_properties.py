"""Invariants of the tiers and of the collector's cap, checked on random histories."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.collectors.memory import collect_memory
from ctxpolicy.memory import TieredMemory

from .conftest import count_cl100k, make_request

_importance = st.floats(0, 1, allow_nan=False)
_sizes = st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8))


def _reference_l2(importances, size, threshold=0.6):
    """The seed promotion rule (``l2_policy="seed"``), written the slow obvious way."""
    l2: list[tuple[float, int]] = []
    for seq, imp in enumerate(importances):
        if len(l2) < size:
            if imp > threshold:
                l2.append((imp, seq))
        elif imp > min(l2)[0]:
            l2.remove(min(l2))
            l2.append((imp, seq))
    return sorted(l2, key=lambda e: (-e[0], -e[1]))


@settings(max_examples=150, deadline=None)
@given(importances=st.lists(_importance, max_size=60), sizes=_sizes)
def test_tiers_follow_the_seed_rules(importances, sizes):
    l1, l2, l3 = sizes
    mem = TieredMemory(l1, l2, l3, l2_policy="seed")
    for i, imp in enumerate(importances):
        mem.add(f"item {i}", importance=imp)
    n = len(importances)
    assert [i.seq for i in mem.get_l1()] == list(range(max(0, n - l1), n))
    assert [(i.importance, i.seq) for i in mem.get_l2()] == _reference_l2(importances, l2)
    evicted = max(0, n - l1)
    assert [i.seq for i in mem.get_l3()] == list(range(max(0, evicted - l3), evicted))
    assert mem.stats()["l4"] == evicted


def _reference_refresh_l2(importances, size, threshold=0.6):
    """The refresh rule without subjects: above the threshold; a full L2 takes an item at
    least as important as its minimum and evicts the oldest of the least important."""
    l2: list[tuple[float, int]] = []
    for seq, imp in enumerate(importances):
        if imp <= threshold:
            continue
        if len(l2) >= size:
            lowest = min(l2)  # least important, then oldest
            if imp < lowest[0]:
                continue
            l2.remove(lowest)
        l2.append((imp, seq))
    return sorted(l2, key=lambda e: (-e[0], -e[1]))


@settings(max_examples=150, deadline=None)
@given(importances=st.lists(_importance, max_size=60), sizes=_sizes)
def test_l2_refresh_rule_without_subjects(importances, sizes):
    l1, l2, l3 = sizes
    mem = TieredMemory(l1, l2, l3)
    for i, imp in enumerate(importances):
        mem.add(f"item {i}", importance=imp)
    assert [(i.importance, i.seq) for i in mem.get_l2()] == _reference_refresh_l2(importances, l2)
    # a full L2 is never frozen: a new item as important as the current maximum gets in
    if len(mem.get_l2()) == l2:
        top = mem.get_l2()[0].importance
        newest = mem.add("one more item", importance=max(top, 0.61))
        assert newest.id in {i.id for i in mem.get_l2()}


_subjects = st.sampled_from(
    ["deploy region", "database port", "on-call owner", "feature flag", "cache TTL"]
)
_values = st.from_regex(r"[a-z]{2}-[0-9]{3,5}", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(
    facts=st.lists(
        st.tuples(_subjects, _values), min_size=1, max_size=25, unique_by=lambda f: f[1]
    ),
    noise=st.integers(0, 40),
    correction_style=st.sampled_from(
        [
            "{s} is now {v}",
            "Correction: the {s} is {v}",
            "Actually, the {s} is {v}",
            "the {s} changed to {v}",
        ]
    ),
)
def test_corrections_win_in_l2_and_search(facts, noise, correction_style):
    """After "X is A" ... "X is now B", L2 and search hold B, and never only A."""
    mem = TieredMemory(3, 50, 10)
    current: dict[str, str] = {}
    stated: dict[str, list[str]] = {}
    for n, (subject, value) in enumerate(facts):
        if subject in current:
            text = correction_style.format(s=subject, v=value)
        else:
            text = f"The {subject} is {value}."
        mem.add(text, kind="user" if n % 2 else "agent")
        current[subject] = value
        stated.setdefault(subject, []).append(value)
        for i in range(noise // max(len(facts), 1)):
            mem.add(f"unrelated chatter {n}-{i} about lunch", kind="agent")
    l2 = " ".join(i.content for i in mem.get_l2())
    for subject, value in current.items():
        assert _holds(l2, value), (subject, value)
        for old in stated[subject][:-1]:
            if old != value:
                assert not _holds(l2, old), (subject, old)
        for limit in (1, 3, 8):
            found = " ".join(h.content for h in mem.search(f"what is the {subject}?", limit))
            assert _holds(found, value), (subject, value, limit)


def _holds(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text) is not None


_contents = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=120
).filter(lambda s: s.strip())


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.tuples(_contents, _importance), min_size=1, max_size=40),
    cap=st.integers(0, 300),
    spec=st.sampled_from(
        [
            {"strategy": "balanced"},
            {"strategy": "comprehensive"},
            {"tier": "l1"},
            {"tier": "l2"},
            {"tier": "l3"},
            {"tier": "l4", "limit": 10},
        ]
    ),
    query=st.none() | _contents,
)
def test_collected_text_never_exceeds_the_cap(items, cap, spec, query):
    mem = TieredMemory(5, 5, 10)
    for content, imp in items:
        mem.add(content, importance=imp)
    text = collect_memory(
        make_request({"type": "memory", **spec}, services={"memory": mem}, cap=cap, query=query)
    )
    assert text is None or (text and count_cl100k(text) <= cap)


_words = st.sampled_from(["alpha", "beta", "gamma", "delta", "port", "region", "owner"])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(30, 150),
    cap=st.integers(200, 1500),  # items are ~20 tokens: 80 % of a tiny cap may not fit
    strategy=st.sampled_from(["balanced", "comprehensive"]),
    word=_words,
)
def test_strategies_never_exceed_the_cap_and_fill_it_when_enough_is_relevant(
    n, cap, strategy, word
):
    mem = TieredMemory(10, 20, 50)
    for i in range(n):
        mem.add(f"note {i}: the {word} value was {i * 37 % 1000} on host h{i % 7}", kind="agent")
    text = collect_memory(
        make_request(
            {"type": "memory", "strategy": strategy},
            services={"memory": mem},
            cap=cap,
            query=f"what is the {word} value?",
        )
    )
    assert text is not None
    used = count_cl100k(text)
    assert used <= cap
    available = count_cl100k("\n".join(f"- [agent] {i.content}" for i in mem.search(word, n)))
    if available >= cap:  # enough relevant items: the layer is (nearly) full
        assert used >= 0.8 * cap


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.integers(0, 15), max_size=40),
    restore_at=st.integers(0, 40),
)
def test_add_message_is_idempotent_also_after_from_data(ids, restore_at):
    from langchain_core.messages import HumanMessage

    mem = TieredMemory(3, 4, 5)
    for step, i in enumerate(ids):
        if step == restore_at:
            mem = TieredMemory.from_data(mem.to_data())
        mem.add_message(HumanMessage(f"message {i} says {i * 11}", id=f"m{i}"))
        mem.record([HumanMessage(f"message {j} says {j * 11}", id=f"m{j}") for j in ids[:step]])
    assert mem.total_added == len(set(ids))
    assert sorted(h.id for h in mem.search("message says", 100)) == sorted(
        f"m{i}" for i in set(ids)
    )
