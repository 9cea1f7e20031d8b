"""Every hostile input: `validate_paths` and `load_policy` give issues with file, line and
column (or a valid policy), never an uncaught exception; the in-process CLI agrees."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxpolicy.cli import main
from ctxpolicy.diagnostics import PolicyIssue
from ctxpolicy.errors import PolicyValidationError
from ctxpolicy.loading import load_policy, validate_paths
from ctxpolicy.policy import Policy
from tests.hostile.cases import ANY, INVALID, Case, all_cases, committed_cases

CASES = {case.name: case for case in all_cases()}
TEXT_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): \S.* \[[a-z0-9.-]+\]$")
GITHUB_LINE = re.compile(r"^::(error|warning) file=[^,]+,line=\d+,col=\d+(,title=[^:]+)?::")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENABLE_SHARE_CONTEXT", "POLICY", "TOKENIZER", "CONTEXT_WINDOW"):
        monkeypatch.delenv(f"CTXPOLICY_{name}", raising=False)


def check_issue(issue: PolicyIssue) -> None:
    assert isinstance(issue, PolicyIssue)
    assert isinstance(issue.file, str)
    assert issue.file
    assert isinstance(issue.line, int)
    assert isinstance(issue.column, int)
    assert issue.line >= 1, issue
    assert issue.column >= 1, issue
    assert issue.message.strip()
    assert issue.severity in ("error", "warning")
    assert "Traceback" not in issue.message


def outcome(case: Case, issues: list[PolicyIssue]) -> bool:
    """Whether the case validated, checked against what the case expects."""
    errors = [i for i in issues if i.severity == "error"]
    if case.expected == "valid":
        assert not errors, [i.format_text() for i in errors]
    elif case.expected == INVALID:
        assert errors
    elif case.expected != ANY:
        assert case.expected in {i.rule for i in errors}, [i.format_text() for i in issues]
    return not errors


@pytest.mark.parametrize("name", CASES)
def test_loader_and_validator_report_issues_never_crash(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    target = case.write(tmp_path)
    issues = validate_paths([target])
    for issue in issues:
        check_issue(issue)
    valid = outcome(case, issues)
    if valid:
        assert isinstance(load_policy(target), Policy)
    else:
        with pytest.raises(PolicyValidationError) as caught:
            load_policy(target)
        assert caught.value.issues
        for issue in caught.value.issues:
            check_issue(issue)
        assert {i.rule for i in caught.value.issues} <= {i.rule for i in issues}


@pytest.mark.parametrize("name", CASES)
def test_cli_in_process_exits_cleanly_in_every_format(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    case.write(tmp_path)
    monkeypatch.chdir(tmp_path)
    codes = set()
    for fmt in ("text", "json", "github"):
        code = main(["validate", "--format", fmt, case.target])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        codes.add(code)
        if code == 0:
            continue
        assert code == 1, (fmt, out, err)
        if fmt == "text":
            errors = [line for line in out.splitlines() if TEXT_LINE.match(line)]
            assert errors, out
        elif fmt == "json":
            payload = json.loads(out)
            assert payload["valid"] is False
            assert all(i["line"] >= 1 and i["column"] >= 1 for i in payload["issues"])
        else:
            assert any(GITHUB_LINE.match(line) for line in out.splitlines()), out
    assert len(codes) == 1  # every format agrees
    code = main(["show", case.target])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == codes.pop()
    if code == 1:
        assert err.strip()
        assert all(TEXT_LINE.match(line) for line in err.splitlines() if line.strip()), err


def test_corpus_names_an_expectation_for_every_entry() -> None:
    cases = committed_cases()
    assert len(cases) >= 80
    rules = {c.expected for c in cases}
    assert "valid" in rules
    assert {"yaml.tag", "schema.unknown-key", "extends.cycle", "toml.syntax"} <= rules


def test_bom_and_crlf_give_exactly_the_policy_without_them(tmp_path: Path) -> None:
    plain = load_policy(Path(__file__).resolve().parents[2] / "policies" / "base.yaml")
    case = CASES["bom-crlf-base.yaml"]
    twisted = load_policy(case.write(tmp_path))
    assert twisted.to_data() == plain.to_data()


def test_yaml_python_tags_are_never_constructed(tmp_path: Path) -> None:
    flag = tmp_path / "pwned"
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "version: 1\nname: t\nvars:\n"
        f'  x: !!python/object/apply:os.system ["touch {flag}"]\n'
        "  y: !!python/object/apply:pathlib.Path.touch\n"
        f'    [!!python/object/apply:pathlib.Path ["{flag}"]]\n'
    )
    issues = validate_paths([policy])
    tags = [(i.line, i.column) for i in issues if i.rule == "yaml.tag"]
    assert tags[:1] == [(4, 3)]
    assert not flag.exists()


def test_confusable_key_names_the_real_key(tmp_path: Path) -> None:
    case = CASES["corpus/schema.unknown-key__cyrillic-a-in-layers.yaml"]
    issues = validate_paths([case.write(tmp_path)])
    (issue,) = [i for i in issues if i.rule == "schema.unknown-key"]
    assert (issue.line, issue.column) == (3, 1)


@pytest.mark.parametrize(
    "name",
    [
        "corpus/template.syntax__template-include-itself.yaml",
        "corpus/template.syntax__template-file-includes-itself",
        "corpus/template.syntax__template-file-mutual-imports",
    ],
)
def test_templates_that_load_templates_are_refused_with_their_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    case.write(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["preview", case.target, "--process", "react", "--query", "hi"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out + err
    assert "cannot load other templates" in err and err.rstrip().endswith("[template.syntax]")
    assert re.search(r":\d+:\d+: ", err)  # FILE:LINE:COL


@pytest.mark.parametrize("name", ["corpus/valid__template-recursive-macro.yaml"])
def test_recursive_templates_compose_with_the_layer_reported_not_a_crash(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    case.write(tmp_path)
    (tmp_path / "state.json").write_text(
        '{"messages": [{"type": "human", "content": "hi"}], "todo": "x"}'
    )
    monkeypatch.chdir(tmp_path)
    code = main(
        ["preview", case.target, "--process", "react", "--state", "state.json", "--format", "json"]
    )
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 0, err
    layers = {layer["name"]: layer for layer in json.loads(out)["report"]["layers"]}
    broken = [n for n, layer in layers.items() if "collector skipped" in json.dumps(layer)]
    assert broken, layers
