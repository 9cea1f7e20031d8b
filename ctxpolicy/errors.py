"""The error classes of ctxpolicy. Every one is a `CtxPolicyError`."""

from __future__ import annotations

from collections.abc import Sequence

from ctxpolicy.issues import PolicyIssue


class CtxPolicyError(Exception):
    """Base class of every error ctxpolicy raises on purpose."""


class PolicyValidationError(CtxPolicyError):
    """A policy file is invalid. ``issues`` holds every problem found, not just the first."""

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        self.issues: tuple[PolicyIssue, ...] = tuple(issues)
        errors = [i for i in self.issues if i.severity == "error"]
        head = "\n".join(i.format_text() for i in errors[:20])
        more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"invalid policy ({len(errors)} error(s)):\n{head}{more}")


class BudgetExceededError(CtxPolicyError):
    """A layer does not fit its token cap and its overflow rule is ``error``."""

    def __init__(self, layer: str, tokens: int, cap: int, *, detail: str = "") -> None:
        self.layer = layer
        self.tokens = tokens
        self.cap = cap
        extra = f": {detail}" if detail else ""
        super().__init__(f"layer {layer!r} needs {tokens} tokens but its cap is {cap}{extra}")


class QueryPathError(CtxPolicyError):
    """The query was given twice (runtime and checkpoint) or is missing."""


class UnknownProcessError(CtxPolicyError):
    """A process name that the policy does not declare."""

    def __init__(self, process: str, known: Sequence[str]) -> None:
        self.process = process
        self.known = tuple(known)
        super().__init__(
            f"unknown process {process!r}; the policy declares: {', '.join(sorted(known))}"
        )


class PersistenceError(CtxPolicyError):
    """An attempt to persist a layer the policy marks runtime-only (or a misuse of state)."""


class CollectorError(CtxPolicyError):
    """A collector failed (raised, timed out or returned a wrong type) with ``on_error: fail``."""

    def __init__(self, layer: str, message: str) -> None:
        self.layer = layer
        super().__init__(f"collector of layer {layer!r} failed: {message}")
