"""`MemorySessions` edge cases: exact values, messages, boundaries and argument pass-through.

Written against the surviving mutants of ``ctxpolicy/memory/sessions.py`` (docs/mutation.md):
module helpers, construction, sessions, distribution, lifecycle, recording, the agent's
L3 and the global L4, and plain data. Aggregation is in test_sessions_mutants_b.py.
Token counts are characters (``len``) so budgets are exact.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, TypedDict

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

import ctxpolicy.memory.sessions as sessions_module
from ctxpolicy.memory import MemorySessions, TieredMemory
from ctxpolicy.memory.sessions import (
    ContextPiece,
    current_thread_id,
    default_store,
    render_context,
)
from ctxpolicy.memory.tiered import DEFAULT_NAMESPACE

pytestmark = pytest.mark.langgraph

NS = ("ctxpolicy", "test")
GLOBAL = ("ctxpolicy", "test-global")


def _summarize(text: str) -> str:
    return "S:" + text[:8]


class _State(TypedDict, total=False):
    out: Any


def _run_in_graph(fn: Any, config: dict[str, Any]) -> Any:
    """``fn()`` called inside a LangGraph node run with ``config``; its result."""
    graph = StateGraph(_State)
    graph.add_node("node", lambda state: {"out": fn()})
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    app: Any = graph.compile()
    return app.invoke({}, config)["out"]


class _Clock:
    """A fake ``time`` module for the persist timer (no real waiting)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


# ---------------------------------------------------------------- module helpers


def test_current_thread_id_outside_and_inside_a_graph() -> None:
    assert current_thread_id() is None
    assert _run_in_graph(current_thread_id, {"configurable": {"thread_id": 7}}) == "7"
    assert _run_in_graph(current_thread_id, {"configurable": {"thread_id": "t-1"}}) == "t-1"
    assert _run_in_graph(current_thread_id, {}) is None


def test_render_context_joins_labelled_pieces_with_a_blank_line() -> None:
    pieces = [ContextPiece("a", "x__context", "one", 0.8), ContextPiece("b", "memory:l1", "two", 1)]
    assert pieces[0].render() == "[a · x__context]\none"
    assert render_context(pieces) == "[a · x__context]\none\n\n[b · memory:l1]\ntwo"
    assert render_context([]) == ""


def test_default_store_without_langgraph_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.memory", None)
    message = (
        r"^MemorySessions persists L3/L4 through langgraph's BaseStore; install "
        r"'ctxpolicy\[langgraph\]' or pass store=False$"
    )
    with pytest.raises(ImportError, match=message):
        default_store()
    with pytest.raises(ImportError, match=message):
        MemorySessions()
    assert MemorySessions(store=False).store is None


def test_session_id_messages() -> None:
    sessions = MemorySessions(store=False)
    for bad in ("", "a.b", 3, None):
        with pytest.raises(ValueError) as info:
            sessions.session(bad)  # type: ignore[arg-type]
        assert str(info.value) == (
            f"session_id must be a non-empty string without '.', got {bad!r}"
        )
    for reserved in ("_agent", "_lifecycle"):
        with pytest.raises(ValueError) as info:
            sessions.session(reserved)
        assert str(info.value) == f"session_id {reserved!r} is reserved"
    assert sessions.session_ids == ()
    assert sessions.session("x_agent").namespace == (*DEFAULT_NAMESPACE, "x_agent")


def test_persist_interval_is_checked() -> None:
    for bad in (True, False, "5", 0, 0.0, -1, -0.5):
        with pytest.raises(ValueError) as info:
            MemorySessions(store=False, persist_interval=bad)  # type: ignore[arg-type]
        assert str(info.value) == f"persist_interval must be a number > 0, got {bad!r}"
    for good in (None, 0.5, 1, 3600):
        MemorySessions(store=False, persist_interval=good)


# ---------------------------------------------------------------- construction


def test_defaults_and_properties() -> None:
    sessions = MemorySessions(store=False)
    memory = sessions.session("a")
    assert (memory.l1_size, memory.l2_size, memory.l3_size) == (50, 100, 500)
    assert memory.namespace == (*DEFAULT_NAMESPACE, "a")
    assert memory.vector_store is None
    assert sessions.namespace == DEFAULT_NAMESPACE
    assert sessions.agent is None
    assert sessions.global_memory() is None


