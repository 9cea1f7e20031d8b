"""Load and faults: one engine shared by many threads and 1,000 concurrent ``acompose``.

Every call carries a unique marker in its state, its query, its ``contexts=`` and its
history. Each result must hold exactly its own marker (never another call's), its query
exactly once, and keep every DESIGN §4 invariant (`assert_composed_valid`). Faulty
collectors — hanging (sync and async), raising, returning a wrong type — are bounded by
``timeout_s`` and reported (``on_error: skip``) or raised as `CollectorError`
(``on_error: fail``) for their own call only, while the other calls and the other layers
(history included) are composed normally.
"""

from __future__ import annotations

import asyncio
import re
import threading
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import CollectorError
from ctxpolicy.policy import Policy
from ctxpolicy.testing import assert_composed_valid

from .conftest import policy_data, watchdog

THREADS = 32
CALLS_PER_THREAD = 50
CONCURRENT_CALLS = 1000
#: Short timeouts keep the suite fast; a hang is bounded by them, not by the test.
TIMEOUT_S = 0.2

_MARKER = re.compile(r"M\d{5}X")


def marker(i: int) -> str:
    return f"M{i:05d}X"


# ------------------------------------------------------------------- collector targets


@pytest.fixture
def targets(collector_module: types.ModuleType) -> Iterator[types.ModuleType]:
    """Collectors for ``type: callable`` layers, plus counters and a release switch."""
    mod = collector_module
    mod.release = threading.Event()  # lets hung sync collectors finish after the test
    mod.cancelled = 0
    mod.lock = threading.Lock()

    async def experience(request: CollectRequest) -> str:
        await asyncio.sleep(0)  # yield: interleave with the other calls
        return f"exp:{request.state['marker']}"

    def knowledge(request: CollectRequest) -> str:
        return f"kn:{request.state['marker']}"

    async def hang_async(request: CollectRequest) -> str:
        if not request.state.get("hang", True):
            return f"fine:{request.state['marker']}"
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            with mod.lock:
                mod.cancelled += 1
            raise
        return "unreachable"

    def hang_sync(request: CollectRequest) -> str:
        mod.release.wait()
        return "released too late"

    def boom(request: CollectRequest) -> str:
        if not request.state.get("fail", True):
            return f"fine:{request.state['marker']}"
        raise RuntimeError(f"boom {request.state['marker']}")

    def wrong_type(request: CollectRequest) -> Any:
        if not request.state.get("wrong", True):
            return f"fine:{request.state['marker']}"
        return 42

    def cancel_sync(request: CollectRequest) -> str:
        raise asyncio.CancelledError

    async def cancel_async(request: CollectRequest) -> str:
        raise asyncio.CancelledError

    for function in (
        experience,
        knowledge,
        hang_async,
        hang_sync,
        boom,
        wrong_type,
        cancel_sync,
        cancel_async,
    ):
        setattr(mod, function.__name__, function)
    yield mod
    mod.release.set()


def _callable(mod: types.ModuleType, name: str, **options: Any) -> dict[str, Any]:
    return {"collector": {"type": "callable", "target": f"{mod.__name__}:{name}", **options}}


def _load_engine(mod: types.ModuleType) -> PolicyEngine:
    layers = {
        "framework__context": {
            "collector": {"type": "template", "template": "framework {{ state.marker }}"}
        },
        "experience__context": _callable(mod, "experience", timeout_s=5),
        "knowledge__context": _callable(mod, "knowledge", timeout_s=5),
        "todo__context": {
            "collector": {
                "type": "state",
                "field": "todo",
                "template": "{% for t in value %}- {{ t }}\n{% endfor %}",
            }
        },
    }
    return PolicyEngine(Policy.model_validate(policy_data(layers)))


def _history(m: str) -> list[Any]:
    return [
        HumanMessage(f"old question {m}"),
        AIMessage("", tool_calls=[{"id": f"call-{m}", "name": "lookup", "args": {"m": m}}]),
        ToolMessage(f"tool result {m}", tool_call_id=f"call-{m}"),
        AIMessage(f"old answer {m}"),
    ]


def _call_args(i: int) -> dict[str, Any]:
    """Arguments of call ``i``: react (query from history) or worker (runtime query)."""
    m = marker(i)
    state: dict[str, Any] = {"marker": m, "todo": [f"todo {m}"], "messages": _history(m)}
    args: dict[str, Any] = {
        "system_prompt": f"agent {m}",
        "state": state,
        "contexts": {"compression__context": f"summary {m}"},
    }
    if i % 2:
        args["process"] = "worker"
        args["query"] = f"query {m}"
    else:
        args["process"] = "react"
        state["messages"] = [*state["messages"], HumanMessage(f"query {m}")]
    return args


