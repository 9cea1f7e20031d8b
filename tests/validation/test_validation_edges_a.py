"""Edges of the validation entry points and the file rules (exact findings)."""

from __future__ import annotations

import locale
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import ctxpolicy.validation as validation
from ctxpolicy.diagnostics import MAX_FILE_BYTES, Finding, Location
from ctxpolicy.policy import Policy
from ctxpolicy.validation import (
    _model_findings,
    _order_locations,
    _rules_on_valid_parts,
    build_policy,
    validate_data,
)
from ctxpolicy.validation.files import (
    _check_tool_roots,
    _compile,
    _declared_tool_roots,
    _layer_files,
    _select_escapes,
    _template_file,
    check_files,
    resolve_inside,
)

BAD_TEMPLATE = "a\n{% if %}"
BAD_MESSAGE = "template syntax error: Expected an expression, got 'end of statement block'"


def _policy(**extra: Any) -> Policy:
    return Policy.model_validate({"version": 1, "name": "t", **extra})


# ------------------------------------------------------------------ _model_findings


def test_model_findings_of_a_plain_value_error() -> None:
    assert _model_findings(ValueError("boom")) == [Finding((), "boom", "schema.model")]


def test_model_findings_keep_ints_and_plain_keys_of_the_location() -> None:
    exc = ValidationError.from_exception_data(
        "T",
        [
            {
                "type": "missing",
                "loc": ("layers", 0, "tagged[x]", "a-b", "x[a-b]", "root"),
                "input": {},
            },
            {"type": "missing", "loc": ("name",), "input": {}},
        ],
    )
    assert _model_findings(exc) == [
        Finding(("layers", 0, "root"), "Field required", "schema.model"),
        Finding(("name",), "Field required", "schema.model"),
    ]


def test_build_policy_reports_model_errors_the_schema_missed(monkeypatch) -> None:
    monkeypatch.setattr(validation, "check_schema", lambda data, memo=None: [])
    policy, findings = build_policy({"version": 1, "name": "t", "layers": 3})
    assert policy is None
    assert [(f.path, f.rule, f.severity) for f in findings] == [
        (("layers",), "schema.model", "error")
    ]
    assert findings[0].message.startswith("Input should be a valid dictionary")


# ------------------------------------------------------------------ _order_locations


def test_order_locations_only_name_real_file_positions() -> None:
    policy = _policy()
    order = policy.order
    assert len(order) >= 4
    sourcemap = {
        ("order", 0): Location("p.yaml", 1, 3),
        ("order", 1): Location("p.yaml", 0, 0),
        ("order", 2): Location("<env X>", 5, 1),
        ("order", 3): Location("p.yaml", 7, 5),
    }
    assert _order_locations(policy, sourcemap) == {
        order[0]: "p.yaml:1:3",
        order[3]: "p.yaml:7:5",
    }


def test_validate_data_sets_order_locations_and_drops_policy_on_errors() -> None:
    data = {"version": 1, "name": "t"}
    policy, issues = validate_data(data, {("order", 0): Location("p.yaml", 4, 3)}, file="p.yaml")
    assert issues == []
    assert policy is not None
    assert policy._order_locations == {policy.order[0]: "p.yaml:4:3"}


def test_validate_data_places_unlocated_findings_in_the_file_and_drops_policy() -> None:
    layers = {"framework__context": {"collector": {"type": "template", "template": BAD_TEMPLATE}}}
    policy, issues = validate_data({"version": 1, "name": "t", "layers": layers}, {}, file="p.yaml")
    assert policy is None
    assert [(i.file, i.rule, i.severity) for i in issues] == [
        ("p.yaml", "template.syntax", "error")
    ]


# ------------------------------------------------------- rules on the valid parts