def test_agent_namespace_and_validation_at_construction() -> None:
    sessions = MemorySessions(store=False, agent="bot", namespace=NS)
    assert sessions.agent == "bot"
    assert sessions.namespace == (*NS, "bot")
    assert sessions.session("s").namespace == (*NS, "bot", "s")
    with pytest.raises(ValueError, match=r"^session_id must be a non-empty string"):
        MemorySessions(store=False, agent="a.b")
    for name in ("l1_size", "l2_size", "l3_size"):
        with pytest.raises(ValueError) as info:
            sizes: dict[str, Any] = {name: 0}
            MemorySessions(store=False, **sizes)
        assert str(info.value) == f"{name} must be an integer >= 1, got 0"
    with pytest.raises(ValueError, match=r"^summarizer must be a BaseChatModel"):
        MemorySessions(store=False, summarizer=3)
    with pytest.raises(ValueError, match=r"^namespace must be a non-empty tuple") as info:
        MemorySessions(store=False, namespace=("a.b",))
    assert "('a.b',)" in str(info.value)
    with pytest.raises(ValueError, match=r"^namespace must be a non-empty tuple") as info:
        MemorySessions(store=False, global_namespace=("g", ""))
    assert "('g', '')" in str(info.value)


def test_store_choice() -> None:
    store = InMemoryStore()
    assert MemorySessions(store=store).store is store
    assert isinstance(MemorySessions(store=None).store, InMemoryStore)
    assert MemorySessions(store=False).store is None


@pytest.mark.parametrize("persisted", [False, True])
def test_new_sessions_get_the_sizes_summarizer_vectors_and_namespace(persisted: bool) -> None:
    store: InMemoryStore | Literal[False] = InMemoryStore() if persisted else False
    made: list[str] = []
    marker = object()

    def factory(session_id: str) -> Any:
        made.append(session_id)
        return marker

    sessions = MemorySessions(
        l1_size=1,
        l2_size=2,
        l3_size=3,
        summarizer=_summarize,
        store=store,
        namespace=NS,
        vector_store_factory=factory,
    )
    memory = sessions.session("s1")
    assert sessions.session("s1") is memory
    assert made == ["s1"]
    assert (memory.l1_size, memory.l2_size, memory.l3_size) == (1, 2, 3)
    assert memory.namespace == (*NS, "s1")
    assert memory.vector_store is marker
    plain = MemorySessions(store=store, namespace=NS, l1_size=1, summarizer=_summarize)
    target = plain.session("s2")
    target.add("first observation text", importance=0.1)
    target.add("second observation", importance=0.1)
    assert [i.content for i in target.get_l3()] == ["S:first ob"]
    if persisted:
        stored = store.get((*NS, "s2", "summaries"), target.get_l3()[0].id)  # type: ignore[union-attr]
        assert stored is not None and stored.value["content"] == "S:first ob"
        assert stored.value["full_content"] == "first observation text"


def test_contains_and_close() -> None:
    sessions = MemorySessions(store=False)
    sessions.session("a")
    assert "a" in sessions and "b" not in sessions
    with pytest.raises(KeyError) as info:
        sessions.close("zz")
    assert info.value.args == ("no open session 'zz'",)
    sessions.close("a")
    assert "a" not in sessions and sessions.session_ids == ()


# ---------------------------------------------------------------- distribute


def test_distribute_passes_every_field_into_l2() -> None:
    sessions = MemorySessions(store=False)
    sessions.session("b")
    got = sessions.distribute(
        "rollout paused",
        session_ids=["a", "b", "a"],
        importance=0.33,
        tags=["ops"],
        metadata={"ticket": 7},
        kind="user",
    )
    assert list(got) == ["a", "b"]
    item = got["a"]
    assert got["b"].id == item.id
    assert (item.content, item.importance, item.tags, dict(item.metadata), item.kind) == (
        "rollout paused",
        0.33,
        ("ops",),
        {"ticket": 7},
        "user",
    )
    for sid in ("a", "b"):
        memory = sessions.session(sid)
        assert [i.id for i in memory.get_l2()] == [item.id]
        assert memory.get_l1() == []
    assert sessions.distribute("nobody", session_ids=[]) == {}


