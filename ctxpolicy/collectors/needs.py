"""The runtime services a policy needs, checked when the engine is built.

A ``retriever``, ``memory``, ``skills`` or ``aggregate`` collector with ``on_error: fail``
reads a service by name (`SERVICE_COLLECTORS`; an ``aggregate`` one also its ``contexts``),
and a ``summarize`` history overflow needs the ``summarizer`` service. Without them the
first call that needs one fails, possibly hours into production; so the engine,
when built from a policy file, names every missing one at once, each with its layer, the
policy key and the ``file:line:col`` that asked for it (docs/app-start.md, 'Services the
policy needs'). A layer with ``on_error: skip`` may run without its service (each call
reports the skip); a ``memory`` layer with ``tiers`` is kept by the engine itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxpolicy.collectors.base import SERVICE_COLLECTORS
from ctxpolicy.diagnostics import JsonPath, PolicyIssue, format_path, locate
from ctxpolicy.layers import CHECKPOINT_MESSAGES, COMPRESSION, SUMMARIZER_SERVICE

if TYPE_CHECKING:
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy


class NeededService(NamedTuple):
    """One service a policy needs: its name, the layer and the key that ask for it."""

    service: str
    layer: str
    key: JsonPath
    what: str


def needed_services(policy: Policy, plans: Mapping[str, LayerPlan]) -> Iterator[NeededService]:
    """The services the calls of ``plans`` cannot run without, each once per layer."""
    seen: set[tuple[str, str]] = set()
    for plan in plans.values():
        for layer in plan.layers:
            needs = _layer_needs(policy, layer.name, layer.collector)
            if layer.name == CHECKPOINT_MESSAGES:
                needs = _summarizer_need(plan, layer.overflow)
            for need in needs:
                if (need.service, need.layer) not in seen:
                    seen.add((need.service, need.layer))
                    yield need


def _layer_needs(policy: Policy, name: str, spec: Any) -> tuple[NeededService, ...]:
    """What a block layer's collector needs (none: nothing, or it may run without): its
    ``service``, and the ``contexts`` service an ``aggregate`` collector names."""
    if spec is None or spec.type not in SERVICE_COLLECTORS or spec.on_error != "fail":
        return ()
    if spec.type == "memory" and spec.tiers is not None:
        return ()  # the engine keeps this memory itself when no service is given
    what = f"{'an' if spec.type[0] in 'aeiou' else 'a'} {spec.type} collector"
    needs = [NeededService(spec.service, name, _key(policy, name, "service"), what)]
    if spec.type == "aggregate" and spec.contexts is not None:
        needs.append(NeededService(spec.contexts, name, _key(policy, name, "contexts"), what))
    return tuple(needs)


def _key(policy: Policy, layer: str, field: str) -> JsonPath:
    """The policy key of a collector's ``field`` (the collector's, when it is a default)."""
    given = ("layers", layer, "collector", field)
    return given if given in policy._sourcemap else ("layers", layer, "collector")


def _summarizer_need(plan: LayerPlan, overflow: str) -> tuple[NeededService, ...]:
    if overflow != "summarize" or not plan.includes(COMPRESSION):
        return ()  # without compression__context the overflow falls back to drop_oldest
    key = ("layers", CHECKPOINT_MESSAGES, "overflow")
    return (NeededService(SUMMARIZER_SERVICE, CHECKPOINT_MESSAGES, key, "overflow 'summarize'"),)


def missing_services(
    policy: Policy, plans: Mapping[str, LayerPlan], services: Mapping[str, Any]
) -> tuple[PolicyIssue, ...]:
    """One error issue per needed service that ``services`` lacks, at its policy key."""
    given = ", ".join(sorted(services)) or "none"
    default_file = str(policy.source) if policy.source is not None else "<policy>"
    issues = []
    for need in needed_services(policy, plans):
        if need.service in services:
            continue
        where = locate(policy._sourcemap, need.key, default=default_file)
        skip = "" if need.service == SUMMARIZER_SERVICE else " or set the layer's on_error: skip"
        message = (
            f"layer {need.layer}: {need.what} needs the service {need.service!r}, which the "
            f"engine was not given (services given: {given}); pass "
            f"services={{{need.service!r}: ...}}{skip}"
        )
        issues.append(
            PolicyIssue(
                where.file,
                where.line,
                where.column,
                format_path(need.key),
                message,
                "services.missing",
            )
        )
    return tuple(issues)


__all__ = ["NeededService", "missing_services", "needed_services"]