def test_partial_rules_resolve_template_files_against_the_source(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = {
        "version": 1,
        "name": "t",
        "budget": "not a budget",
        "layers": {
            "todo__context": {
                "collector": {"type": "state", "field": "todo", "template_file": "gone.j2"}
            }
        },
    }
    _, findings = build_policy(data, source=tmp_path / "p.yaml")
    missing = [f for f in findings if f.rule == "template.missing"]
    assert missing == [
        Finding(
            ("layers", "todo__context", "collector", "template_file"),
            "template file gone.j2 does not exist",
            "template.missing",
        )
    ]


def test_partial_rules_resolve_against_base_dirs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = {"version": 1, "name": "t", "budget": "not a budget", "tools": {"root": "tl"}}
    _, findings = build_policy(data, base_dirs={"@tools": tmp_path})
    assert [f for f in findings if f.rule == "files.root-missing"] == [
        Finding(("tools", "root"), "tools root tl is not a folder", "files.root-missing", "warning")
    ]


def test_rules_on_valid_parts_of_non_mapping_data() -> None:
    errors = [Finding(("layers",), "bad", "schema.type")]
    assert _rules_on_valid_parts([1], errors, source=None, base_dirs=None) == []


# ---------------------------------------------------------------------- file rules


def test_compile_names_the_template_file_line() -> None:
    assert list(_compile(BAD_TEMPLATE, ("p",), file="t.j2")) == [
        Finding(("p",), BAD_MESSAGE, "template.syntax", file="t.j2", line=2, column=1)
    ]


def test_template_file_outside_and_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pol").mkdir()
    (tmp_path / "pol" / "dir.j2").mkdir()
    base = tmp_path / "pol"
    assert list(_template_file(base, "../x.j2", ("p",))) == [
        Finding(("p",), "'../x.j2' leaves the policy's folder pol", "path.outside")
    ]
    assert list(_template_file(base, "dir.j2", ("p",))) == [
        Finding(("p",), "template file pol/dir.j2 does not exist", "template.missing")
    ]


def test_template_file_size_limit_is_inclusive(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "max.j2").write_text("a" * MAX_FILE_BYTES, encoding="utf-8")
    (tmp_path / "big.j2").write_text("a" * (MAX_FILE_BYTES + 1), encoding="utf-8")
    assert list(_template_file(tmp_path, "max.j2", ("p",))) == []
    assert list(_template_file(tmp_path, "big.j2", ("p",))) == [
        Finding(("p",), f"template file big.j2 is over {MAX_FILE_BYTES} bytes", "file.too-large")
    ]


def test_template_file_not_utf8_is_unreadable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.j2").write_bytes(b"\xff\xfe\xfa")
    (finding,) = _template_file(tmp_path, "bad.j2", ("p",))
    assert (finding.path, finding.rule) == (("p",), "template.unreadable")
    assert finding.message.startswith("cannot read template file bad.j2: 'utf-8' codec")


def test_template_file_syntax_error_points_into_the_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.j2").write_text(BAD_TEMPLATE, encoding="utf-8")
    assert list(_template_file(tmp_path, "t.j2", ("p",))) == [
        Finding(("p",), BAD_MESSAGE, "template.syntax", file="t.j2", line=2, column=1)
    ]


def test_template_files_are_read_as_utf8_whatever_the_locale(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "u.j2").write_text("héllo {{ x }}", encoding="utf-8")
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale (unless Python's UTF-8 mode)
    try:
        found = list(_template_file(tmp_path, "u.j2", ("p",)))
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)
    assert found == []


@pytest.mark.parametrize(
    ("entry", "rule"),
    [
        ("[..]", "path.outside"),
        ("[/etc/x]", "path.absolute"),
        ("..:3", "path.outside"),
        ("..#a", "path.outside"),
        ("..#a#b", "path.outside"),
        ("\\x", "path.absolute"),
        ("a", None),
        ("C:", "path.absolute"),
        ("C:x", "path.absolute"),
        ("..\\x", "path.outside"),
        ("guide.md:1:3", None),
    ],
)
def test_select_escapes(entry: str, rule: str | None) -> None:
    found = list(_select_escapes((entry,), ("s",)))
    if rule is None:
        assert found == []
    elif rule == "path.absolute":
        message = f"{entry!r} is absolute; select files relative to the root"
        assert found == [Finding(("s", 0), message, rule)]
    else:
        assert found == [Finding(("s", 0), f"{entry!r} leaves the files root", rule)]


def test_declared_tool_roots() -> None:
    policy = _policy(tools={"root": "tl"}, processes={"agent": {"tools": {"root": "pt"}}})
    assert list(_declared_tool_roots(policy)) == [
        (("tools", "root"), "tl", "@tools"),
        (("processes", "agent", "tools", "root"), "pt", "@processes.agent.tools"),
    ]


def _tools_policy(source: Path | None, base_dirs: dict[str, Path]) -> Policy:
    policy = _policy(tools={"root": "tl"}, processes={"agent": {"tools": {"root": "pt"}}})
    policy._source = source
    policy._base_dirs = base_dirs
    return policy


def _missing(where: tuple, what: str, shown: str) -> Finding:
    return Finding(where, f"{what} root {shown} is not a folder", "files.root-missing", "warning")


def test_tool_roots_resolve_against_their_base_dirs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "src").mkdir()
    policy = _tools_policy(
        tmp_path / "src" / "p.yaml",
        {"@tools": tmp_path / "a", "@processes.agent.tools": tmp_path / "b"},
    )
    assert list(_check_tool_roots(policy)) == [
        _missing(("tools", "root"), "tools", "a/tl"),
        _missing(("processes", "agent", "tools", "root"), "tools", "b/pt"),
    ]


