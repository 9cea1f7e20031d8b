"""Semantic rules as pure functions over a typed `Policy` (policies built in code)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ctxpolicy.loading import resolve_policy
from ctxpolicy.policy import Policy
from ctxpolicy.validation import check_policy
from ctxpolicy.validation.files import resolve_inside
from ctxpolicy.validation.semantic import check_semantics


def _policy(**extra: Any) -> Policy:
    return Policy.model_validate({"version": 1, "name": "t", **extra})


def _rules(policy: Policy) -> set[str]:
    return {f.rule for f in check_policy(policy) if f.severity == "error"}


def test_default_policy_has_no_findings() -> None:
    assert check_policy(_policy()) == []


@pytest.mark.parametrize(
    ("extra", "rule", "path"),
    [
        (
            {"budget": {"ratios": {"query": 0.6, "system_prompt": 0.5}}},
            "budget.ratios-sum",
            ("budget", "ratios"),
        ),
        (
            {"order": ["query", "checkpoint_messages", "system_prompt"]},
            "order.starts-with-system-prompt",
            ("order", 0),
        ),
        (
            {"order": ["system_prompt", "query", "checkpoint_messages"]},
            "order.ends-with-query",
            ("order", 2),
        ),
        (
            {"layers": {"framework__context": {"persist": True}}},
            "persist.framework",
            ("layers", "framework__context", "persist"),
        ),
        (
            {"processes": {"react": {}, "mapreduce_x": {"query": "runtime"}}},
            "process.mapreduce-history",
            ("processes", "mapreduce_x", "checkpoint_messages"),
        ),
        (
            {"processes": {"react": {"include": ["x__context"]}}},
            "process.include-unknown",
            ("processes", "react", "include", 0),
        ),
        ({"default_process": "other"}, "process.default-missing", ("default_process",)),
    ],
)
def test_rule_returns_path_message_and_id(extra: dict[str, Any], rule: str, path: tuple) -> None:
    findings = [f for f in check_semantics(_policy(**extra)) if f.rule == rule]
    assert findings, check_semantics(_policy(**extra))
    assert findings[0].path == path
    assert findings[0].message


def test_ratios_with_float_rounding_are_not_over_one() -> None:
    ratios = {"system_prompt": 0.1, "query": 0.2, "checkpoint_messages": 0.7}
    assert "budget.ratios-sum" not in _rules(_policy(budget={"ratios": ratios}))


def test_team_layer_in_order_without_any_use_is_a_warning() -> None:
    order = ["system_prompt", "notes__context", "checkpoint_messages", "query"]
    findings = check_semantics(_policy(order=order))
    assert [(f.rule, f.severity) for f in findings] == [("order.unused-layer", "warning")]


@pytest.mark.parametrize("key", ["include", "exclude"])
def test_team_layer_used_only_by_a_process_rule_is_not_unused(key: str) -> None:
    order = ["system_prompt", "notes__context", "checkpoint_messages", "query"]
    policy = _policy(order=order, processes={"react": {key: ["notes__context"]}})
    assert "order.unused-layer" not in {f.rule for f in check_semantics(policy)}


def test_default_processes_may_name_layers_the_order_leaves_out() -> None:
    order = ["system_prompt", "checkpoint_messages", "query"]
    assert _rules(_policy(order=order)) == set()
    explicit = _policy(order=order, processes={"react": {"include": ["knowledge__context"]}})
    assert _rules(explicit) == {"process.include-unknown"}


def test_inline_template_syntax_error_offsets_into_the_template() -> None:
    layers = {
        "framework__context": {"collector": {"type": "template", "template": "a\nb\n{% if %}"}}
    }
    (finding,) = check_policy(_policy(layers=layers))
    assert finding.rule == "template.syntax" and finding.line_offset == 2


def test_template_files_are_not_checked_without_a_source_folder() -> None:
    layers = {
        "todo__context": {
            "collector": {"type": "state", "field": "todo", "template_file": "../../x.j2"}
        }
    }
    assert check_policy(_policy(layers=layers)) == []


def test_resolve_inside(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "secret").mkdir()
    os.symlink(tmp_path / "secret", tmp_path / "in" / "link")
    assert resolve_inside(tmp_path / "in", "a/b.j2")[0] == tmp_path / "in" / "a" / "b.j2"
    assert resolve_inside(tmp_path / "in", "a/../b.j2")[0] == tmp_path / "in" / "b.j2"
    assert resolve_inside(tmp_path / "in", "/etc/passwd")[1] == "path.absolute"
    assert resolve_inside(tmp_path / "in", "../secret/x")[1] == "path.outside"
    assert resolve_inside(tmp_path / "in", "link/x.j2")[1] == "path.symlink-outside"


def test_symlink_escape_is_reported_at_the_template_file_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outside.j2").write_text("secret", encoding="utf-8")
    (tmp_path / "pol").mkdir()
    os.symlink(tmp_path / "outside.j2", tmp_path / "pol" / "t.j2")
    (tmp_path / "pol" / "p.yaml").write_text(
        "version: 1\nname: t\nlayers:\n  todo__context:\n    collector:\n"
        "      type: state\n      field: todo\n      template_file: t.j2\n",
        encoding="utf-8",
    )
    issues = resolve_policy("pol/p.yaml").issues
    assert [(i.file, i.line, i.rule) for i in issues] == [("pol/p.yaml", 8, "path.symlink-outside")]


def test_files_root_outside_and_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    base = "version: 1\nname: t\nlayers:\n  knowledge__context:\n    collector:\n"
    Path("a.yaml").write_text(
        base + "      {type: files, root: docs, select: [x.md]}\n", encoding="utf-8"
    )
    Path("b.yaml").write_text(
        base + "      {type: files, root: /srv, select: [x.md]}\n", encoding="utf-8"
    )
    (missing,) = resolve_policy("a.yaml").issues
    assert (missing.rule, missing.severity) == ("files.root-missing", "warning")
    (absolute,) = resolve_policy("b.yaml").issues
    assert (absolute.rule, absolute.line) == ("path.absolute", 6)


@pytest.mark.parametrize(
    ("tag", "line"),
    [
        ("{% include 'other.j2' %}", 2),
        ("{% import 'macros.j2' as m %}", 2),
        ("{% from 'macros.j2' import f %}", 2),
        ("{% extends 'base.j2' %}", 2),
    ],
)
def test_template_loading_tags_are_refused_at_validation(
    tmp_path: Path, tag: str, line: int
) -> None:
    from ctxpolicy.loading import validate_paths

    policy = tmp_path / "p.yaml"
    policy.write_text(
        "version: 1\nname: p\nlayers:\n  framework__context:\n    collector:\n"
        f"      type: template\n      template: |\n        first line\n        {tag}\n",
        encoding="utf-8",
    )
    issues = [i for i in validate_paths([policy]) if i.severity == "error"]
    assert [i.rule for i in issues] == ["template.syntax"]
    assert "cannot load other templates" in issues[0].message
    assert issues[0].line == 7 + line  # the `template: |` key is line 7; offset into the text


def test_self_recursive_macro_is_a_clear_sandbox_error() -> None:
    from jinja2.exceptions import SecurityError

    from ctxpolicy.templates import render_template

    with pytest.raises(SecurityError, match="recursion is too deep"):
        render_template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {})


def test_files_select_escapes_are_validation_errors_at_their_entry(tmp_path: Path) -> None:
    from ctxpolicy.loading import validate_paths

    (tmp_path / "docs").mkdir()
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "version: 1\nname: p\nlayers:\n  knowledge__context:\n    collector:\n"
        "      type: files\n      root: docs\n      select:\n"
        "        - guide.md:1:3\n"  # line 9: fine
        "        - /etc/passwd\n"  # line 10
        "        - ../../secret.md#Goals\n",  # line 11
        encoding="utf-8",
    )
    found = sorted((i.line, i.rule) for i in validate_paths([policy]) if i.severity == "error")
    assert found == [(10, "path.absolute"), (11, "path.outside")]


# ------------------------------------------------- persist on a state-collector layer


@pytest.mark.parametrize(
    ("layer", "path"),
    [
        (
            {"persist": True, "collector": {"type": "state", "field": "todo"}},
            ("layers", "todo__context", "persist"),
        ),
        ({"collector": {"type": "state", "field": "todo"}}, None),  # runtime-only: fine
        ({"persist": True, "collector": {"type": "state", "field": "todo__context"}}, None),
        ({"persist": False, "collector": {"type": "state", "field": "todo"}}, None),
    ],
)
def test_persisted_state_layer_must_read_its_own_field(
    layer: dict[str, Any], path: tuple[str, ...] | None
) -> None:
    findings = [
        f
        for f in check_semantics(_policy(layers={"todo__context": layer}))
        if f.rule == "persist.state-field"
    ]
    assert [f.path for f in findings] == ([] if path is None else [path])
    if findings:
        assert "state['todo']" in findings[0].message
        assert "field: todo__context" in findings[0].message


def test_layer_persisted_by_default_reading_another_field_is_an_error() -> None:
    compression = {"collector": {"type": "state", "field": "summary"}}
    (finding,) = [
        f
        for f in check_semantics(_policy(layers={"compression__context": compression}))
        if f.rule == "persist.state-field"
    ]
    assert finding.path == ("layers", "compression__context", "collector", "field")
    assert "persisted by default" in finding.message


def test_persisted_state_layer_is_reported_at_file_line_column(tmp_path: Path) -> None:
    from ctxpolicy.loading import validate_paths

    policy = tmp_path / "p.yaml"
    policy.write_text(
        "version: 1\nname: p\nlayers:\n  todo__context:\n"
        "    collector: {type: state, field: todo}\n"
        "    persist: true\n",  # line 6, column 5
        encoding="utf-8",
    )
    issues = [i for i in validate_paths([policy]) if i.severity == "error"]
    assert [(i.file, i.line, i.column, i.rule) for i in issues] == [
        (str(policy), 6, 5, "persist.state-field")
    ]
    assert "never reads back" in issues[0].message


def test_bundled_policies_persist_only_layers_that_read_their_own_field() -> None:
    from ctxpolicy.loading import validate_paths

    policies = Path(__file__).resolve().parents[2] / "policies"
    assert [i for i in validate_paths([policies]) if i.rule == "persist.state-field"] == []
