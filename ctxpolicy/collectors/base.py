"""The collector protocol and registry.

A collector turns one layer's ``collector:`` spec into text. It may be a plain
function or a coroutine function; it receives a `CollectRequest` and returns the
layer's text (``None`` or ``""`` means "nothing this turn"). Collectors that gather
several pieces (documents, memory items, file blocks) pack whole pieces into
``request.cap_tokens`` themselves, using ``request.count_tokens``; the engine then
applies the layer's overflow rule to whatever still does not fit.

Every built-in collector type is registered here, in one table (`BUILTIN_COLLECTORS`),
by import path inside ``ctxpolicy.collectors``, so their modules (and their
dependencies: memory, files, ...) load only when a policy uses them. The collector
modules import ``ctxpolicy.memory`` and ``ctxpolicy.blocks``, never the reverse.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ctxpolicy.policy import CollectorSpec, Policy


#: The collector types that read the service their spec names (``spec.service``), so an
#: engine built for a policy whose layer has ``on_error: fail`` must be given it
#: (`ctxpolicy.collectors.needs`). ``tools`` is not one: hosts pass the tools per call.
SERVICE_COLLECTORS: frozenset[str] = frozenset({"retriever", "memory", "skills", "aggregate"})
#: Those of them that look the service up in state when no service has that name.
STATE_SERVICE_COLLECTORS: frozenset[str] = SERVICE_COLLECTORS - {"retriever"}


def lookup_service(services: Mapping[str, Any], state: Mapping[str, Any], name: str) -> Any:
    """Service ``name`` of a call: the call's services first, then the state's entry of that
    name (`STATE_SERVICE_COLLECTORS`); None when neither holds one (the caller says why
    it needs it)."""
    found = services.get(name)
    return state.get(name) if found is None else found


@dataclass(frozen=True, slots=True)
class CollectRequest:
    """Everything a collector may look at for one layer of one call.

    Attributes:
        layer: The layer being collected, e.g. ``knowledge__context``.
        spec: The layer's ``collector:`` spec (a pydantic model; ``spec.type`` names it).
        policy: The effective policy.
        process: The process of this call, e.g. ``react``.
        state: The Blackboard, read-only.
        query: This call's query text, when known.
        services: Runtime services by name (retrievers, memory, tools, ...).
        cap_tokens: The layer's token cap for this call.
        count_tokens: Exact token counter of the policy's tokenizer.
        base_dir: Folder of the policy file that declared this layer (for relative paths).
        vars: The policy's ``vars``.
        thread_id: The conversation of this call (the LangGraph ``thread_id``), when known.
    """

    layer: str
    spec: CollectorSpec
    policy: Policy
    process: str
    state: Mapping[str, Any]
    query: str | None
    services: Mapping[str, Any]
    cap_tokens: int
    count_tokens: Callable[[str], int]
    base_dir: Path | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class Collected:
    """A collector's text with what the call's report should warn about.

    A collector may return this instead of a plain ``str`` when something it did is worth
    a reader's attention without failing the layer (a reference resolved another way, a
    piece left out): each warning goes to `ctxpolicy.report.ComposeReport.warnings`.

    Attributes:
        text: The layer's text (None or ``""``: nothing this turn).
        warnings: Sentences for the report, each naming the layer.
    """

    text: str | None
    warnings: tuple[str, ...] = ()


class Collector(Protocol):
    """A collector: ``(request) -> str | Collected | None``, sync or async.

    A collector object may also define ``async acollect(request)``; under
    ``PolicyEngine.acompose`` the runner prefers it (the built-in retriever and
    callable collectors do, so an async retriever is awaited, not run in a thread).
    ``request.state`` arrives as a read-only mapping view.
    """

    def __call__(
        self, request: CollectRequest, /
    ) -> Awaitable[str | Collected | None] | str | Collected | None: ...


#: The built-in collector types: ``type -> "module:attribute"`` (imported on first use).
BUILTIN_COLLECTORS: Mapping[str, str] = MappingProxyType(
    {
        "template": "ctxpolicy.collectors.template:collect_template",
        "state": "ctxpolicy.collectors.state:collect_state",
        "retriever": "ctxpolicy.collectors.retriever:collect_retriever",
        "callable": "ctxpolicy.collectors.callable:collect_callable",
        "memory": "ctxpolicy.collectors.memory:collect_memory",
        "files": "ctxpolicy.collectors.files:collect_files",
        "tools": "ctxpolicy.collectors.tools:collect_tools",
        "agent_outputs": "ctxpolicy.collectors.agent_outputs:collect_agent_outputs",
        "skills": "ctxpolicy.collectors.skills:collect_skills",
        "aggregate": "ctxpolicy.collectors.aggregate:collect_aggregate",
    }
)
_REGISTRY: dict[str, Collector] = {}


def register_collector(type_name: str, collector: Collector) -> None:
    """Register (or replace) the collector for ``type_name``."""
    if not callable(collector):
        raise TypeError(f"collector for {type_name!r} must be callable, got {collector!r}")
    _REGISTRY[type_name] = collector


def get_collector(type_name: str) -> Collector:
    """The collector registered for ``type_name``, importing a built-in on first use.

    Raises:
        KeyError: no collector is registered under ``type_name``.
    """
    found = _REGISTRY.get(type_name)
    if found is not None:
        return found
    target = BUILTIN_COLLECTORS.get(type_name)
    if target is None:
        known = ", ".join(sorted({*BUILTIN_COLLECTORS, *_REGISTRY}))
        raise KeyError(f"no collector registered for type {type_name!r} (known: {known})")
    module_name, _, attr = target.partition(":")
    collector: Collector = getattr(importlib.import_module(module_name), attr)
    _REGISTRY[type_name] = collector
    return collector
