"""acompose runs collectors concurrently; one engine serves many threads."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain_core.messages import HumanMessage

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.engine import PolicyEngine
from tests.engine.conftest import design_data, make_policy


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    name = "ctxpolicy_test_concurrency"
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    yield mod
    del sys.modules[name]


def test_acompose_runs_collectors_concurrently(module: types.ModuleType) -> None:
    """Each collector waits for an event only the other one sets: run one after the
    other they would deadlock (the timeout turns that into a failure)."""
    events: dict[str, asyncio.Event] = {}

    async def first(request: CollectRequest) -> str:
        events["a"].set()
        await events["b"].wait()
        return "first"

    async def second(request: CollectRequest) -> str:
        events["b"].set()
        await events["a"].wait()
        return "second"

    module.first = first  # type: ignore[attr-defined]
    module.second = second  # type: ignore[attr-defined]
    data = design_data()
    data["layers"]["experience__context"] = {
        "collector": {"type": "callable", "target": f"{module.__name__}:first", "timeout_s": 5}
    }
    data["layers"]["knowledge__context"] = {
        "collector": {"type": "callable", "target": f"{module.__name__}:second", "timeout_s": 5}
    }
    engine = PolicyEngine(make_policy(data))

    async def main() -> list[str]:
        events["a"], events["b"] = asyncio.Event(), asyncio.Event()
        result = await engine.acompose(system_prompt="s", state={"messages": [HumanMessage("q")]})
        return [str(m.content) for m in result.messages]

    contents = asyncio.run(main())
    assert contents[2:4] == ["first", "second"]  # policy order, whatever finished first


def test_one_engine_serves_many_threads() -> None:
    engine = PolicyEngine(make_policy())

    def call(i: int) -> list[str]:
        state = {
            "messages": [HumanMessage(f"question {i}")],
            "todo": [{"title": f"t{i}", "done": False}],
        }
        result = engine.compose(system_prompt=f"agent {i}", state=state)
        return [str(m.content) for m in result.messages]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(64)))
    for i, contents in enumerate(results):
        assert contents[0] == f"agent {i}"
        assert contents[-1] == f"question {i}"
        assert f"t{i}" in contents[2]
