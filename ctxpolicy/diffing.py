"""The difference between two effective policies (what ``ctxpolicy diff`` reports).

Pure: two `Policy` objects in, one frozen `PolicyDiff` out. Values are compared key by
key on the effective policy (`Policy.to_data`, so after ``extends`` and the environment)
with an RFC 6902 JSON Patch (``jsonpatch.make_patch``): every path the patch touches is
one change. Mappings are walked down to their leaves, lists are compared whole (in the
policy format a list replaces, it never merges: they enter the patch as opaque values),
and a value that changes type (``1`` to ``1.0``) counts as changed. On top of the raw
keys, the diff says what changes for each process: the layers a call of that process
gains or loses (`ctxpolicy.plan.plan_layers`; docs/design.md, 'Which layers a call
gets'), and whether its query path changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import jsonpatch
from jsonpointer import JsonPointer, JsonPointerException

from ctxpolicy.plan import LayerPlan, plan_layers
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


def _whole_lists(data: Any) -> Any:
    """``data`` with every list turned into a tuple, which the patch compares as one value."""
    if isinstance(data, Mapping):
        return {key: _whole_lists(value) for key, value in data.items()}
    if isinstance(data, list):
        return tuple(data)
    return data


def _touched(patch: jsonpatch.JsonPatch) -> Iterator[str]:
    """The JSON pointers a patch adds, removes or replaces (a move touches both ends)."""
    for operation in patch:
        if operation["op"] == "move":
            yield operation["from"]
        if operation["op"] != "test":
            yield operation["path"]


def _at(data: Any, pointer: JsonPointer) -> Any:
    try:
        return pointer.resolve(data)
    except JsonPointerException:
        return _MISSING


def _change(a: Any, b: Any, pointer: JsonPointer) -> ValueChange:
    path = ".".join(pointer.parts)
    old, new = _at(a, pointer), _at(b, pointer)
    if old is _MISSING:
        return ValueChange(path, "added", None, new)
    if new is _MISSING:
        return ValueChange(path, "removed", old, None)
    return ValueChange(path, "changed", old, new)


def diff_data(a: Any, b: Any, *, prefix: str = "") -> tuple[ValueChange, ...]:
    """Key-by-key difference of two plain-data trees (mappings recurse, lists whole).

    Args:
        a: The old tree.
        b: The new tree.
        prefix: Dotted path of ``a``/``b`` inside a larger tree.
    """
    patch = jsonpatch.make_patch(_whole_lists(a), _whole_lists(b))
    pointers = {pointer: JsonPointer(pointer) for pointer in _touched(patch)}
    changes = [_change(a, b, pointer) for pointer in pointers.values()]
    if prefix:
        changes = [
            ValueChange(f"{prefix}.{c.path}" if c.path else prefix, c.kind, c.old, c.new)
            for c in changes
        ]
    return tuple(sorted(changes, key=lambda c: c.path))


def _plan(policy: Policy, process: str) -> LayerPlan | None:
    return plan_layers(policy, process) if process in policy.processes else None


def _names(plan: LayerPlan | None) -> tuple[str, ...]:
    return plan.names if plan is not None else ()


def _kind(a: LayerPlan | None, b: LayerPlan | None) -> ChangeKind:
    if a is None:
        return "added"
    return "removed" if b is None else "changed"


def _process_change(a: Policy, b: Policy, name: str) -> ProcessChange | None:
    """What changes for the calls of process ``name`` (None: nothing a call would see)."""
    plan_a, plan_b = _plan(a, name), _plan(b, name)
    layers_a, layers_b = _names(plan_a), _names(plan_b)
    gained = tuple(n for n in layers_b if n not in layers_a)
    lost = tuple(n for n in layers_a if n not in layers_b)
    query = _query_path_change(plan_a, plan_b)
    kind = _kind(plan_a, plan_b)
    if kind == "changed" and not gained and not lost and query is None:
        return None
    return ProcessChange(
        process=name,
        kind=kind,
        gained=gained,
        lost=lost,
        layers_a=layers_a,
        layers_b=layers_b,
        query_path=query,
    )


def _query_path_change(a: LayerPlan | None, b: LayerPlan | None) -> tuple[str, str] | None:
    if a is None or b is None or a.query_path == b.query_path:
        return None
    return (a.query_path, b.query_path)


def diff_policies(a: Policy, b: Policy, *, a_label: str = "A", b_label: str = "B") -> PolicyDiff:
    """The difference between two effective policies.

    Args:
        a: The first (old) policy.
        b: The second (new) policy.
        a_label: How to name ``a`` in the report (e.g. its path).
        b_label: How to name ``b`` in the report.
    """
    changes = (_process_change(a, b, name) for name in sorted({*a.processes, *b.processes}))
    return PolicyDiff(
        a=a_label,
        b=b_label,
        values=diff_data(a.to_data(), b.to_data()),
        processes=tuple(change for change in changes if change is not None),
    )