def test_distribute_skips_inactive_and_filtered_sessions_but_goes_on() -> None:
    sessions = MemorySessions(store=False)
    for sid in ("p", "x", "ok", "q"):
        sessions.session(sid)
    sessions.pause("p")
    seen: list[tuple[str, bool]] = []

    def where(session_id: str, memory: TieredMemory) -> bool:
        seen.append((session_id, memory is sessions.session(session_id)))
        return session_id != "x"

    got = sessions.distribute("note", where=where)
    assert list(got) == ["ok", "q"]
    assert seen == [("x", True), ("ok", True), ("q", True)]
    assert sessions.session("p").get_l2() == []
    assert [i.content for i in sessions.session("q").get_l2()] == ["note"]


def test_distribute_argument_errors() -> None:
    sessions = MemorySessions(store=False)
    with pytest.raises(ValueError) as info:
        sessions.distribute("x", where=3)  # type: ignore[arg-type]
    assert str(info.value) == "where must be a callable (session_id, memory) -> bool, got 3"
    with pytest.raises(ValueError, match=r"^session_id must be"):
        sessions.distribute("x", session_ids=["ok", "a.b"])
    assert "ok" not in sessions


# ---------------------------------------------------------------- lifecycle


def test_status_pause_resume_and_the_lifecycle_store() -> None:
    store = InMemoryStore()
    sessions = MemorySessions(store=store, agent="bot", namespace=NS)
    assert sessions.status("never") == "active"
    with pytest.raises(ValueError, match=r"^session_id must be"):
        sessions.status("a.b")
    sessions.pause("a")
    assert sessions.status("a") == "paused"
    assert sessions.status("b") == "active"
    lifecycle = (*NS, "bot", "_lifecycle")
    assert store.get(lifecycle, "a").value == {"status": "paused"}  # type: ignore[union-attr]
    sessions.resume("a")
    assert sessions.status("a") == "active"
    assert store.get(lifecycle, "a").value == {"status": "active"}  # type: ignore[union-attr]
    sessions.pause("a")
    assert MemorySessions(store=store, agent="bot", namespace=NS).status("a") == "paused"
    assert MemorySessions(store=store, agent="other", namespace=NS).status("a") == "active"


def test_statuses_restore_from_the_store_and_unknown_ones_are_ignored() -> None:
    store = InMemoryStore()
    first = MemorySessions(store=store, agent="bot")
    for n in range(12):  # more than one default page of a store search
        first.pause(f"s{n}")
    first.end("s0")
    store.put((*first.namespace, "_lifecycle"), "odd", {"status": "sleeping"})
    store.put((*first.namespace, "_lifecycle"), "bare", {"state": "paused"})
    second = MemorySessions(store=store, agent="bot")
    assert [second.status(f"s{n}") for n in range(12)] == ["ended"] + ["paused"] * 11
    assert second.status("odd") == "active"
    assert second.status("bare") == "active"


def test_lifecycle_without_a_store() -> None:
    sessions = MemorySessions(store=False)
    sessions.pause("a")
    assert sessions.status("a") == "paused"
    sessions.resume("a")
    assert sessions.status("a") == "active"
    assert sessions.end("a") == []
    assert sessions.status("a") == "ended"


def test_ended_sessions_refuse_pause_resume_and_record() -> None:
    sessions = MemorySessions(store=False)
    sessions.end("a")
    for action in (sessions.pause, sessions.resume):
        with pytest.raises(ValueError) as info:
            action("a")
        assert str(info.value) == "session 'a' has ended"
    assert sessions.status("a") == "ended"
    with pytest.raises(ValueError) as info:
        sessions.record([HumanMessage("hi", id="m1")], session_id="a")
    assert str(info.value) == "session 'a' is ended; resume it before recording"
    assert sessions.distribute("late", session_ids=["a"]) == {}


