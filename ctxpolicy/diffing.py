"""The difference between two effective policies (what ``ctxpolicy diff`` reports).

Pure: two `Policy` objects in, one frozen `PolicyDiff` out. Values are compared key by
key on the effective policy (`Policy.to_data`, so after ``extends`` and the environment):
mappings are walked down to their leaves, lists are compared whole (in the policy
format a list replaces, it never merges). On top of the raw keys, the diff says what
changes for each process: the layers a call of that process gains or loses
(`ctxpolicy.plan.plan_layers`; docs/design.md, 'Which layers a call gets'), and whether
its query path changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ctxpolicy.policy import Policy

__all__ = ["PolicyDiff", "ProcessChange", "ValueChange", "diff_data", "diff_policies"]

ChangeKind = Literal["added", "removed", "changed"]
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class ValueChange:
    """One key whose effective value differs.

    Attributes:
        path: Dotted key, e.g. ``budget.ratios.query``.
        kind: ``added`` (only in B), ``removed`` (only in A) or ``changed``.
        old: The value in A (None when added).
        new: The value in B (None when removed).
    """

    path: str
    kind: ChangeKind
    old: Any = None
    new: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {"path": self.path, "kind": self.kind, "old": self.old, "new": self.new}


@dataclass(frozen=True, slots=True)
class ProcessChange:
    """What changes for the calls of one process.

    Attributes:
        process: The process name.
        kind: ``added`` (only in B), ``removed`` (only in A) or ``changed``.
        gained: Layers B's calls get that A's do not (policy order of B).
        lost: Layers A's calls get that B's do not (policy order of A).
        layers_a: Layers of a call under A (empty when the process is only in B).
        layers_b: Layers of a call under B (empty when the process is only in A).
        query_path: ``(A's, B's)`` query path when it changes, else None.
    """

    process: str
    kind: ChangeKind
    gained: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    layers_a: tuple[str, ...] = ()
    layers_b: tuple[str, ...] = ()
    query_path: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "process": self.process,
            "kind": self.kind,
            "gained": list(self.gained),
            "lost": list(self.lost),
            "layers_a": list(self.layers_a),
            "layers_b": list(self.layers_b),
            "query_path": None if self.query_path is None else list(self.query_path),
        }


@dataclass(frozen=True, slots=True)
class PolicyDiff:
    """Every difference between two effective policies.

    Attributes:
        a: Label of the first policy (usually its path).
        b: Label of the second policy.
        values: Changed keys, sorted by path.
        processes: Per-process layer changes, sorted by process name.
    """

    a: str
    b: str
    values: tuple[ValueChange, ...]
    processes: tuple[ProcessChange, ...]

    @property
    def same(self) -> bool:
        """True when the two effective policies are identical."""
        return not self.values and not self.processes

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output (``ctxpolicy diff --format json``)."""
        return {
            "a": self.a,
            "b": self.b,
            "same": self.same,
            "values": [v.to_dict() for v in self.values],
            "processes": [p.to_dict() for p in self.processes],
        }

    def format_text(self) -> str:
        """Human-readable report: one line per key, then one block per process."""
        if self.same:
            return f"{self.a} and {self.b}: effective policies are identical"
        lines = [f"--- {self.a}", f"+++ {self.b}"]
        for change in self.values:
            if change.kind == "added":
                lines.append(f"+ {change.path}: {_show(change.new)}")
            elif change.kind == "removed":
                lines.append(f"- {change.path}: {_show(change.old)}")
            else:
                lines.append(f"~ {change.path}: {_show(change.old)} -> {_show(change.new)}")
        if self.processes:
            lines.append("")
            lines.append("layers per process:")
        for proc in self.processes:
            lines.append(f"  {proc.process} ({proc.kind})")
            if proc.gained:
                lines.append(f"    + gains: {', '.join(proc.gained)}")
            if proc.lost:
                lines.append(f"    - loses: {', '.join(proc.lost)}")
            if proc.query_path is not None:
                lines.append(f"    ~ query path: {proc.query_path[0]} -> {proc.query_path[1]}")
        return "\n".join(lines)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_data(a: Any, b: Any, *, prefix: str = "") -> tuple[ValueChange, ...]:
    """Key-by-key difference of two plain-data trees (mappings recurse, lists whole).

    Args:
        a: The old tree.
        b: The new tree.
        prefix: Dotted path of ``a``/``b`` inside a larger tree.
    """
    changes: list[ValueChange] = []
    _walk(a, b, prefix, changes)
    return tuple(sorted(changes, key=lambda c: c.path))


def _walk(a: Any, b: Any, path: str, out: list[ValueChange]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted({*a, *b}, key=str):
            child = f"{path}.{key}" if path else str(key)
            _walk(a.get(key, _MISSING), b.get(key, _MISSING), child, out)
        return
    if a is _MISSING:
        out.append(ValueChange(path, "added", None, b))
    elif b is _MISSING:
        out.append(ValueChange(path, "removed", a, None))
    elif type(a) is not type(b) or a != b:
        out.append(ValueChange(path, "changed", a, b))


def diff_policies(a: Policy, b: Policy, *, a_label: str = "A", b_label: str = "B") -> PolicyDiff:
    """The difference between two effective policies.

    Args:
        a: The first (old) policy.
        b: The second (new) policy.
        a_label: How to name ``a`` in the report (e.g. its path).
        b_label: How to name ``b`` in the report.
    """
    from ctxpolicy.plan import plan_layers

    values = diff_data(a.to_data(), b.to_data())
    processes: list[ProcessChange] = []
    for name in sorted({*a.processes, *b.processes}):
        in_a, in_b = name in a.processes, name in b.processes
        plan_a = plan_layers(a, name) if in_a else None
        plan_b = plan_layers(b, name) if in_b else None
        layers_a = plan_a.names if plan_a is not None else ()
        layers_b = plan_b.names if plan_b is not None else ()
        gained = tuple(n for n in layers_b if n not in layers_a)
        lost = tuple(n for n in layers_a if n not in layers_b)
        query = None
        if plan_a is not None and plan_b is not None and plan_a.query_path != plan_b.query_path:
            query = (plan_a.query_path, plan_b.query_path)
        kind: ChangeKind = "changed" if in_a and in_b else ("added" if in_b else "removed")
        if kind == "changed" and not gained and not lost and query is None:
            continue
        processes.append(
            ProcessChange(
                process=name,
                kind=kind,
                gained=gained,
                lost=lost,
                layers_a=layers_a,
                layers_b=layers_b,
                query_path=query,
            )
        )
    return PolicyDiff(a=a_label, b=b_label, values=values, processes=tuple(processes))
