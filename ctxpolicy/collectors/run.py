"""Running collectors: sync or async, with ``timeout_s`` and ``on_error``.

``on_error: skip`` leaves the layer empty and records the error (the report shows it;
nothing is silent); ``on_error: fail`` raises `CollectorError`. A sync collector with a
timeout runs in a daemon worker thread (a thread cannot be killed: after the timeout its
result is ignored, and it never blocks interpreter exit); an async one runs under
`asyncio.wait_for`, which cancels it. `arun_collectors` runs all
collectors of a call concurrently with `asyncio.gather`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ctxpolicy.collectors.base import Collected, Collector, CollectRequest, get_collector
from ctxpolicy.errors import CollectorError


@dataclass(frozen=True, slots=True)
class CollectOutcome:
    """The result of one layer's collector.

    Attributes:
        layer: The layer collected.
        collector: The collector type, e.g. ``retriever``.
        text: The collected text (None: nothing, or skipped).
        error: The error text when the collector failed with ``on_error: skip``.
        warnings: What the collector asked the report to warn about (`Collected`).
    """

    layer: str
    collector: str
    text: str | None
    error: str | None = None
    warnings: tuple[str, ...] = ()


def _describe(exc: BaseException, timeout: float | None) -> str:
    if isinstance(exc, TimeoutError) and timeout is not None:
        return f"timed out after {timeout:g}s"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check(value: object, layer: str) -> tuple[str | None, tuple[str, ...]]:
    """A collector's ``(text, warnings)``.

    Raises:
        TypeError: the collector returned neither text, `Collected` nor None.
    """
    if value is None or isinstance(value, str):
        return value, ()
    if isinstance(value, Collected) and (value.text is None or isinstance(value.text, str)):
        return value.text, tuple(str(w) for w in value.warnings)
    raise TypeError(
        f"collector of {layer} returned {type(value).__name__}, expected str, Collected or None"
    )


def in_daemon_thread(function: Callable[[], Any]) -> Future[Any]:
    """Run ``function`` in a daemon thread (a stuck collector never blocks exit)."""
    future: Future[Any] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(function())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(exc)

    threading.Thread(target=target, name="ctxpolicy-collector", daemon=True).start()
    return future


def run_awaitable(awaitable: Awaitable[Any], timeout: float | None = None) -> Any:
    """The value of ``awaitable``, from sync code (in a worker thread under a running loop).

    Used by the sync collector runner and by the summarizer (`ctxpolicy.summarize`).
    """

    async def wrapper() -> Any:
        if timeout is None:
            return await awaitable
        return await asyncio.wait_for(awaitable, timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrapper())
    return in_daemon_thread(lambda: asyncio.run(wrapper())).result()


def _call_blocking(
    collector: Collector, request: CollectRequest, timeout: float | None = None
) -> Any:
    value = collector(request)
    if inspect.isawaitable(value):
        value = run_awaitable(value, timeout)
    return value


def _outcome(
    request: CollectRequest, value: Any = None, error: BaseException | None = None
) -> CollectOutcome:
    spec = request.spec
    if error is None:
        try:
            text, warnings = _check(value, request.layer)
            return CollectOutcome(request.layer, spec.type, text, None, warnings)
        except TypeError as exc:
            error = exc
    message = _describe(error, spec.timeout_s)
    if spec.on_error == "fail":
        raise CollectorError(request.layer, message) from error
    return CollectOutcome(request.layer, spec.type, None, message)


def run_collector(request: CollectRequest) -> CollectOutcome:
    """Run one collector synchronously, honouring its ``timeout_s`` and ``on_error``.

    Raises:
        CollectorError: the collector failed and its ``on_error`` is ``fail``.
    """
    try:
        collector = get_collector(request.spec.type)
        timeout = request.spec.timeout_s
        if timeout is None:
            value = _call_blocking(collector, request)
        else:
            future = in_daemon_thread(lambda: _call_blocking(collector, request, timeout))
            value = future.result(timeout=timeout)
    except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - all go through on_error
        # A sync call cannot be cancelled from outside: a CancelledError here was raised
        # by the collector itself, so it is that collector's failure.
        return _outcome(request, error=exc)
    return _outcome(request, value)


def run_collectors(requests: Sequence[CollectRequest]) -> tuple[CollectOutcome, ...]:
    """Run collectors one after another (the sync path)."""
    return tuple(run_collector(request) for request in requests)


#: Built-in collectors cheap enough to run on the event loop itself (no thread hop).
_INLINE = frozenset({"template", "state"})


async def _acall(collector: Collector, request: CollectRequest) -> Any:
    if request.spec.type in _INLINE and getattr(collector, "__module__", "").startswith(
        "ctxpolicy.collectors."
    ):
        return collector(request)
    acollect = getattr(collector, "acollect", None)
    if acollect is not None:
        return await acollect(request)
    if inspect.iscoroutinefunction(collector) or inspect.iscoroutinefunction(
        type(collector).__call__
    ):
        return await collector(request)  # type: ignore[misc]
    value = await asyncio.wrap_future(in_daemon_thread(lambda: collector(request)))
    if inspect.isawaitable(value):
        value = await value
    return value


async def arun_collector(request: CollectRequest) -> CollectOutcome:
    """Run one collector on the event loop (sync ones in a worker thread).

    Raises:
        CollectorError: the collector failed and its ``on_error`` is ``fail``.
    """
    try:
        collector = get_collector(request.spec.type)
        timeout = request.spec.timeout_s
        call = _acall(collector, request)
        value = await (call if timeout is None else asyncio.wait_for(call, timeout))
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller cancelled this call: propagate
        return _outcome(request, error=exc)  # the collector raised it: its own failure
    except Exception as exc:  # noqa: BLE001 - every failure goes through on_error
        return _outcome(request, error=exc)
    return _outcome(request, value)


async def arun_collectors(requests: Sequence[CollectRequest]) -> tuple[CollectOutcome, ...]:
    """Run every collector of a call concurrently (`asyncio.gather`).

    Raises:
        CollectorError: the first collector that failed with ``on_error: fail``.
    """
    results = await asyncio.gather(*(arun_collector(r) for r in requests))
    return tuple(results)


__all__ = [
    "CollectOutcome",
    "arun_collector",
    "arun_collectors",
    "run_awaitable",
    "run_collector",
    "run_collectors",
]
