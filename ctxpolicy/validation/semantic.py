"""Pass 2: the semantic rules as pure functions over a typed `Policy`.

See docs/design.md, 'Validation rules'.

Each rule returns `Finding`s (JSON path, message, rule id); the loader places them
in files afterwards, so the engine can run the same rules on policies built in code.
Rules that read files (templates, ``files`` roots) live in `ctxpolicy.validation.files`.

`RULE_SECTIONS` says which top-level sections of the policy each rule reads, so that a
document with schema errors still gets every rule whose sections are structurally valid
(see `ctxpolicy.validation.build_policy`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ctxpolicy.diagnostics import Finding
from ctxpolicy.layers import (
    CHECKPOINT_MESSAGES,
    DEFAULT_ORDER,
    FRAMEWORK,
    QUERY,
    SYSTEM_PROMPT,
    is_block_layer,
)
from ctxpolicy.plan import cache_order_warnings, plan_layers
from ctxpolicy.validation.sections import WHOLE_POLICY

if TYPE_CHECKING:  # the rules read a policy, never build one: no pydantic at run time
    from ctxpolicy.policy import CollectorSpec, Policy, ProcessRule

#: Largest sum of ratios (a little slack for decimal fractions such as 0.1 + 0.2).
RATIO_SUM_LIMIT = 1.0 + 1e-9

Rule = Callable[["Policy"], Iterator[Finding]]


def check_order(policy: Policy) -> Iterator[Finding]:
    """Each name once; system_prompt first; query last; checkpoint_messages present."""
    order = policy.order
    seen: set[str] = set()
    for index, name in enumerate(order):
        if name in seen:
            yield Finding(
                ("order", index), f"{name!r} appears more than once in order", "order.duplicate"
            )
        seen.add(name)
    if not order or order[0] != SYSTEM_PROMPT:
        where = ("order", 0) if order else ("order",)
        yield Finding(
            where, "order must start with 'system_prompt'", "order.starts-with-system-prompt"
        )
    if not order or order[-1] != QUERY:
        where = ("order", len(order) - 1) if order else ("order",)
        yield Finding(where, "order must end with 'query'", "order.ends-with-query")
    if CHECKPOINT_MESSAGES not in order:
        yield Finding(
            ("order",),
            "order must contain 'checkpoint_messages'",
            "order.missing-checkpoint-messages",
        )


def _configured_not_in_order(policy: Policy, ordered: set[str]) -> Iterator[Finding]:
    """Layers and ratios that name a layer missing from ``order``."""
    for name in policy.layers:
        if name not in ordered:
            yield Finding(
                ("layers", name),
                f"layer {name!r} is configured but not in order",
                "order.layer-not-in-order",
            )
    for name in policy.budget.ratios:
        if name not in ordered:
            yield Finding(
                ("budget", "ratios", name),
                f"ratio for {name!r}, which is not a layer in order",
                "budget.ratio-not-in-order",
            )


def _process_layer_names(policy: Policy) -> Iterator[tuple[str, str, int, str]]:
    """``(process, "include"|"exclude", index, layer)`` of the processes the policy declares.

    The default processes name the built-in layers; a policy whose order leaves some of
    them out and keeps the defaults simply never injects them, so they are not listed.
    """
    if "processes" not in policy.model_fields_set:
        return
    for process, rule in policy.processes.items():
        for key in ("include", "exclude"):
            for index, name in enumerate(getattr(rule, key)):
                yield process, key, index, name


def check_layers_in_order(policy: Policy) -> Iterator[Finding]:
    """Every block layer used anywhere is in order, and every team layer in order is used.

    A team's own layer in ``order`` with no collector, ratio or process rule gets a
    warning: its text can only come from a runtime ``contexts=`` override.
    """
    ordered = set(policy.order)
    yield from _configured_not_in_order(policy, ordered)
    used = set(policy.layers) | set(policy.budget.ratios)
    for process, key, index, name in _process_layer_names(policy):
        used.add(name)
        if name not in ordered:
            yield Finding(
                ("processes", process, key, index),
                f"process {process!r} {key}s {name!r}, which is not in order",
                f"process.{key}-unknown",
            )
    for index, name in enumerate(policy.order):
        # the built-in layers have a known source (state, runtime contexts=, the summarizer)
        if is_block_layer(name) and name not in used and name not in DEFAULT_ORDER:
            yield Finding(
                ("order", index),
                f"block layer {name!r} is in order but has no collector, ratio or "
                "process rule (its text can only come from contexts=)",
                "order.unused-layer",
                severity="warning",
            )


def check_budget(policy: Policy) -> Iterator[Finding]:
    """The ratios sum to at most 1."""
    total = sum(policy.budget.ratios.values())
    if total > RATIO_SUM_LIMIT:
        yield Finding(
            ("budget", "ratios"), f"ratios sum to {total:.10g}, more than 1.0", "budget.ratios-sum"
        )


def check_persistence(policy: Policy) -> Iterator[Finding]:
    """framework__context, system_prompt and query never persist; system_prompt never shared."""
    rules = {
        FRAMEWORK: "persist.framework",
        SYSTEM_PROMPT: "persist.system-prompt",
        QUERY: "persist.query",
    }
    for name, rule in rules.items():
        spec = policy.layers.get(name)
        if spec is not None and spec.persist:
            yield Finding(("layers", name, "persist"), f"{name} may never be persisted", rule)
    prompt = policy.layers.get(SYSTEM_PROMPT)
    if prompt is not None and prompt.shared:
        yield Finding(
            ("layers", SYSTEM_PROMPT, "shared"),
            "system_prompt is private to its agent and may never be shared",
            "shared.system-prompt",
        )


def check_state_persistence(policy: Policy) -> Iterator[Finding]:
    """A persisted layer filled by the ``state`` collector reads back its own field.

    Such a layer's text already lives in state (``state[field]``). When ``field`` is the
    layer's own name, ``persist`` is the normal read-back of what an earlier call
    persisted (``compression__context``); any other field would make the engine write
    a copy under the layer's name that no call reads, so it never persists it. Saying
    so here beats a ``persist: true`` that is silently ignored.
    """
    for name, spec in policy.layers.items():
        collector = spec.collector
        if not is_block_layer(name) or collector is None or collector.type != "state":
            continue
        field = collector.field
        if field == name or not policy.layer(name).persist:
            continue
        why = (
            f"layer {name!r} reads state[{field!r}] (state collector), which the graph "
            f"state already keeps: persisting it would write state[{name!r}], which "
            "this layer never reads back, so its text is not persisted"
        )
        fix = f"read the layer's own field (field: {name})"
        if spec.persist is None:
            yield Finding(
                ("layers", name, "collector", "field"),
                f"{why}; {name} is persisted by default: set persist: false or {fix}",
                "persist.state-field",
            )
        else:
            yield Finding(
                ("layers", name, "persist"),
                f"{why}; remove persist: true or {fix}",
                "persist.state-field",
            )


def check_processes(policy: Policy) -> Iterator[Finding]:
    """mapreduce_* without history; include/exclude disjoint; the query has a path."""
    for name, rule in policy.processes.items():
        base = ("processes", name)
        if name.startswith("mapreduce_") and rule.checkpoint_messages:
            yield Finding(
                (*base, "checkpoint_messages"),
                f"process {name!r} is a MapReduce process and must not receive "
                "checkpoint_messages (set checkpoint_messages: false)",
                "process.mapreduce-history",
            )
        overlap = set(rule.include) & set(rule.exclude)
        for index, layer in enumerate(rule.exclude):
            if layer in overlap:
                yield Finding(
                    (*base, "exclude", index),
                    f"{layer!r} is both included and excluded",
                    "process.include-exclude",
                )
        if rule.query == "checkpoint" and not rule.checkpoint_messages:
            yield Finding(
                (*base, "query"),
                f"process {name!r} takes its query from the checkpoint but receives "
                "no checkpoint_messages; use query: runtime",
                "process.query-path",
            )
    if policy.default_process not in policy.processes:
        yield Finding(
            ("default_process",),
            f"default_process {policy.default_process!r} is not a declared process "
            f"({', '.join(sorted(policy.processes))})",
            "process.default-missing",
        )


def _distinct_processes(policy: Policy) -> list[str]:
    """The first of each group of processes with equal rules (in declaration order).

    Which layers a plan includes depends on the process's rule, not its name (the name
    is only in the reasons), so processes with equal rules plan the same layers and get
    the same cache warnings: planning one of them is enough.
    """
    kept: list[str] = []
    rules: list[tuple[int, ProcessRule]] = []
    for process, rule in policy.processes.items():
        code = hash(rule)
        if not any(code == seen and rule == other for seen, other in rules):
            kept.append(process)
            rules.append((code, rule))
    return kept


_Described = tuple[tuple[str, str, "CollectorSpec | None"], ...]

#: `_plans` of recent policies, by everything planning reads (team files that extend one
#: base plan the same layers: only the first pays for planning).
_PLANS: dict[Hashable, tuple[_Described, ...]] = {}
_PLANS_MAX = 64


def _frozen(value: Any) -> Any:
    return tuple(value.items()) if isinstance(value, Mapping) else value


def _plans_key(policy: Policy) -> Hashable:
    """What `plan_layers` reads of ``policy`` (hashable unless a setting holds a mapping).

    Everything but the policy's name, which only the texts carry (the warnings are
    written afresh for each policy from the planned layers), and the model, whose window
    sizes the caps but never decides which layers a plan gets (only a negative number of
    available tokens would make planning fail).
    """
    budget = tuple(_frozen(value) for value in vars(policy.budget).values())
    return (
        policy.order,
        policy.enable_share_context,
        policy.available_tokens >= 0,
        budget,
        tuple(policy.layers.items()),
        tuple(policy.processes.items()),
    )


def _plans(policy: Policy) -> tuple[_Described, ...]:
    """``(name, kind, collector)`` of the layers each distinct process gets (processes
    for which no plan can be made are left out: other rules report why)."""
    key: Hashable | None = _plans_key(policy)
    try:
        found = _PLANS.get(key)  # hashes the key once (a tuple does not keep its hash)
    except TypeError:  # a setting that holds a mapping (none does today): not remembered
        key = found = None
    if found is not None:
        return found
    plans: list[_Described] = []
    for process in _distinct_processes(policy):
        try:
            plan = plan_layers(policy, process)
        except Exception:  # noqa: BLE001, S112 - other rules report what makes a plan impossible
            continue
        plans.append(tuple((layer.name, layer.kind, layer.collector) for layer in plan.layers))
    if key is not None:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = tuple(plans)
    return tuple(plans)


def check_cache_order(policy: Policy) -> Iterator[Finding]:
    """A per-query layer ordered before stable ones (the engine's prompt-cache warning).

    The same rule and text as `LayerPlan.warnings` (`ctxpolicy.plan.cache_order_warnings`)
    for the plan of every process; ``cache: volatile-ok`` on the layer acknowledges it.
    """
    index = {name: i for i, name in reversed(list(enumerate(policy.order)))}
    seen: set[str] = set()
    for described in _plans(policy):
        for name, text in cache_order_warnings(policy, described):
            if text not in seen and name in index:
                seen.add(text)
                yield Finding(
                    ("order", index[name]), text, "order.cache-breaker", severity="warning"
                )


def _declared_tools(policy: Policy) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """``(path of the entry, allow)`` of the top-level and every process's own ``tools``."""
    if policy.tools is not None:
        yield ("tools",), policy.tools.allow
    for name, rule in policy.processes.items():
        if rule.tools is not None:
            yield ("processes", name, "tools"), rule.tools.allow


def check_curation_tools(policy: Policy) -> Iterator[Finding]:
    """``dismiss_memory`` in a ``tools.allow`` without ``checkpoint_messages.curate: true``.

    The model could call it, but no call would ever show a dismissal: a warning.
    """
    history = policy.layers.get(CHECKPOINT_MESSAGES)
    if history is not None and history.curate:
        return
    for where, allow in _declared_tools(policy):
        if "dismiss_memory" in allow:
            yield Finding(
                (*where, "allow", allow.index("dismiss_memory")),
                "dismiss_memory is allowed but layers.checkpoint_messages.curate is not true: "
                "the model's dismissals would never be applied; set curate: true",
                "tools.dismiss-without-curate",
                severity="warning",
            )


RULES: tuple[Rule, ...] = (
    check_order,
    check_layers_in_order,
    check_budget,
    check_persistence,
    check_state_persistence,
    check_processes,
    check_cache_order,
    check_curation_tools,
)


#: The top-level sections each rule reads. ``"layers"`` means the rule needs the whole
#: section structurally valid; ``"layers.*"`` that it judges each entry on its own, so
#: it still runs on the valid entries when others are broken.
RULE_SECTIONS: Mapping[Rule, frozenset[str]] = {
    check_order: frozenset({"order"}),
    check_layers_in_order: frozenset({"order", "layers", "budget", "processes"}),
    check_budget: frozenset({"budget"}),
    check_persistence: frozenset({"layers.*"}),
    check_state_persistence: frozenset({"layers.*"}),
    check_processes: frozenset({"processes", "default_process"}),
    check_cache_order: frozenset({WHOLE_POLICY}),
    check_curation_tools: frozenset({"tools", "processes", "layers"}),
}


def check_semantics(policy: Policy) -> list[Finding]:
    """Run every semantic rule that needs no file access."""
    return [finding for rule in RULES for finding in rule(policy)]


__all__ = [
    "RULES",
    "RULE_SECTIONS",
    "check_budget",
    "check_cache_order",
    "check_curation_tools",
    "check_layers_in_order",
    "check_order",
    "check_persistence",
    "check_processes",
    "check_semantics",
]
