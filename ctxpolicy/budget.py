"""Token budgets per layer: every cap a call uses is computed here.

- `base_caps`: each layer's cap from its ratio (`ctxpolicy.plan.plan_layers` stores it
  in the plan, once per process);
- `layer_demands` / `history_room`: the tokens each layer would use uncut this call
  (its *demand*), the history counted only as far as it can matter;
- `call_caps`: the caps of one call: the base caps, or with ``redistribute`` the share
  layers leave unused given to those that need more (`redistribute_caps`);
- `wide_recall_cap`: the room a lone recall layer may take once the history is cut.

Pure functions over plain data; the composer measures the demands and applies the caps.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.report import LayerReport

__all__ = [
    "base_caps",
    "call_caps",
    "history_room",
    "layer_demands",
    "redistribute_caps",
    "wide_recall_cap",
]


def _exact(ratio: float) -> Fraction:
    # The ratio as written (0.29 is 29/100, not 0.28999...): floor(0.29 * 100) must be 29.
    return Fraction(repr(ratio))


def _exact_ratios(
    policy_layers: Sequence[tuple[str, float | None]],
) -> tuple[dict[str, Fraction | None], Fraction]:
    """``({layer: exact ratio or None}, their sum)``, checked (errors: see `base_caps`)."""
    ratios: dict[str, Fraction | None] = {}
    for name, ratio in policy_layers:
        if name in ratios:
            raise ValueError(f"policy_layers: layer {name!r} appears twice")
        if ratio is not None and not (0 <= ratio <= 1 and math.isfinite(ratio)):
            raise ValueError(
                f"policy_layers: ratio of layer {name!r} must be in [0, 1], got {ratio}"
            )
        ratios[name] = None if ratio is None else _exact(ratio)
    assigned = sum((r for r in ratios.values() if r is not None), Fraction(0))
    if assigned > 1:
        raise ValueError(f"policy_layers: ratios sum to {float(assigned):g}, more than 1")
    return ratios, assigned


def base_caps(
    policy_layers: Sequence[tuple[str, float | None]], *, available: int
) -> dict[str, int]:
    """Token cap of every layer before redistribution.

    A layer with a ratio gets ``floor(ratio * available)``. The layers without one split
    the unassigned share, ``floor(available * (1 - sum(ratios)))``, equally (rounded down).
    The caps never sum to more than ``available``.

    Args:
        policy_layers: ``(layer name, ratio or None)`` in policy order.
        available: Tokens available for the input (window minus output reserve).

    Returns:
        ``{layer: cap}`` in the order of ``policy_layers``.

    Raises:
        ValueError: When ``available`` is negative, a name repeats, a ratio is outside
            [0, 1], or the ratios sum to more than 1.
    """
    if available < 0:
        raise ValueError(f"available must be >= 0, got {available}")
    ratios, assigned = _exact_ratios(policy_layers)
    shared = [name for name, r in ratios.items() if r is None]
    each = math.floor(available * (1 - assigned)) // len(shared) if shared else 0
    return {name: each if r is None else math.floor(r * available) for name, r in ratios.items()}


def _check_redistribution(
    caps: Mapping[str, int], demands: Mapping[str, int], order: Sequence[str], available: int
) -> None:
    """Raise the `redistribute_caps` errors."""
    if len(order) != len(set(order)) or set(order) != set(caps):
        raise ValueError(
            f"order must name every layer of caps exactly once; got {list(order)} "
            f"for caps {sorted(caps)}"
        )
    missing = [name for name in order if name not in demands]
    if missing:
        raise ValueError(f"demands: no demand for layer(s) {', '.join(missing)}")
    for name in order:
        if caps[name] < 0:
            raise ValueError(f"caps: cap of layer {name!r} is negative ({caps[name]})")
        if demands[name] < 0:
            raise ValueError(f"demands: demand of layer {name!r} is negative ({demands[name]})")
    if sum(caps.values()) > available:
        raise ValueError(f"caps sum to {sum(caps.values())}, more than available ({available})")


def redistribute_caps(
    caps: Mapping[str, int],
    demands: Mapping[str, int],
    *,
    order: Sequence[str],
    available: int,
) -> dict[str, int]:
    """Give the share layers leave unused to the layers that need more, in policy order.

    Each layer first gets ``min(demand, cap)``. What is left of ``available`` (unused
    share plus rounding slack) then goes to the layers whose demand exceeds their cap,
    one after the other in ``order``, each taking up to its whole shortfall.

    Guarantees: the result sums to at most ``available``; no layer gets less than
    ``min(demand, cap)``; a layer gets extra only when every layer before it in
    ``order`` got its whole demand.

    Args:
        caps: Base cap per layer (e.g. from `base_caps`).
        demands: Tokens each layer's content needs.
        order: Every layer of ``caps`` once, in policy order.
        available: Tokens available for the input.

    Returns:
        ``{layer: cap}`` in ``order``.

    Raises:
        ValueError: When ``order`` is not exactly the layers of ``caps``, a demand is
            missing or negative, a cap is negative, or the caps exceed ``available``.
    """
    _check_redistribution(caps, demands, order, available)
    result = {name: min(caps[name], demands[name]) for name in order}
    pool = available - sum(result.values())
    for name in order:
        if pool <= 0:
            break
        extra = min(demands[name] - result[name], pool)
        if extra > 0:
            result[name] += extra
            pool -= extra
    return result


def layer_demands(
    plan: LayerPlan, texts: Mapping[str, int], *, reserved: Collection[str] = ()
) -> dict[str, int]:
    """Tokens each layer of ``plan`` would use uncut, the history's set to 0.

    Args:
        plan: The call's plan.
        texts: Tokens of each single-message layer's uncut message (layers without a
            value this call are absent).
        reserved: Layers whose whole cap is held for them, whatever their text (recall
            layers: their text arrives after the history is cut).

    Returns:
        ``{layer: demand}`` in plan order; the history's demand is set by the composer
        (`history_room` says how far counting it matters).
    """
    demands: dict[str, int] = {}
    for layer in plan.layers:
        demand = texts.get(layer.name, 0)
        if reserved and layer.name in reserved:
            demand = max(demand, layer.cap)
        demands[layer.name] = demand
    return demands


def history_room(plan: LayerPlan, demands: Mapping[str, int], history: str) -> int:
    """The most layer ``history`` could be given under redistribution.

    ``available`` minus what the other layers keep (each ``min(cap, demand)``), and never
    less than its own cap: counting the history past this point cannot change any cap,
    so its cost follows what is kept, not its length.
    """
    others = 0
    own = 0
    for layer in plan.layers:
        if layer.name == history:
            own = layer.cap
        else:
            others += min(layer.cap, demands[layer.name])
    return max(plan.available_tokens - others, own)


def call_caps(plan: LayerPlan, demands: Mapping[str, int]) -> dict[str, int]:
    """Each layer's cap for one call: its base cap, redistributed when the plan says so.

    Raises:
        ValueError: see `redistribute_caps` (never for a plan and its own demands).
    """
    caps = plan.caps
    if not plan.redistribute:
        return caps
    return redistribute_caps(caps, demands, order=plan.names, available=plan.available_tokens)


def wide_recall_cap(
    plan: LayerPlan, layers: Iterable[LayerReport], name: str, *, recall_layers: int
) -> int | None:
    """The cap a lone recall layer ``name`` can take without moving anything else.

    The history is cut newest-first in whole units, so the prompt often has room that
    nothing uses. With ``redistribute`` and one recall layer, recall may take it: every
    other included layer keeps what the composer gives it first (its demand up to its
    own cap) or what it uses, whichever is more; recall gets the rest.

    Args:
        plan: The call's plan.
        layers: The report's layers after the history was cut.
        name: The recall layer.
        recall_layers: How many recall layers the call fills.

    Returns:
        The cap, or None when recall keeps its own cap.
    """
    if not plan.redistribute or recall_layers != 1:
        return None
    kept = sum(
        max(min(layer.demand, layer.base_cap or 0), layer.tokens)
        for layer in layers
        if layer.included and layer.name != name
    )
    return plan.available_tokens - kept
