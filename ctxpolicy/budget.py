"""Token budgets per layer: base caps from ratios, and redistribution of unused share.

Pure functions over plain data; the engine feeds them the policy's layers and the
tokens each layer's content needs (its *demand*).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

__all__ = ["base_caps", "redistribute_caps"]


def _exact(ratio: float) -> Fraction:
    # The ratio as written (0.29 is 29/100, not 0.28999...): floor(0.29 * 100) must be 29.
    return Fraction(repr(ratio))


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
    shared = [name for name, r in ratios.items() if r is None]
    each = math.floor(available * (1 - assigned)) // len(shared) if shared else 0
    return {name: each if r is None else math.floor(r * available) for name, r in ratios.items()}


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
