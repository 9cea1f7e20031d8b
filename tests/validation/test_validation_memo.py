"""What one validation run remembers, so that many team files extending one base stay fast.

``ctxpolicy validate`` hands every file of a run the same memo (`DocumentCache.checks`):
each section a base shares with its team files is checked by the compiled schema once,
each template file is compiled once per file state, and the cache-order rule plans each
distinct process rule once for policies that plan alike. These tests count the work done
(a counting wrapper around the real function) and check that the findings stay right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxpolicy.diagnostics import Finding, JsonPath
from ctxpolicy.plan import plan_layers
from ctxpolicy.policy import Policy
from ctxpolicy.validation import (
    build_policy,
    check_policy,
    check_schema,
    files,
    schema_check,
    semantic,
    validate_data,
)
from ctxpolicy.validation.files import check_files
from ctxpolicy.validation.semantic import check_cache_order

ORDER = ["system_prompt", "knowledge__context", "todo__context", "checkpoint_messages", "query"]
TEMPLATE_AT = ("layers", "todo__context", "collector", "template_file")
BROKEN_TEMPLATE = "{% if %}"


def _base() -> dict[str, Any]:
    """The sections a base file gives every team file (the same objects in each)."""
    return {
        "order": list(ORDER),
        "layers": {
            "knowledge__context": {"collector": {"type": "retriever", "service": "knowledge"}},
            "todo__context": {
                "collector": {"type": "state", "field": "todo", "template_file": "todo.j2"}
            },
        },
        "processes": {
            "a": {"checkpoint_messages": True},
            "b": {"checkpoint_messages": True},
            "c": {"checkpoint_messages": False, "query": "runtime"},
        },
        "default_process": "a",
    }


def _team(base: dict[str, Any], name: str, **extra: Any) -> dict[str, Any]:
    """A team file's merged data: its own name, the base's sections as they are."""
    return {"version": 1, "name": name, **base, **extra}


def _memo() -> dict[Hashable, Any]:
    return {}


# --- template files: compiled once per file state ------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "todo.j2").write_text(BROKEN_TEMPLATE, encoding="utf-8")
    return tmp_path


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, JsonPath]]:
    """Each template file worked out (``files._template_file``), in order."""
    calls: list[tuple[str, JsonPath]] = []
    original = files._template_file

    def counting(base: Path, relative: str, path: JsonPath) -> Iterator[Finding]:
        calls.append((relative, path))
        yield from original(base, relative, path)

    monkeypatch.setattr(files, "_template_file", counting)
    return calls


def _template_findings(findings: list[Finding]) -> list[tuple[Any, ...]]:
    return [
        (f.path, f.rule, f.severity, f.file, f.line, f.message.startswith("template syntax error"))
        for f in findings
        if f.rule.startswith("template")
    ]


def _syntax_error(folder: Path) -> list[tuple[Any, ...]]:
    target = str((folder / "todo.j2").absolute())
    return [(TEMPLATE_AT, "template.syntax", "error", target, 1, True)]


def _policies(folder: Path) -> tuple[Policy, Policy]:
    base = _base()
    first, _ = build_policy(_team(base, "team-a"), source=folder / "a.yaml")
    second, _ = build_policy(_team(base, "team-b"), source=folder / "b.yaml")
    assert first is not None and second is not None
    return first, second


def test_check_files_compiles_a_shared_template_file_once_per_file_state(
    folder: Path, compiled: list[tuple[str, JsonPath]]
) -> None:
    first, second = _policies(folder)
    compiled.clear()
    memo = _memo()
    assert _template_findings(check_files(first, memo=memo)) == _syntax_error(folder)
    assert _template_findings(check_files(second, memo=memo)) == _syntax_error(folder)
    assert compiled == [("todo.j2", TEMPLATE_AT)]
    # the file changes: worked out again, once, for both policies
    (folder / "todo.j2").write_text("{{ state.todo }} fixed", encoding="utf-8")
    assert check_files(first, memo=memo) == []
    assert check_files(second, memo=memo) == []
    assert len(compiled) == 2
    # without a memo every file is worked out again
    assert _template_findings(check_files(first)) == []
    assert len(compiled) == 3


def test_check_policy_hands_its_memo_to_the_file_rules(
    folder: Path, compiled: list[tuple[str, JsonPath]]
) -> None:
    first, second = _policies(folder)
    compiled.clear()
    memo = _memo()
    assert _template_findings(check_policy(first, memo=memo)) == _syntax_error(folder)
    assert _template_findings(check_policy(second, memo=memo)) == _syntax_error(folder)
    assert len(compiled) == 1


def test_build_policy_compiles_a_shared_template_file_once(
    folder: Path, compiled: list[tuple[str, JsonPath]]
) -> None:
    base = _base()
    memo = _memo()
    for name in ("team-a", "team-b", "team-c"):
        policy, findings = build_policy(_team(base, name), source=folder / "p.yaml", memo=memo)
        assert policy is not None
        assert _template_findings(findings) == _syntax_error(folder)
    assert len(compiled) == 1


def test_a_file_with_schema_errors_still_shares_the_compiled_template_file(
    folder: Path, compiled: list[tuple[str, JsonPath]]
) -> None:
    base = _base()
    memo = _memo()
    for name in ("team-a", "team-b"):
        data = _team(base, name, model={"tokenizer": "nope"})
        policy, findings = build_policy(data, source=folder / "p.yaml", memo=memo)
        assert policy is None
        assert [f.rule for f in findings] == ["schema.enum", "template.syntax"]
        assert _template_findings(findings) == _syntax_error(folder)
    assert len(compiled) == 1


def test_validate_data_compiles_a_shared_template_file_once(
    folder: Path, compiled: list[tuple[str, JsonPath]]
) -> None:
    base = _base()
    memo = _memo()
    for name in ("team-a", "team-b"):
        policy, issues = validate_data(
            _team(base, name), {}, file=f"{name}.yaml", source=folder / "p.yaml", memo=memo
        )
        assert policy is None  # the template does not compile
        assert [(i.rule, i.path) for i in issues if i.severity == "error"] == [
            ("template.syntax", "$.layers.todo__context.collector.template_file")
        ]
    assert len(compiled) == 1


# --- the schema: each shared section checked once -------------------------------------------


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each compiled section check ran, the compiled whole-document check
    (``<document>``) and jsonschema (``<jsonschema>``)."""
    counts: Counter[str] = Counter()

    def counting(key: str, check: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def run(value: Any) -> bool:
            counts[key] += 1
            return check(value)

        return run

    sections = schema_check._fast_sections()
    whole = schema_check._fast_check()
    validator = schema_check._validator
    assert sections is not None and whole is not None
    required, checks = sections
    split = (required, {key: counting(key, check) for key, check in checks.items()})
    document = counting("<document>", whole)

    def counted_validator() -> Any:
        counts["<jsonschema>"] += 1
        return validator()

    monkeypatch.setattr(schema_check, "_fast_sections", lambda: split)
    monkeypatch.setattr(schema_check, "_fast_check", lambda: document)
    monkeypatch.setattr(schema_check, "_validator", counted_validator)
    return counts


#: Two team files' checks: the base's sections (order, layers, processes and
#: default_process) once, each file's own scalars each time.
SHARED_ONCE = {
    "version": 2,
    "name": 2,
    "order": 1,
    "layers": 1,
    "processes": 1,
    "default_process": 2,
}


def test_check_schema_checks_each_shared_section_once(checked: Counter[str]) -> None:
    base = _base()
    memo = _memo()
    assert check_schema(_team(base, "team-a"), memo=memo) == []
    assert check_schema(_team(base, "team-b"), memo=memo) == []
    assert dict(checked) == SHARED_ONCE
    # an equal but other mapping (another base) is checked on its own
    other = _base()
    assert check_schema(_team({**base, "layers": other["layers"]}, "team-c"), memo=memo) == []
    assert checked["layers"] == 2 and checked["order"] == 1


def test_check_schema_without_a_memo_checks_the_whole_document(checked: Counter[str]) -> None:
    base = _base()
    assert check_schema(_team(base, "team-a")) == []
    assert check_schema(_team(base, "team-b")) == []
    assert dict(checked) == {"<document>": 2}  # never jsonschema for a valid document


def test_a_remembered_invalid_section_is_still_explained_in_every_file(
    checked: Counter[str],
) -> None:
    model = {"tokenizer": "nope"}
    memo = _memo()
    for name in ("team-a", "team-b"):
        findings = check_schema({"version": 1, "name": name, "model": model}, memo=memo)
        assert [(f.path, f.rule) for f in findings] == [(("model", "tokenizer"), "schema.enum")]
    assert checked["model"] == 1
    assert checked["<jsonschema>"] == 2
    assert checked["<document>"] == 0


def test_build_policy_checks_each_shared_section_once(checked: Counter[str]) -> None:
    base = _base()
    memo = _memo()
    for name in ("team-a", "team-b"):
        policy, findings = build_policy(_team(base, name), memo=memo)
        assert policy is not None and policy.name == name
        assert {f.rule for f in findings} == {"order.cache-breaker"}
    assert dict(checked) == SHARED_ONCE


def test_validate_data_checks_each_shared_section_once(checked: Counter[str]) -> None:
    base = _base()
    memo = _memo()
    for name in ("team-a", "team-b"):
        policy, issues = validate_data(_team(base, name), {}, file=f"{name}.yaml", memo=memo)
        assert policy is not None and policy.name == name
        assert {i.rule for i in issues} == {"order.cache-breaker"}
    assert dict(checked) == SHARED_ONCE


# --- the cache-order rule: each distinct process rule planned once --------------------------


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """``(policy, process)`` of each plan made, in order; nothing remembered before."""
    calls: list[tuple[str, str]] = []
    original = plan_layers

    def counting(policy: Policy, process: str, *args: Any, **kwargs: Any) -> Any:
        calls.append((policy.name, process))
        return original(policy, process, *args, **kwargs)

    monkeypatch.setattr(semantic, "_PLANS", {})
    monkeypatch.setattr(semantic, "plan_layers", counting)
    return calls


def _policy(name: str, **extra: Any) -> Policy:
    policy, _ = build_policy(_team(_base(), name, **extra))
    assert policy is not None
    return policy


def _warnings(name: str) -> list[Finding]:
    def text(after: str) -> str:
        return (
            "knowledge__context (retriever) changes with every query but is ordered before "
            f"stable layers {after}: their prompt-cache prefix is lost on every call of policy "
            f"{name}; order per-query layers after stable ones or set "
            "layers.knowledge__context.cache: volatile-ok"
        )

    return [
        Finding(("order", 1), text(after), "order.cache-breaker", severity="warning")
        for after in ("todo__context, checkpoint_messages", "todo__context")
    ]


def test_processes_with_equal_rules_are_planned_once(planned: list[tuple[str, str]]) -> None:
    policy = _policy("team-a")
    semantic._PLANS.clear()
    planned.clear()
    assert list(check_cache_order(policy)) == _warnings("team-a")
    assert planned == [("team-a", "a"), ("team-a", "c")]  # b's rule equals a's


def test_policies_that_plan_alike_are_planned_once(planned: list[tuple[str, str]]) -> None:
    policies = [
        _policy("team-a"),
        _policy("team-b"),
        _policy("team-c", model={"context_window": 1}),  # no token available: same layers
        _policy("team-d", model={"context_window": 1_000_000}),
    ]
    assert policies[2].available_tokens == 0
    other = _policy("team-e", budget={"output_reserve": 0.2})
    semantic._PLANS.clear()
    planned.clear()
    for policy in policies:
        assert list(check_cache_order(policy)) == _warnings(policy.name)
    assert planned == [("team-a", "a"), ("team-a", "c")]
    # another budget plans other caps: planned on its own, then remembered too
    assert list(check_cache_order(other)) == _warnings("team-e")
    assert list(check_cache_order(other)) == _warnings("team-e")
    assert planned[2:] == [("team-e", "a"), ("team-e", "c")]


def test_the_remembered_plans_stay_bounded(
    planned: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "_PLANS_MAX", 2)
    policies = [
        _policy(f"team-{index}", budget={"output_reserve": index / 10}) for index in (1, 2, 3)
    ]
    semantic._PLANS.clear()
    planned.clear()
    for policy in policies:
        assert list(check_cache_order(policy)) == _warnings(policy.name)
        assert len(semantic._PLANS) <= 2
    assert len(planned) == 6
    # the third policy cleared what the first two left: the first is planned again
    assert list(check_cache_order(policies[0])) == _warnings("team-1")
    assert planned[6:] == [("team-1", "a"), ("team-1", "c")]
