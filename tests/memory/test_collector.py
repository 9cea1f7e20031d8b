"""The ``memory`` collector: strategies/tiers through a CollectRequest, packed into the cap."""

from __future__ import annotations

import pytest

from ctxpolicy.collectors.base import get_collector
from ctxpolicy.collectors.memory import collect_memory
from ctxpolicy.memory import MemorySessions, TieredMemory

from .conftest import count_cl100k, make_request

_TEXTS = [
    "User asked to book a flight from Paris to Tokyo next Tuesday.",
    "search_flights returned 14 options; cheapest is 612 EUR with one stop in Helsinki.",
    "Payment API failed: card declined (code 51). Need another card.",
    "Sub-task: compare hotel prices near Shinjuku station for three nights.",
    "The user prefers aisle seats and vegetarian meals on long flights.",
]


def _fill(mem: TieredMemory, n: int) -> TieredMemory:
    kinds = ["user", "tool_success", "tool_failure", "subtask", "agent"]
    for i in range(n):
        mem.add(f"#{i} {_TEXTS[i % 5]} " + "detail " * (i % 13), kind=kinds[i % 5])
    return mem


def test_registered_under_memory():
    assert get_collector("memory") is collect_memory


@pytest.mark.parametrize("n", [100, 1_000, 10_000])
@pytest.mark.parametrize(
    "collector",
    [
        {"type": "memory", "strategy": "balanced"},
        {"type": "memory", "strategy": "comprehensive"},
        {"type": "memory", "tier": "l1", "limit": 50},
        {"type": "memory", "tier": "l2"},
        {"type": "memory", "tier": "l3", "limit": 500},
        {"type": "memory", "tier": "l4", "limit": 40},
    ],
)
def test_never_exceeds_cap_however_long_the_history(n, collector, memory_by_size):
    mem = memory_by_size(n)
    for cap in (0, 7, 60, 400, 3_000):
        text = collect_memory(
            make_request(collector, services={"memory": mem}, cap=cap, query="flight to Tokyo")
        )
        if cap == 0:
            assert text is None
        if text is not None:
            assert count_cl100k(text) <= cap
    big = collect_memory(
        make_request(collector, services={"memory": mem}, cap=3_000, query="card declined")
    )
    assert big  # something is selected at every size


@pytest.fixture(scope="module")
def memory_by_size():
    cache: dict[int, TieredMemory] = {}

    def get(n: int) -> TieredMemory:
        if n not in cache:
            cache[n] = _fill(TieredMemory(), n)
        return cache[n]

    return get


def test_packs_whole_items_only(memory_by_size):
    mem = memory_by_size(100)
    text = collect_memory(
        make_request(
            {"type": "memory", "tier": "l1", "limit": 50}, services={"memory": mem}, cap=120
        )
    )
    lines = text.split("\n")
    rendered = {f"- [{i.kind}] {i.content.strip()}" for i in mem.get_l1()}
    assert lines and all(line in rendered for line in lines)


def test_recent_items_win_when_cap_is_tight_and_read_chronologically():
    mem = TieredMemory(10, 1, 10)
    for i in range(10):
        mem.add(f"event {i}", importance=0.1)
    text = collect_memory(
        make_request({"type": "memory", "tier": "l1"}, services={"memory": mem}, cap=14)
    )
    assert text == "- event 7\n- event 8\n- event 9"


def test_cost_does_not_grow_with_history(memory_by_size):
    """Counting work per call is bounded by tier sizes and the search pool, not by the
    number of items."""
    from ctxpolicy.memory.strategies import MAX_SEARCH_POOL

    calls: list[int] = []

    def counting(text: str) -> int:
        calls.append(1)
        return count_cl100k(text)

    per_size = []
    for n in (1_000, 10_000):
        mem = memory_by_size(n)
        calls.clear()
        collect_memory(
            make_request(
                {"type": "memory", "strategy": "balanced"},
                services={"memory": mem},
                cap=100_000,
                count=counting,
                query="hotel",
            )
        )
        per_size.append(len(calls))
        assert len(calls) <= MAX_SEARCH_POOL + mem.l1_size + mem.l2_size + 2
    for cap in (2_000,):  # a usual cap reads about the same amount at every size
        counts = []
        for n in (1_000, 10_000):
            calls.clear()
            collect_memory(
                make_request(
                    {"type": "memory", "strategy": "balanced"},
                    services={"memory": memory_by_size(n)},
                    cap=cap,
                    count=counting,
                    query="hotel",
                )
            )
            counts.append(len(calls))
        assert abs(counts[0] - counts[1]) <= 0.1 * counts[0]


def test_shares_key_of_the_policy_is_used(memory_by_size):
    mem = memory_by_size(100)
    text = collect_memory(
        make_request({"type": "memory", "shares": {"l1": 1.0}}, services={"memory": mem}, cap=2_000)
    )
    assert text.count("\n") + 1 == mem.l1_size
    only_search = collect_memory(
        make_request(
            {"type": "memory", "shares": {"search": 0.3}},
            services={"memory": mem},
            cap=2_000,
            query="card declined",
        )
    )
    lines = only_search.split("\n")
    assert lines and all("declined" in line or "card" in line for line in lines)


def test_strategy_fills_the_cap_with_relevant_items_first(memory_by_size):
    mem = memory_by_size(1_000)
    for cap in (300, 1_500, 3_000):
        text = collect_memory(
            make_request(
                {"type": "memory", "strategy": "balanced"},
                services={"memory": mem},
                cap=cap,
                query="card declined",
            )
        )
        assert 0.8 * cap <= count_cl100k(text) <= cap
        assert "declined" in text.split("\n")[0]  # search hits are the first group


def test_minimal_strategy_gives_no_layer(memory_by_size):
    req = make_request(
        {"type": "memory", "strategy": "minimal"}, services={"memory": memory_by_size(100)}
    )
    assert collect_memory(req) is None


def test_memory_data_in_state_is_accepted():
    mem = _fill(TieredMemory(), 20)
    req = make_request(
        {"type": "memory", "tier": "l1", "limit": 3}, state={"memory": mem.to_data()}
    )
    assert collect_memory(req).count("\n") == 2


def test_service_name_from_spec():
    mem = _fill(TieredMemory(), 5)
    req = make_request(
        {"type": "memory", "service": "agent_mem", "tier": "l1"}, services={"agent_mem": mem}
    )
    assert "#4" in collect_memory(req)


def test_missing_or_wrong_service_is_a_clear_error():
    with pytest.raises(LookupError, match="'memory'"):
        collect_memory(make_request({"type": "memory"}))
    with pytest.raises(TypeError, match="TieredMemory"):
        collect_memory(make_request({"type": "memory"}, services={"memory": 42}))


def test_sessions_service_aggregates_the_sessions_named_in_state():
    sessions = MemorySessions(store=False)
    sessions.session("a").add("alpha fact", kind="user")
    sessions.session("b").add("beta fact", kind="user")
    sessions.session("c").add("gamma fact", kind="user")
    req = make_request(
        {"type": "memory", "strategy": "balanced"},
        services={"memory": sessions},
        state={"session_ids": ["a", "c"]},
    )
    text = collect_memory(req)
    assert "alpha" in text and "gamma" in text and "beta" not in text
    req = make_request(
        {"type": "memory", "tier": "l1"}, services={"memory": sessions}, state={"session_id": "b"}
    )
    assert collect_memory(req) == "- [user] beta fact"
    req = make_request({"type": "memory", "tier": "l1"}, services={"memory": sessions}, cap=1_000)
    assert collect_memory(req).count("\n") == 2