def test_end_summarizes_the_session_then_persists_once() -> None:
    store = InMemoryStore()
    sessions = MemorySessions(store=store, agent="bot", global_namespace=GLOBAL)
    sessions.distribute("deploy window is Friday", session_ids=["a"], importance=0.9)
    written = sessions.end("a")
    assert [(i.content, i.metadata["session_id"]) for i in written] == [
        ("deploy window is Friday", "a")
    ]
    assert sessions.status("a") == "ended"
    assert [i.content for i in sessions.agent_l3()] == ["deploy window is Friday"]
    assert sessions.end("a") == []
    entry = store.get((*GLOBAL, "summaries"), written[0].id)
    assert entry is not None and entry.value["content"] == "deploy window is Friday"
    assert sessions.end("never-open") == []
    assert sessions.status("never-open") == "ended"


def test_end_summarizes_only_the_ending_session_and_an_ended_one_is_left_alone() -> None:
    sessions = MemorySessions(store=InMemoryStore(), agent="bot")
    sessions.distribute("a rule", session_ids=["a"], importance=0.9)
    sessions.distribute("b rule", session_ids=["b"], importance=0.8)
    assert [i.content for i in sessions.end("a")] == ["a rule"]
    assert [i.content for i in sessions.agent_l3()] == ["a rule"]
    sessions.session("a").add("a late rule", importance=0.7, tier="l2")
    sessions.aggregate_agent(["b"])
    assert sessions.end("a") == []  # already ended: nothing summarized, nothing persisted
    assert [i.content for i in sessions.agent_l3()] == ["a rule", "b rule"]
    assert [i.content for i in sessions.persist()] == ["b rule"]


# ---------------------------------------------------------------- record


def test_record_needs_a_session_id_or_an_agent() -> None:
    plain = MemorySessions(store=False)
    assert plain.record([HumanMessage("hello there", id="m1")]) == []
    assert plain.session_ids == ()
    added = plain.record([HumanMessage("hello there", id="m1")], session_id="s")
    assert [(i.id, i.content) for i in added] == [("m1", "hello there")]
    assert plain.record([HumanMessage("hello there", id="m1")], session_id="s") == []
    agent = MemorySessions(store=False, agent="bot")
    with pytest.raises(ValueError) as info:
        agent.record([HumanMessage("hi", id="m2")])
    assert str(info.value) == "record: pass session_id (no LangGraph thread is running)"
    assert agent.session_ids == ()


def test_record_defaults_to_the_running_thread() -> None:
    sessions = MemorySessions(store=False, agent="bot")

    def record() -> list[str]:
        return [i.content for i in sessions.record([HumanMessage("in graph", id="g1")])]

    assert _run_in_graph(record, {"configurable": {"thread_id": "t9"}}) == ["in graph"]
    assert sessions.session_ids == ("t9",)
    assert [i.content for i in sessions.session("t9").get_l1()] == ["in graph"]
    explicit = _run_in_graph(
        lambda: [
            i.content
            for i in sessions.record([HumanMessage("explicit", id="g2")], session_id="other")
        ],
        {"configurable": {"thread_id": "t9"}},
    )
    assert explicit == ["explicit"]
    assert list(sessions.session_ids) == ["t9", "other"]


def test_record_refuses_a_paused_session() -> None:
    sessions = MemorySessions(store=False)
    sessions.pause("a")
    with pytest.raises(ValueError) as info:
        sessions.record([HumanMessage("hi", id="m1")], session_id="a")
    assert str(info.value) == "session 'a' is paused; resume it before recording"
    sessions.resume("a")
    assert [i.content for i in sessions.record([HumanMessage("hi", id="m1")], session_id="a")] == [
        "hi"
    ]


