"""The ``callable`` collector: ``module:attr`` called with the `CollectRequest`.

The target may be a function or a coroutine function (``attr`` may be dotted, e.g.
``pkg.mod:Class.method``). It returns the layer's text or None. Under ``acompose`` a
coroutine target runs on the caller's event loop, a plain function in a worker thread.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.run import in_daemon_thread

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest


def resolve_target(target: str) -> Any:
    """Import ``module:attr`` and return the attribute.

    Raises:
        ValueError: ``target`` is not ``module:attr``.
        ImportError: the module does not import.
        AttributeError: the attribute does not exist.
        TypeError: the attribute is not callable.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"callable target {target!r} must read 'module:attr'")
    found: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"callable target {target!r} is {type(found).__name__}, not callable")
    return found


class CallableCollector:
    """Collector object for ``type: callable``."""

    def __call__(self, request: CollectRequest, /) -> str | Awaitable[str | None] | None:
        """Call the target (the runner awaits a coroutine result)."""
        function = resolve_target(getattr(request.spec, "target", ""))
        result: str | Awaitable[str | None] | None = function(request)
        return result

    async def acollect(self, request: CollectRequest, /) -> str | None:
        """Await a coroutine target on this loop; run a plain one in a worker thread."""
        function = resolve_target(getattr(request.spec, "target", ""))
        if inspect.iscoroutinefunction(function):
            result: str | None = await function(request)
            return result
        value = await asyncio.wrap_future(in_daemon_thread(lambda: function(request)))
        if inspect.isawaitable(value):
            value = await value
        return value  # type: ignore[no-any-return]


#: The registered ``callable`` collector.
collect_callable = CallableCollector()

__all__ = ["CallableCollector", "collect_callable", "resolve_target"]
