"""ctxpolicy: declarative context policies for multi-agent LLM systems.

The public surface is small and re-exported here. Names are resolved lazily so that
``import ctxpolicy`` (and ``ctxpolicy validate``) never pay for langchain-core or
tiktoken until a caller actually composes messages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # loading and validation
    "load_policy": "ctxpolicy.loading",
    "validate_paths": "ctxpolicy.loading",
    "Policy": "ctxpolicy.policy",
    "PolicyIssue": "ctxpolicy.diagnostics",
    # engine
    "PolicyEngine": "ctxpolicy.engine",
    "ComposeResult": "ctxpolicy.engine",
    "LayerPlan": "ctxpolicy.plan",
    "compose_messages": "ctxpolicy.compose",
    # errors
    "CtxPolicyError": "ctxpolicy.errors",
    "PolicyValidationError": "ctxpolicy.errors",
    "BudgetExceededError": "ctxpolicy.errors",
    "QueryPathError": "ctxpolicy.errors",
    "UnknownProcessError": "ctxpolicy.errors",
    "PersistenceError": "ctxpolicy.errors",
    "CollectorError": "ctxpolicy.errors",
}

__all__ = [
    "BudgetExceededError",
    "CollectorError",
    "ComposeResult",
    "CtxPolicyError",
    "LayerPlan",
    "PersistenceError",
    "Policy",
    "PolicyEngine",
    "PolicyIssue",
    "PolicyValidationError",
    "QueryPathError",
    "UnknownProcessError",
    "__version__",
    "compose_messages",
    "load_policy",
    "validate_paths",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxpolicy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from ctxpolicy.compose import compose_messages
    from ctxpolicy.diagnostics import PolicyIssue
    from ctxpolicy.engine import ComposeResult, PolicyEngine
    from ctxpolicy.errors import (
        BudgetExceededError,
        CollectorError,
        CtxPolicyError,
        PersistenceError,
        PolicyValidationError,
        QueryPathError,
        UnknownProcessError,
    )
    from ctxpolicy.loading import load_policy, validate_paths
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy
