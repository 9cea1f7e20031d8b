"""The runtime services a policy needs, checked when the engine is built.

A ``retriever``, ``memory`` or ``skills`` collector with ``on_error: fail`` reads a service
by name, and a ``summarize`` history overflow needs the ``summarizer`` service. Without
them the first call that needs one fails, possibly hours into production; so the engine,
when built from a policy file, names every missing one at once, each with its layer, the
policy key and the ``file:line:col`` that asked for it (docs/app-start.md, 'Services the
policy needs'). A layer with ``on_error: skip`` may run without its service (each call
reports the skip); a ``memory`` layer with ``tiers`` is kept by the engine itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxpolicy.diagnostics import JsonPath, PolicyIssue, format_path, locate
from ctxpolicy.layers import CHECKPOINT_MESSAGES, COMPRESSION

if TYPE_CHECKING:
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy

#: The service the ``summarize`` overflow calls (`ctxpolicy.summarize.SUMMARIZER_SERVICE`).
SUMMARIZER = "summarizer"
#: The collector types that read a named service (``spec.service``).
SERVICE_COLLECTORS = frozenset({"retriever", "memory", "skills"})


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
            need = _layer_need(policy, layer.name, layer.collector)
            if need is None and layer.name == CHECKPOINT_MESSAGES:
                need = _summarizer_need(plan, layer.overflow)
            if need is not None and (need.service, need.layer) not in seen:
                seen.add((need.service, need.layer))
                yield need


def _layer_need(policy: Policy, name: str, spec: Any) -> NeededService | None:
    """What a block layer's collector needs (None: nothing, or it may run without)."""
    if spec is None or spec.type not in SERVICE_COLLECTORS or spec.on_error != "fail":
        return None
    if spec.type == "memory" and spec.tiers is not None:
        return None  # the engine keeps this memory itself when no service is given
    given = ("layers", name, "collector", "service")
    key = given if given in policy._sourcemap else ("layers", name, "collector")
    return NeededService(spec.service, name, key, f"a {spec.type} collector")


def _summarizer_need(plan: LayerPlan, overflow: str) -> NeededService | None:
    if overflow != "summarize" or not plan.includes(COMPRESSION):
        return None  # without compression__context the overflow falls back to drop_oldest
    key = ("layers", CHECKPOINT_MESSAGES, "overflow")
    return NeededService(SUMMARIZER, CHECKPOINT_MESSAGES, key, "overflow 'summarize'")


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
        skip = "" if need.service == SUMMARIZER else " or set the layer's on_error: skip"
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