def test_tool_roots_fall_back_to_the_source_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    policy = _tools_policy(tmp_path / "src" / "p.yaml", {})
    assert list(_check_tool_roots(policy)) == [
        _missing(("tools", "root"), "tools", "src/tl"),
        _missing(("processes", "agent", "tools", "root"), "tools", "src/pt"),
    ]


def test_tool_roots_of_a_policy_built_in_code_are_not_checked() -> None:
    assert list(_check_tool_roots(_tools_policy(None, {}))) == []


def test_files_and_references_roots_that_are_not_folders(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    layers = {
        "knowledge__context": {"collector": {"type": "files", "root": "docs", "select": ["x"]}},
        "query": {"references": {"root": "refs"}},
    }
    policy = _policy(layers=layers)
    policy._source = tmp_path / "p.yaml"
    found = check_files(policy)
    assert _missing(("layers", "knowledge__context", "collector", "root"), "files", "docs") in found
    assert _missing(("layers", "query", "references", "root"), "references", "refs") in found
    spec = policy.layers["query"]
    assert list(_layer_files(policy, "query", spec)) == [
        _missing(("layers", "query", "references", "root"), "references", "refs")
    ]


def test_references_root_outside_the_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    policy = _policy(layers={"query": {"references": {"root": "../up"}}})
    policy._source = tmp_path / "p.yaml"
    assert list(_layer_files(policy, "query", policy.layers["query"])) == [
        Finding(
            ("layers", "query", "references", "root"),
            "'../up' leaves the policy's folder .",
            "path.outside",
        )
    ]


def test_references_of_a_policy_built_in_code_are_not_checked() -> None:
    policy = _policy(layers={"query": {"references": {"root": "refs"}}})
    assert list(_layer_files(policy, "query", policy.layers["query"])) == []


# -------------------------------------------------------------------- resolve_inside


@pytest.mark.parametrize("relative", ["/etc/x", "\\x", "C:", "C:x"])
def test_resolve_inside_refuses_absolute_paths(tmp_path: Path, monkeypatch, relative: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_inside(tmp_path, relative) == (
        None,
        "path.absolute",
        f"{relative!r} is absolute; give a path relative to .",
    )


def test_resolve_inside_an_inner_path(tmp_path: Path) -> None:
    assert resolve_inside(tmp_path, "a/b") == (tmp_path / "a" / "b", None, "")
    assert resolve_inside(tmp_path, "ab") == (tmp_path / "ab", None, "")