def test_record_runs_a_due_timed_persist(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock(1000.0)
    monkeypatch.setattr(sessions_module, "time", clock)
    store = InMemoryStore()
    sessions = MemorySessions(store=store, agent="bot", persist_interval=10)
    sessions.distribute("shared rule", session_ids=["a"], importance=0.9)
    sessions.record([HumanMessage("first", id="m1")], session_id="a")
    assert sessions.agent_l3() == []
    clock.now = 1010.0
    sessions.record([HumanMessage("second", id="m2")], session_id="a")
    assert [i.content for i in sessions.agent_l3()] == ["second", "first", "shared rule"]
    stored = store.search(("ctxpolicy", "global", "summaries"), limit=10)
    assert sorted(e.value["content"] for e in stored) == ["first", "second", "shared rule"]


# ---------------------------------------------------------------- agent L3 and global L4


def test_aggregate_agent_summarizes_l2_per_item_with_its_session() -> None:
    store = InMemoryStore()
    sessions = MemorySessions(store=store, agent="bot", summarizer=_summarize, namespace=NS)
    sessions.distribute("alpha rule for all", session_ids=["a"], importance=0.9, metadata={"k": 1})
    sessions.distribute("beta rule for b", session_ids=["b"], importance=0.7)
    only_a = sessions.aggregate_agent(["missing", "a"])
    assert [(i.content, dict(i.metadata)) for i in only_a] == [
        ("S:alpha ru", {"k": 1, "session_id": "a", "agent": "bot"})
    ]
    entry = store.get((*NS, "bot", "_agent", "summaries"), only_a[0].id)
    assert entry is not None
    assert entry.value == {**only_a[0].to_data(), "full_content": "alpha rule for all"}
    both = sessions.aggregate_agent()
    assert [(i.content, i.metadata["session_id"]) for i in both] == [("S:beta rul", "b")]
    assert sessions.aggregate_agent() == []
    assert [i.content for i in sessions.agent_l3()] == ["S:alpha ru", "S:beta rul"]
    restored = MemorySessions(store=store, agent="bot", namespace=NS)
    assert [i.to_data() for i in restored.agent_l3()] == [i.to_data() for i in sessions.agent_l3()]
    assert MemorySessions(store=store, agent="other", namespace=NS).agent_l3() == []


def test_aggregate_agent_goes_on_after_an_unchanged_item_and_refreshes_a_changed_one() -> None:
    sessions = MemorySessions(store=False)
    memory = sessions.session("a")
    memory.add("kept rule", importance=0.9, item_id="k", tier="l2")
    memory.add("changing rule v1", importance=0.7, item_id="c", tier="l2")
    assert [i.id for i in sessions.aggregate_agent()] == ["k", "c"]
    memory.add("changing rule v2", importance=0.7, item_id="c", tier="l2")
    memory.add("new rule", importance=0.65, item_id="n", tier="l2")
    assert [(i.id, i.content) for i in sessions.aggregate_agent(["a"])] == [
        ("c", "changing rule v2"),
        ("n", "new rule"),
    ]
    assert [i.content for i in sessions.agent_l3()] == ["kept rule", "changing rule v2", "new rule"]


def test_agent_l3_is_most_important_first_then_newest() -> None:
    sessions = MemorySessions(store=False)
    memory = sessions.session("a")
    for n, importance in enumerate((0.65, 0.9, 0.65, 0.7)):
        memory.add(f"rule {n}", importance=importance, item_id=f"r{n}", tier="l2")
    sessions.aggregate_agent()
    assert [i.content for i in sessions.agent_l3()] == ["rule 1", "rule 3", "rule 2", "rule 0"]


def test_persist_writes_new_and_changed_summaries_once() -> None:
    store = InMemoryStore()
    sessions = MemorySessions(store=store, summarizer=_summarize, global_namespace=GLOBAL)
    memory = sessions.session("a")
    memory.add("first global fact", importance=0.9, item_id="f", tier="l2")
    sessions.aggregate_agent()
    first = sessions.persist()
    assert [i.id for i in first] == ["f"]
    entry = store.get((*GLOBAL, "summaries"), "f")
    assert entry is not None
    assert entry.value == {**first[0].to_data(), "full_content": "S:first gl"}
    assert sessions.persist() == []
    memory.add("second global fact", importance=0.8, item_id="s", tier="l2")
    memory.add("fixed global fact", importance=0.9, item_id="f", tier="l2")
    sessions.aggregate_agent()
    assert sorted(i.id for i in sessions.persist()) == ["f", "s"]
    memory.add("third global fact", importance=0.7, item_id="t", tier="l2")
    sessions.aggregate_agent()
    assert [i.id for i in sessions.persist()] == ["t"]
    assert sessions.persist() == []
    assert len(store.search((*GLOBAL, "summaries"), limit=10)) == 3


def test_persist_without_a_store_writes_nothing() -> None:
    sessions = MemorySessions(store=False)
    sessions.distribute("x rule", session_ids=["a"], importance=0.9)
    assert [i.content for i in sessions.aggregate_agent()] == ["x rule"]
    assert sessions.persist() == []
    assert sessions.end("a") == []


def test_maybe_persist_runs_on_the_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock(1000.0)
    monkeypatch.setattr(sessions_module, "time", clock)
    untimed = MemorySessions(store=InMemoryStore())
    untimed.distribute("untimed rule", session_ids=["a"], importance=0.9)
    assert untimed.maybe_persist(now=10**9) == []
    assert untimed.maybe_persist() == []
    assert untimed.agent_l3() == []

    sessions = MemorySessions(store=InMemoryStore(), persist_interval=1.0)
    sessions.distribute("timed rule", session_ids=["a"], importance=0.9)
    clock.now = 1000.5
    assert sessions.maybe_persist() == []
    assert sessions.maybe_persist(now=1000.99) == []
    assert sessions.agent_l3() == []
    assert [i.content for i in sessions.maybe_persist(now=1001.0)] == ["timed rule"]
    assert sessions.maybe_persist(now=1001.5) == []  # the timer restarted at 1000.5
    sessions.distribute("later rule", session_ids=["a"], importance=0.8)
    clock.now = 1001.5
    assert [i.content for i in sessions.maybe_persist()] == ["later rule"]
    clock.now = 1002.0
    assert sessions.maybe_persist() == []
    assert sessions.persist() == []
    clock.now = 1003.0
    assert sessions.maybe_persist() == []


def test_global_memory_is_read_from_the_store_and_refreshed_after_a_persist() -> None:
    store = InMemoryStore()
    writer = MemorySessions(store=store, agent="w", global_namespace=GLOBAL)
    empty = writer.global_memory()
    assert isinstance(empty, TieredMemory)
    assert writer.global_memory() is empty
    assert empty.namespace == GLOBAL and empty.l1_size == 1
    assert empty.get_l3() == []
    writer.distribute("the vault code is walnut", session_ids=["a"], importance=0.9)
    writer.end("a")
    found = writer.global_memory()
    assert found is not None and found is not empty
    assert [h.content for h in found.search("vault code", 3)] == ["the vault code is walnut"]
    reader = MemorySessions(store=store, agent="r", global_namespace=GLOBAL)
    assert [i.content for i in reader.global_memory().get_l3()] == [  # type: ignore[union-attr]
        "the vault code is walnut"
    ]
    assert MemorySessions(store=store, agent="r").global_memory().get_l3() == []  # type: ignore[union-attr]


# ---------------------------------------------------------------- scoped


def _scoped_world() -> MemorySessions:
    """Agent "bot": session a (own L1, its L3 and an older "orbit" item), session b's L2
    summarized into the agent's L3; another agent persisted 12 "orbit" facts globally."""
    store = InMemoryStore()
    other = MemorySessions(store=store, agent="other")
    for n in range(12):
        other.session("o").add(f"orbit fact number {n}", importance=0.9, item_id=f"g{n}", tier="l2")
    other.end("o")
    sessions = MemorySessions(store=store, agent="bot", l1_size=2)
    memory = sessions.session("a")
    memory.add("orbit check in session a", importance=0.3, item_id="own")
    memory.add("filler one", importance=0.3, item_id="filler")
    memory.add("unrelated newest note", importance=0.3, item_id="newest")
    sessions.distribute("B shared fact", session_ids=["b"], importance=0.9)
    sessions.aggregate_agent(["b"])
    return sessions


def _tiers_and_ids(found: list[Any]) -> list[tuple[str, str]]:
    return [(c.tier, c.item.id if c.tier != "l3" else c.item.content) for c in found]


def test_scoped_sees_own_memory_the_agent_l3_and_ten_global_hits() -> None:
    sessions = _scoped_world()
    found = sessions.scoped(
        "a", strategy="comprehensive", query="orbit", max_tokens=5000, count_tokens=len
    )
    globals_ = [("l4", f"g{n}") for n in range(10)]
    assert _tiers_and_ids(found) == [
        ("l4", "own"),
        *globals_,
        ("l1", "filler"),
        ("l1", "newest"),
        ("l3", "B shared fact"),
    ]
    balanced = sessions.scoped("a", query="orbit", max_tokens=5000, count_tokens=len)
    assert _tiers_and_ids(balanced) == [
        ("l4", "own"),
        *globals_,
        ("l1", "filler"),
        ("l1", "newest"),
    ]
    no_query = sessions.scoped("a", max_tokens=5000, count_tokens=len)
    assert _tiers_and_ids(no_query) == [("l4", "newest"), ("l1", "filler")]


def test_scoped_shares_limit_and_budget() -> None:
    sessions = _scoped_world()
    recent = sessions.scoped(
        "a", shares={"l1": 1.0}, query="orbit", max_tokens=5000, count_tokens=len
    )
    assert _tiers_and_ids(recent) == [("l1", "filler"), ("l1", "newest")]
    limited = sessions.scoped("a", query="orbit", max_tokens=5000, count_tokens=len, limit=2)
    assert _tiers_and_ids(limited) == [("l4", "own"), ("l4", "g0")]
    line = len("- orbit check in session a")
    tight = sessions.scoped("a", query="orbit", max_tokens=line, count_tokens=len)
    assert _tiers_and_ids(tight) == [("l4", "own")]
    assert sessions.scoped("a", query="orbit", max_tokens=0, count_tokens=len) == []


def test_scoped_without_a_store_and_with_a_large_search_pool() -> None:
    sessions = MemorySessions(store=False, l1_size=5, l2_size=5, l3_size=5)
    memory = sessions.session("a")
    for n in range(110):
        memory.add(f"zebra sighting {n}", importance=0.1)
    found = sessions.scoped(
        "a", shares={"search": 1.0}, query="zebra", max_tokens=24 * 200, count_tokens=len
    )
    assert len(found) == 110  # more than the default pool of 96 search hits
    assert {c.tier for c in found} == {"l4"}
    with pytest.raises(ValueError, match=r"^session_id must be"):
        sessions.scoped("a.b", max_tokens=10, count_tokens=len)


class _SpyStore(InMemoryStore):
    """An ``InMemoryStore`` that records the namespaces searched."""

    def __init__(self) -> None:
        super().__init__()
        self.searched: list[tuple[str, ...]] = []

    def search(self, namespace_prefix: tuple[str, ...], /, **kwargs: Any) -> Any:
        self.searched.append(tuple(namespace_prefix))
        return super().search(namespace_prefix, **kwargs)


def test_scoped_reads_the_global_l4_only_for_a_query_with_a_search_share() -> None:
    store = _SpyStore()
    sessions = MemorySessions(store=store, agent="bot", global_namespace=GLOBAL)
    sessions.session("a").add("local note", importance=0.3)
    global_reads = [(*GLOBAL, "summaries")]
    sessions.scoped("a", max_tokens=100, count_tokens=len)
    sessions.scoped("a", shares={"l1": 1.0}, query="note", max_tokens=100, count_tokens=len)
    sessions.scoped(
        "a", shares={"l1": 1.0, "search": 0}, query="note", max_tokens=100, count_tokens=len
    )
    assert [n for n in store.searched if n[: len(GLOBAL)] == GLOBAL] == []
    sessions.scoped("a", query="note", max_tokens=100, count_tokens=len)
    assert [n for n in store.searched if n[: len(GLOBAL)] == GLOBAL] == global_reads


# ---------------------------------------------------------------- plain data


def test_to_data_from_data_round_trip() -> None:
    sessions = MemorySessions(store=False, l1_size=2, l2_size=3, l3_size=4, namespace=NS)
    sessions.session("a").add("alpha note", importance=0.3)
    sessions.session("b").add("beta note", importance=0.3)
    data = sessions.to_data()
    assert list(data) == ["format", "sessions"]
    assert data["format"] == "ctxpolicy.memory.sessions/1"
    assert list(data["sessions"]) == ["a", "b"]
    assert data["sessions"]["a"] == sessions.session("a").to_data()
    store = InMemoryStore()
    restored = MemorySessions.from_data(data, summarizer=_summarize, store=store, namespace=NS)
    assert restored.store is store and restored.namespace == NS
    assert restored.session_ids == ("a", "b")
    memory = restored.session("a")
    assert memory.namespace == (*NS, "a")
    assert [i.content for i in memory.get_l1()] == ["alpha note"]
    memory.add("alpha second", importance=0.3)
    memory.add("alpha third", importance=0.3)
    assert [i.content for i in memory.get_l3()] == ["S:alpha no"]
    assert store.get((*NS, "a", "summaries"), memory.get_l3()[0].id) is not None
    fresh = restored.session("c")
    assert (fresh.l1_size, fresh.l2_size, fresh.l3_size) == (2, 3, 4)
    fresh.add("gamma first", importance=0.3)
    fresh.add("gamma second", importance=0.3)
    fresh.add("gamma third", importance=0.3)
    assert [i.content for i in fresh.get_l3()] == ["S:gamma fi"]
    assert MemorySessions.from_data(data, store=False).store is None
    default = MemorySessions.from_data(data)
    assert isinstance(default.store, InMemoryStore)
    assert default.namespace == DEFAULT_NAMESPACE
    assert default.session("a").namespace == (*DEFAULT_NAMESPACE, "a")


def test_from_data_of_no_sessions_keeps_the_default_sizes() -> None:
    empty = MemorySessions(store=False).to_data()
    assert empty == {"format": "ctxpolicy.memory.sessions/1", "sessions": {}}
    restored = MemorySessions.from_data(empty, store=False)
    memory = restored.session("x")
    assert (memory.l1_size, memory.l2_size, memory.l3_size) == (50, 100, 500)


def test_from_data_rejects_other_data() -> None:
    message = "data must be MemorySessions.to_data() output ('ctxpolicy.memory.sessions/1')"
    good = MemorySessions(store=False).to_data()
    bads: list[Any] = [
        [],
        "x",
        {},
        {"sessions": {}},
        {"format": "other", "sessions": {}},
        {"format": good["format"], "sessions": []},
        {"format": good["format"]},
    ]
    for bad in bads:
        with pytest.raises(ValueError) as info:
            MemorySessions.from_data(bad, store=False)
        assert str(info.value) == message
    memory = MemorySessions(store=False).session("ok").to_data()
    with pytest.raises(ValueError, match=r"^session_id must be"):
        MemorySessions.from_data(
            {"format": good["format"], "sessions": {"a.b": memory}}, store=False
        )


def test_every_status_is_restored_however_many_pages_the_store_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lifecycle statuses are read in pages, like the summaries: a session past the
    first page keeps its status (it used to come back ``active`` past 10,000 sessions)."""
    import ctxpolicy.memory.tiered as tiered_module

    class CappedStore(InMemoryStore):
        """A store that returns at most 3 entries per search, whatever ``limit`` asks."""

        def search(self, namespace_prefix: tuple[str, ...], /, **kwargs: Any) -> Any:
            kwargs["limit"] = min(kwargs.get("limit", 10), 3)
            return super().search(namespace_prefix, **kwargs)

    monkeypatch.setattr(tiered_module, "_STORE_PAGE", 2)
    store = CappedStore()
    first = MemorySessions(store=store, agent="bot", namespace=NS)
    for n in range(7):
        first.pause(f"s{n}")
    first.end("s6")
    second = MemorySessions(store=store, agent="bot", namespace=NS)
    assert [second.status(f"s{n}") for n in range(7)] == ["paused"] * 6 + ["ended"]
    with pytest.raises(ValueError, match="ended"):
        second.pause("s6")
