"""The ``aggregate`` collector: several sessions' whole contexts for one agent.

The design's aggregation flow from a policy (docs/memory.md, 'Aggregating session
contexts')::

    sessions__context:
      collector: {type: aggregate, service: memory, contexts: session_states}

The sessions are the state's ``session_ids`` (else ``session_id``, else the call's
thread: `call_session_ids`): a call reads the sessions it names and no other. Each gives
its persisted ``__context`` layers (read from the ``contexts`` service: a mapping session
id -> state, or a callable) and its memory (the ``service`` `MemorySessions`; a session
not open in this process is restored from the store when it holds it, an unknown one
opens nothing); `MemorySessions.aggregate_context` ranks, de-duplicates and packs them
into the layer's cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.base import lookup_service
from ctxpolicy.collectors.memory import call_session_ids
from ctxpolicy.memory.sessions import MemorySessions, render_context

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest


def collect_aggregate(request: CollectRequest) -> str | None:
    """The named sessions' contexts, ranked and packed into the cap (`render_context`).

    Raises:
        LookupError: no `MemorySessions` service, or no session named and no thread.
        TypeError: the service is not a `MemorySessions`, or ``contexts`` is neither a
            mapping nor a callable.
    """
    spec: Any = request.spec
    sessions = lookup_service(request.services, request.state, spec.service)
    if sessions is None:
        raise LookupError(
            f"aggregate collector of layer {request.layer!r}: no service or state entry "
            f"{spec.service!r} (pass services={{{spec.service!r}: MemorySessions(...)}})"
        )
    if not isinstance(sessions, MemorySessions):
        raise TypeError(
            f"aggregate collector of layer {request.layer!r}: {spec.service!r} must be a "
            f"MemorySessions, got {type(sessions).__name__}"
        )
    ids = call_session_ids(request.state, request.thread_id)
    if ids is None:
        raise LookupError(
            f"aggregate collector of layer {request.layer!r}: name the sessions (state "
            "'session_ids' or 'session_id'), or give the call a thread (compose(thread_id=...) "
            "or a LangGraph thread)"
        )
    contexts = _contexts(request, spec.contexts)
    if request.cap_tokens <= 0:
        return None
    pieces = sessions.aggregate_context(
        contexts,
        ids,
        max_tokens=request.cap_tokens,
        count_tokens=request.count_tokens,
        query=request.query,
        strategy=spec.strategy,
        layers=spec.layers,
        context_importance=spec.context_importance,
    )
    return render_context(pieces) or None


def _contexts(request: CollectRequest, name: str | None) -> Any:
    """The ``contexts`` service (``{}`` when the spec names none).

    Raises:
        LookupError: the service is named but missing.
        TypeError: it is neither a mapping nor a callable.
    """
    if name is None:
        return {}
    found = lookup_service(request.services, request.state, name)
    if found is None:
        raise LookupError(
            f"aggregate collector of layer {request.layer!r}: no contexts service {name!r}"
        )
    if not isinstance(found, Mapping) and not callable(found):
        raise TypeError(
            f"aggregate collector of layer {request.layer!r}: contexts service {name!r} must "
            f"be a mapping session id -> state or a callable, got {type(found).__name__}"
        )
    return found


__all__ = ["collect_aggregate"]
