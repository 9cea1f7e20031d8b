"""Process rules: which layers one call gets, in which order, and what each may do.

See docs/design.md, 'Which layers a call gets'.

`plan_layers` is pure: the same policy and process always give the same `LayerPlan`.
Every included or excluded layer carries a human-readable reason naming the rule that
decided it, so a report can explain *why*, not only *what*. Each layer carries its
ratio and its base cap (computed by `ctxpolicy.budget.base_caps`) and whether it may be
persisted (`may_persist`, the one never-persist rule).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxpolicy.budget import base_caps
from ctxpolicy.layers import (
    CHECKPOINT_MESSAGES,
    QUERY,
    SYSTEM_PROMPT,
    LayerKind,
    QueryPath,
    Role,
    TokenizerName,
    may_persist,
)

if TYPE_CHECKING:
    from ctxpolicy.policy import CollectorSpec, Policy, ProcessRule


#: Collector types whose text changes with every query (bad for provider prompt caches
#: when ordered before stable layers).
VOLATILE_COLLECTORS: frozenset[str] = frozenset({"retriever", "memory", "recall"})
#: Collector types whose text is stable across the calls of one conversation.
STABLE_COLLECTORS: frozenset[str] = frozenset({"template", "state", "files", "tools"})


@dataclass(frozen=True, slots=True)
class PlannedLayer:
    """One layer a call includes, with everything the composer needs to budget it.

    Attributes:
        name: Layer name, e.g. ``knowledge__context``.
        kind: ``system_prompt``, ``block``, ``history`` or ``query``.
        role: Message role of a block (``system``/``human``/``ai``).
        overflow: What happens when the layer does not fit its cap.
        cap: Token cap from the budget ratios (before redistribution).
        ratio: The layer's ratio in the policy, or None when it has none.
        persist: Whether the layer's value may be written to graph state.
        shared: Whether the layer is part of the shared agent context.
        collector: The layer's collector spec (None: value only from ``contexts=``).
        reason: The rule that included the layer, in words.
    """

    name: str
    kind: LayerKind
    role: Role
    overflow: str
    cap: int
    ratio: float | None
    persist: bool
    shared: bool
    collector: CollectorSpec | None
    reason: str
    clear_tool_results: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "name": self.name,
            "kind": self.kind,
            "role": self.role,
            "overflow": self.overflow,
            "cap": self.cap,
            "ratio": self.ratio,
            "persist": self.persist,
            "shared": self.shared,
            "collector": None if self.collector is None else self.collector.type,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ExcludedLayer:
    """A layer of the policy's order that this process does not get, and why."""

    name: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class LayerPlan:
    """The layers of one process's calls: order, caps and the reasons behind them.

    Attributes:
        process: The process name.
        query_path: ``runtime`` (the engine appends ``HumanMessage(query)``) or
            ``checkpoint`` (the input is the last HumanMessage of the history).
        layers: Included layers in policy order.
        excluded: Layers of the policy order this process does not get.
        available_tokens: ``context_window * (1 - output_reserve)``.
        tokenizer: Name of the tokenizer that counts tokens.
        redistribute: Whether unused share flows to layers that need more.
        enable_share_context: The effective central switch (not the process's own
            ``share_context``, which the reasons of the layers report).
        policy_name: Name of the policy the plan comes from.
        warnings: Static advice about the order (e.g. prompt-cache breakers).
        order: The policy's full layer order (included and excluded layers).
        merge_system: ``model.system_messages: merge``: the leading system-role
            layers are sent as one SystemMessage.
    """

    process: str
    query_path: QueryPath
    layers: tuple[PlannedLayer, ...]
    excluded: tuple[ExcludedLayer, ...]
    available_tokens: int
    tokenizer: TokenizerName
    redistribute: bool
    enable_share_context: bool = True
    policy_name: str = ""
    warnings: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    merge_system: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """Names of the included layers, in order."""
        return tuple(layer.name for layer in self.layers)

    @property
    def caps(self) -> dict[str, int]:
        """Token cap of each included layer."""
        return {layer.name: layer.cap for layer in self.layers}

    def get(self, name: str) -> PlannedLayer | None:
        """The included layer ``name``, or None when the plan does not include it."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        return None

    def includes(self, name: str) -> bool:
        """True when the plan includes layer ``name``."""
        return self.get(name) is not None

    def exclusion(self, name: str) -> ExcludedLayer | None:
        """Why ``name`` is excluded, or None when it is included or unknown."""
        for layer in self.excluded:
            if layer.name == name:
                return layer
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "process": self.process,
            "query_path": self.query_path,
            "available_tokens": self.available_tokens,
            "tokenizer": self.tokenizer,
            "redistribute": self.redistribute,
            "enable_share_context": self.enable_share_context,
            "policy": self.policy_name,
            "layers": [layer.to_dict() for layer in self.layers],
            "excluded": [layer.to_dict() for layer in self.excluded],
            "warnings": list(self.warnings),
        }


def _block_decision(
    name: str, *, shared: bool, process: str, rule: ProcessRule, switch: bool
) -> tuple[bool, str]:
    """Apply §3.1 to one block layer: (included?, reason)."""
    prefix = f"process {process}"
    if name in rule.exclude:
        return False, f"{prefix}: in exclude"
    if name in rule.include:
        return True, f"{prefix}: in include"
    if not shared:
        return True, "layer not shared: every process gets it"
    if not switch:
        return False, f"enable_share_context false; {prefix}: not in include"
    if not rule.share_context:
        return False, f"{prefix}: share_context false, not in include"
    return True, f"shared layer; enable_share_context true and {prefix}: share_context true"


def _stable_after(layers: Sequence[tuple[str, str, CollectorSpec | None]]) -> list[str]:
    """Names of the stable layers among ``layers`` (the history, stable collectors)."""
    return [
        name
        for name, kind, collector in layers
        if kind == "history" or (collector is not None and collector.type in STABLE_COLLECTORS)
    ]


def cache_order_warnings(
    policy: Policy, layers: Sequence[tuple[str, str, CollectorSpec | None]]
) -> Iterator[tuple[str, str]]:
    """``(layer, text)`` for each per-query layer ordered before stable ones.

    The one prompt-cache rule: the engine applies it to a call's planned layers
    (`LayerPlan.warnings`), ``ctxpolicy validate`` to the policy's whole order (rule
    ``order.cache-breaker``). A layer with ``cache: volatile-ok`` acknowledges it.

    Args:
        policy: The policy (its name, and which layers acknowledge the rule).
        layers: ``(name, kind, collector)`` in order.
    """
    for index, (name, _kind, collector) in enumerate(layers):
        kind = None if collector is None else collector.type
        if kind not in VOLATILE_COLLECTORS:
            continue
        spec = policy.layers.get(name)
        if spec is not None and spec.cache == "volatile-ok":
            continue
        stable_after = _stable_after(layers[index + 1 :])
        if stable_after:
            yield (
                name,
                (
                    f"{name} ({kind}) changes with every query but is ordered before stable "
                    f"layers {', '.join(stable_after)}: their prompt-cache prefix is lost on "
                    f"every call of policy {policy.name}; order per-query layers after stable "
                    f"ones or set layers.{name}.cache: volatile-ok"
                ),
            )


def _cache_warnings(policy: Policy, layers: tuple[PlannedLayer, ...]) -> tuple[str, ...]:
    """`cache_order_warnings` of a plan, placed at the layer's ``order`` entry when known."""
    described = [(layer.name, layer.kind, layer.collector) for layer in layers]
    out: list[str] = []
    for name, text in cache_order_warnings(policy, described):
        where = policy._order_locations.get(name)
        out.append(f"{where}: {text}" if where else text)
    return tuple(out)


def _query_reason(process: str, rule: ProcessRule) -> str:
    how = (
        "the engine appends HumanMessage(query)"
        if rule.query == "runtime"
        else "the input is the last HumanMessage of checkpoint_messages"
    )
    return f"query: always included; process {process}: {rule.query} ({how})"


def _decision(policy: Policy, name: str, process: str, rule: ProcessRule) -> tuple[bool, str]:
    """Whether a call of ``process`` gets layer ``name``, and the rule that decided it."""
    if name == SYSTEM_PROMPT:
        return True, "system_prompt: always included (private to the agent)"
    if name == QUERY:
        return True, _query_reason(process, rule)
    if name == CHECKPOINT_MESSAGES:
        return rule.checkpoint_messages, (
            f"process {process}: checkpoint_messages {str(rule.checkpoint_messages).lower()}"
        )
    return _block_decision(
        name,
        shared=policy.layer(name).shared,
        process=process,
        rule=rule,
        switch=policy.enable_share_context,
    )


def _planned_layer(policy: Policy, name: str, reason: str, cap: int) -> PlannedLayer:
    resolved = policy.layer(name)
    spec = policy.layers.get(name)
    return PlannedLayer(
        name=name,
        kind=resolved.kind,
        role=resolved.role,
        overflow=resolved.overflow,
        cap=cap,
        ratio=policy.budget.ratios.get(name),
        persist=resolved.persist and may_persist(name),
        shared=resolved.shared,
        collector=resolved.collector,
        reason=reason,
        clear_tool_results=bool(spec is not None and spec.clear_tool_results),
    )


def plan_layers(policy: Policy, process: str) -> LayerPlan:
    """Decide the layers of a call of ``process`` (docs/design.md, 'Which layers a call gets').

    ``system_prompt`` always; a block layer ``L`` iff ``L`` is not in the process's
    ``exclude`` and (``L`` is in its ``include``, or ``L`` is not shared, or ``L`` is
    shared and both ``enable_share_context`` and the process's ``share_context`` are
    true); ``checkpoint_messages`` iff the process takes history; ``query`` always.

    Args:
        policy: The effective policy.
        process: A process the policy declares.

    Returns:
        The plan: included layers in policy order with caps and reasons, and the
        excluded layers with the rule that excluded them.

    Raises:
        UnknownProcessError: the policy does not declare ``process``.
    """
    rule = policy.process(process)
    chosen: list[tuple[str, str]] = []
    excluded: list[ExcludedLayer] = []
    for name in policy.order:
        included, reason = _decision(policy, name, process, rule)
        if included:
            chosen.append((name, reason))
        else:
            excluded.append(ExcludedLayer(name, reason))
    available = policy.available_tokens
    ratios = policy.budget.ratios
    caps = base_caps([(name, ratios.get(name)) for name, _ in chosen], available=available)
    planned = tuple(_planned_layer(policy, name, reason, caps[name]) for name, reason in chosen)
    return LayerPlan(
        process=process,
        query_path=rule.query,
        layers=planned,
        excluded=tuple(excluded),
        available_tokens=available,
        tokenizer=policy.model.tokenizer,
        redistribute=policy.budget.redistribute,
        enable_share_context=policy.enable_share_context,
        policy_name=policy.name,
        warnings=_cache_warnings(policy, planned),
        order=tuple(policy.order),
        merge_system=policy.model.system_messages == "merge",
    )


__all__ = [
    "ExcludedLayer",
    "LayerPlan",
    "PlannedLayer",
    "QueryPath",
    "cache_order_warnings",
    "may_persist",
    "plan_layers",
]