def _check_own(result: ComposeResult, engine: PolicyEngine, i: int) -> None:
    m = marker(i)
    args = _call_args(i)
    assert_composed_valid(result, engine.plan(args["process"]))
    contents = [str(msg.content) for msg in result.messages]
    text = "\n".join(contents) + "\n".join(
        str(call["args"]) for msg in result.messages for call in getattr(msg, "tool_calls", ())
    )
    assert set(_MARKER.findall(text)) == {m}, f"call {i} saw {set(_MARKER.findall(text))}"
    assert sum(c.count(f"query {m}") for c in contents) == 1
    assert contents[0] == f"agent {m}"
    assert contents[-1] == f"query {m}"
    stripped = [c.strip() for c in contents]
    for expected in (f"framework {m}", f"exp:{m}", f"kn:{m}", f"- todo {m}", f"summary {m}"):
        assert expected in stripped, (i, expected)
    assert f"old question {m}" in contents
    assert f"tool result {m}" in contents
    assert not result.report.skipped


# ------------------------------------------------------------------------ correctness


def test_one_engine_many_threads_each_call_gets_its_own_result(
    targets: types.ModuleType,
) -> None:
    engine = _load_engine(targets)
    barrier = threading.Barrier(THREADS)

    def worker(thread: int) -> int:
        barrier.wait()  # start together: maximal overlap
        for k in range(CALLS_PER_THREAD):
            i = thread * CALLS_PER_THREAD + k
            _check_own(engine.compose(**_call_args(i)), engine, i)
        return CALLS_PER_THREAD

    def run() -> int:
        with ThreadPoolExecutor(THREADS) as pool:
            return sum(pool.map(worker, range(THREADS)))

    assert watchdog(run) == THREADS * CALLS_PER_THREAD


def test_one_engine_1000_concurrent_acompose_each_call_gets_its_own_result(
    targets: types.ModuleType,
) -> None:
    engine = _load_engine(targets)

    async def main() -> list[ComposeResult]:
        return await asyncio.gather(
            *(engine.acompose(**_call_args(i)) for i in range(CONCURRENT_CALLS))
        )

    results = watchdog(lambda: asyncio.run(main()))
    assert len(results) == CONCURRENT_CALLS
    for i, result in enumerate(results):
        _check_own(result, engine, i)


def test_inputs_are_never_mutated_by_a_call(targets: types.ModuleType) -> None:
    engine = _load_engine(targets)
    args = _call_args(3)
    before = [m.model_copy(deep=True) for m in args["state"]["messages"]]
    engine.compose(**args)
    asyncio.run(engine.acompose(**args))
    assert args["state"]["messages"] == before
    assert args["state"]["todo"] == [f"todo {marker(3)}"]


# ----------------------------------------------------------------------------- faults


def _fault_engine(mod: types.ModuleType, on_error: str) -> PolicyEngine:
    """Four faulty layers (async hang, sync hang, raise, wrong type) + framework + history."""
    layers = {
        "framework__context": {
            "collector": {"type": "template", "template": "framework {{ state.marker }}"}
        },
        "experience__context": _callable(mod, "hang_async", timeout_s=TIMEOUT_S, on_error=on_error),
        "knowledge__context": _callable(mod, "boom", on_error=on_error),
        "todo__context": _callable(mod, "wrong_type", on_error=on_error),
        "slow__context": _callable(mod, "hang_sync", timeout_s=TIMEOUT_S, on_error=on_error),
    }
    data = policy_data(layers)
    data["order"] = [*data["order"][:-2], "slow__context", *data["order"][-2:]]
    return PolicyEngine(Policy.model_validate(data))


_FAULT_REASONS = {
    "experience__context": "timed out after 0.2s",
    "knowledge__context": "RuntimeError: boom",
    "todo__context": "returned int",
    "slow__context": "timed out after 0.2s",
}


def _check_faults_skipped(result: ComposeResult, engine: PolicyEngine, i: int) -> None:
    m = marker(i)
    assert_composed_valid(result, engine.plan(_call_args(i)["process"]))
    skipped = {s.layer: s.error for s in result.report.skipped}
    assert set(skipped) == set(_FAULT_REASONS)
    for layer, reason in _FAULT_REASONS.items():
        assert reason in skipped[layer], (layer, skipped[layer])
    assert f"boom {m}" in skipped["knowledge__context"]  # its own error, not another call's
    contents = [str(msg.content) for msg in result.messages]
    assert contents[0] == f"agent {m}"
    assert f"framework {m}" in contents
    assert f"summary {m}" in contents
    # the history is all there, tool-call pair included, and the query once, last
    for expected in (f"old question {m}", f"tool result {m}", f"old answer {m}"):
        assert expected in contents
    assert contents[-1] == f"query {m}"
    assert sum(c.count(f"query {m}") for c in contents) == 1
    text = "\n".join(contents)
    assert set(_MARKER.findall(text)) == {m}


def test_1000_concurrent_acompose_with_hanging_raising_and_wrong_collectors(
    targets: types.ModuleType,
) -> None:
    engine = _fault_engine(targets, "skip")

    async def main() -> list[ComposeResult]:
        return await asyncio.gather(
            *(engine.acompose(**_call_args(i)) for i in range(CONCURRENT_CALLS))
        )

    results = watchdog(lambda: asyncio.run(main()))
    assert len(results) == CONCURRENT_CALLS
    for i, result in enumerate(results):
        _check_faults_skipped(result, engine, i)
    assert targets.cancelled == CONCURRENT_CALLS  # every hung coroutine was cancelled


