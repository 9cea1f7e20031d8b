"""The public surface of ``ctxpolicy`` is a contract (DESIGN §4): pin it."""

from __future__ import annotations

import subprocess
import sys

import ctxpolicy

EXPECTED = {
    "BudgetExceededError",
    "CollectorError",
    "ComposeResult",
    "CtxPolicyError",
    "LayerPlan",
    "Policy",
    "PolicyEngine",
    "PolicyIssue",
    "PolicyValidationError",
    "PersistenceError",
    "QueryPathError",
    "UnknownProcessError",
    "compose_messages",
    "load_policy",
    "validate_paths",
    "__version__",
}


def test_all_is_pinned() -> None:
    assert set(ctxpolicy.__all__) == EXPECTED


def test_all_matches_the_lazy_export_table() -> None:
    assert set(ctxpolicy.__all__) == {*ctxpolicy._EXPORTS, "__version__"}


def test_every_exported_name_resolves() -> None:
    for name in ctxpolicy.__all__:
        assert getattr(ctxpolicy, name) is not None, name


def test_errors_share_one_base() -> None:
    for name in (
        "PolicyValidationError",
        "BudgetExceededError",
        "QueryPathError",
        "UnknownProcessError",
        "PersistenceError",
        "CollectorError",
    ):
        assert issubclass(getattr(ctxpolicy, name), ctxpolicy.CtxPolicyError)


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        _ = ctxpolicy.no_such_name  # type: ignore[attr-defined]
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_import_is_light() -> None:
    code = (
        "import sys, ctxpolicy\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('langchain_core', 'tiktoken', 'langgraph', 'jinja2')]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == ""


def test_a_validation_error_titles_its_issues() -> None:
    from ctxpolicy.errors import MissingServiceError

    issues = [
        ctxpolicy.PolicyIssue("团队.yaml", 3, 5, "$.layers.a", f"service {n!r} 未提供", "s")
        for n in ("kb", "记忆")
    ]
    plain = ctxpolicy.PolicyValidationError(issues)
    assert str(plain).startswith("invalid policy (2 error(s)):\n团队.yaml:3:5: $.layers.a")
    titled = ctxpolicy.PolicyValidationError(issues, title="两个问题")
    assert str(titled).startswith("两个问题:\n团队.yaml:3:5:")
    missing = MissingServiceError(issues)
    assert str(missing) == (
        "the policy needs 2 service(s) not given:\n"
        "团队.yaml:3:5: $.layers.a: service 'kb' 未提供 [s]\n"
        "团队.yaml:3:5: $.layers.a: service '记忆' 未提供 [s]"
    )
    assert missing.args == (str(missing),) and missing.issues == tuple(issues)