def test_threads_with_hanging_raising_and_wrong_collectors(targets: types.ModuleType) -> None:
    engine = _fault_engine(targets, "skip")
    threads, calls = THREADS, 4

    def worker(thread: int) -> int:
        for k in range(calls):
            i = thread * calls + k
            _check_faults_skipped(engine.compose(**_call_args(i)), engine, i)
        return calls

    def run() -> int:
        with ThreadPoolExecutor(threads) as pool:
            return sum(pool.map(worker, range(threads)))

    assert watchdog(run) == threads * calls


def _switch_engine(mod: types.ModuleType, name: str, **options: Any) -> PolicyEngine:
    layers = {
        "framework__context": {
            "collector": {"type": "template", "template": "framework {{ state.marker }}"}
        },
        "experience__context": _callable(mod, name, on_error="fail", **options),
    }
    return PolicyEngine(Policy.model_validate(policy_data(layers)))


@pytest.mark.parametrize(
    ("target", "flag", "options", "reason"),
    [
        ("hang_async", "hang", {"timeout_s": TIMEOUT_S}, "timed out after 0.2s"),
        ("boom", "fail", {}, "RuntimeError: boom"),
        ("wrong_type", "wrong", {}, "returned int"),
    ],
    ids=["hang", "raise", "wrong-type"],
)
def test_on_error_fail_raises_for_the_faulty_calls_only(
    targets: types.ModuleType, target: str, flag: str, options: dict[str, Any], reason: str
) -> None:
    """1,000 concurrent calls; every 7th trips the fault and raises; the rest are intact."""
    engine = _switch_engine(targets, target, **options)

    def args(i: int) -> dict[str, Any]:
        call = _call_args(i)
        call["state"][flag] = i % 7 == 0
        return call

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(engine.acompose(**args(i)) for i in range(CONCURRENT_CALLS)),
            return_exceptions=True,
        )

    outcomes = watchdog(lambda: asyncio.run(main()))
    for i, outcome in enumerate(outcomes):
        m = marker(i)
        if i % 7 == 0:
            assert isinstance(outcome, CollectorError), (i, outcome)
            assert outcome.layer == "experience__context"
            assert reason in str(outcome)
            continue
        assert isinstance(outcome, ComposeResult), (i, outcome)
        assert_composed_valid(outcome, engine.plan(args(i)["process"]))
        contents = [str(msg.content) for msg in outcome.messages]
        assert f"fine:{m}" in contents
        assert contents[-1] == f"query {m}"
        assert f"tool result {m}" in contents
        assert set(_MARKER.findall("\n".join(contents))) == {m}


def test_sync_compose_raises_on_a_hanging_collector_with_fail(targets: types.ModuleType) -> None:
    engine = _switch_engine(targets, "hang_sync", timeout_s=TIMEOUT_S)
    args = _call_args(0)
    with pytest.raises(CollectorError, match=r"timed out after 0\.2s"):
        watchdog(lambda: engine.compose(**args))
    assert len(args["state"]["messages"]) == 5  # the state (and its history) is untouched


@pytest.mark.parametrize("target", ["cancel_sync", "cancel_async"])
def test_a_collector_raising_cancelled_error_is_its_own_failure(
    targets: types.ModuleType, target: str
) -> None:
    """CancelledError is a BaseException: raised *by a collector* it must still go
    through ``on_error`` instead of aborting the call (and a whole ``gather``)."""
    layers = {"experience__context": _callable(targets, target, on_error="skip")}
    engine = PolicyEngine(Policy.model_validate(policy_data(layers)))
    args = _call_args(0)

    async def many() -> list[ComposeResult]:
        return await asyncio.gather(*(engine.acompose(**_call_args(i)) for i in range(50)))

    for result in (engine.compose(**args), *watchdog(lambda: asyncio.run(many()))):
        assert [s.layer for s in result.report.skipped] == ["experience__context"]
        assert "CancelledError" in result.report.skipped[0].error
        assert str(result.messages[-1].content).startswith("query ")
    failing = _switch_engine(targets, target)
    with pytest.raises(CollectorError, match="CancelledError"):
        failing.compose(**args)
    with pytest.raises(CollectorError, match="CancelledError"):
        asyncio.run(failing.acompose(**args))


def test_cancelling_acompose_from_outside_still_cancels_it(targets: types.ModuleType) -> None:
    """The caller's own cancellation (here ``wait_for``) is never mistaken for a
    collector failure: it propagates, and the hung collector is cancelled too."""
    layers = {"experience__context": _callable(targets, "hang_async", on_error="skip")}
    engine = PolicyEngine(Policy.model_validate(policy_data(layers)))

    async def main() -> None:
        await asyncio.wait_for(engine.acompose(**_call_args(0)), TIMEOUT_S)

    with pytest.raises(TimeoutError):
        watchdog(lambda: asyncio.run(main()))
    assert targets.cancelled == 1
