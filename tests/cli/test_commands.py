"""`ctxpolicy validate`, `show`, `schema` and the verb dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxpolicy.cli import VERBS, verb_module
from ctxpolicy.cli.reporters import REPORTERS, get_reporter, report_github
from ctxpolicy.diagnostics import PolicyIssue
from ctxpolicy.schema import load_schema

REPO = Path(__file__).resolve().parents[2]
GOOD = "version: 1\nname: good\n"


def test_every_verb_module_has_the_verb_interface() -> None:
    assert VERBS[:3] == ("validate", "show", "schema")
    for verb in VERBS:
        module = verb_module(verb)
        assert isinstance(module.HELP, str) and module.HELP
        assert callable(module.add_arguments) and callable(module.run)


def test_usage_errors_exit_2(run_cli) -> None:
    assert run_cli({}, "frobnicate")[0] == 2
    assert run_cli({}, "validate", "--format", "xml")[0] == 2
    assert run_cli({}, "--version")[0] == 0


def test_validate_valid_files_and_folders(run_cli) -> None:
    code, out, _ = run_cli(
        {"pol/a.yaml": GOOD, "pol/b/c.toml": 'version = 1\nname = "c"\n'}, "validate", "pol"
    )
    assert code == 0
    assert "2 file(s) valid" in out
    code, out, _ = run_cli({}, "validate", "pol", "--format", "json")
    assert json.loads(out) == {
        "format_version": 1,
        "valid": True,
        "files": ["pol/a.yaml", "pol/b/c.toml"],
        "issues": [],
    }


def test_validate_defaults_to_policies_folder(run_cli) -> None:
    code, out, _ = run_cli({"policies/a.yaml": GOOD}, "validate")
    assert code == 0 and "1 file(s) valid" in out


def test_validate_missing_path_or_no_files_exit_2(run_cli) -> None:
    code, out, _ = run_cli({}, "validate", "nowhere.yaml")
    assert code == 2 and "nowhere.yaml: no such file or folder [file.missing]" in out
    code, _, err = run_cli({"empty/readme.md": "x"}, "validate", "empty")
    assert code == 2 and "no policy files" in err


def test_validate_reports_all_files_and_all_issues(run_cli) -> None:
    files = {
        "a.yaml": "version: 1\nname: A\nbugdet: 1\n",
        "b.yaml": GOOD + "name: again\n",
        "c.yaml": GOOD,
    }
    code, out, _ = run_cli(files, "validate", "a.yaml", "b.yaml", "c.yaml", "--format", "json")
    payload = json.loads(out)
    assert code == 1 and payload["valid"] is False
    assert {(i["file"], i["rule"]) for i in payload["issues"]} == {
        ("a.yaml", "schema.pattern"),
        ("a.yaml", "schema.unknown-key"),
        ("b.yaml", "yaml.duplicate-key"),
    }


def test_warnings_do_not_fail_validation(run_cli) -> None:
    text = GOOD + "order: [system_prompt, notes__context, checkpoint_messages, query]\n"
    code, out, _ = run_cli({"w.yaml": text}, "validate", "w.yaml", "--format", "github")
    assert code == 0
    assert out.startswith("::warning file=w.yaml,line=3,")


def test_github_reporter_escapes_properties_and_data() -> None:
    issue = PolicyIssue("a,b:c.yaml", 2, 3, "$.x", "bad\nvalue 100%", "r.x")
    line = report_github(["a,b:c.yaml"], [issue]).strip()
    assert line == (
        "::error file=a%2Cb%3Ac.yaml,line=2,col=3,title=r.x::$.x: bad%0Avalue 100%25 [r.x]"
    )


def test_reporters_by_name() -> None:
    assert set(REPORTERS) == {"text", "json", "github"}
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        get_reporter("xml")


def test_show_prints_the_effective_policy(run_cli, monkeypatch) -> None:
    files = {
        "base.yaml": GOOD + "vars: {a: 1}\n",
        "t.yaml": "version: 1\nname: t\nextends: base.yaml\nvars: {b: 2}\n",
    }
    monkeypatch.setenv("CTXPOLICY_TOKENIZER", "approximate")
    code, out, _ = run_cli(files, "show", "t.yaml", "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert data["vars"] == {"a": 1, "b": 2} and data["model"]["tokenizer"] == "approximate"
    code, out, _ = run_cli({}, "show", "t.yaml")
    assert code == 0 and "name: t\n" in out and "tokenizer: approximate" in out


def test_show_explain(run_cli) -> None:
    files = {
        "base.yaml": GOOD + "vars: {a: 1}\n",
        "t.yaml": "version: 1\nname: t\nextends: base.yaml\n",
    }
    code, out, _ = run_cli(files, "show", "t.yaml", "--explain")
    assert code == 0
    assert "$.vars.a = 1  # base.yaml:3:8" in out
    assert '$.name = "t"  # t.yaml:2:1' in out
    code, out, _ = run_cli({}, "show", "t.yaml", "--explain", "--format", "json")
    rows = {row["path"]: row for row in json.loads(out)}
    assert rows["$.model.context_window"]["source"] == "default"


def test_show_invalid_and_unreadable(run_cli, monkeypatch) -> None:
    code, _, err = run_cli({"bad.yaml": GOOD + "bugdet: 1\n"}, "show", "bad.yaml")
    assert code == 1 and "bad.yaml:3:1:" in err
    assert run_cli({}, "show", "missing.yaml")[0] == 2
    assert run_cli({}, "show")[0] == 2
    monkeypatch.setenv("CTXPOLICY_POLICY", "bad.yaml")
    assert run_cli({}, "show")[0] == 1


def test_schema_prints_the_packaged_schema(run_cli) -> None:
    code, out, _ = run_cli({}, "schema")
    assert code == 0 and json.loads(out) == load_schema()


def test_main_turns_os_errors_into_one_line(run_cli, monkeypatch) -> None:
    import ctxpolicy.cli.schema as schema_verb

    def broken(_args):
        raise PermissionError(13, "Permission denied", "x")

    monkeypatch.setattr(schema_verb, "run", broken)
    code, _out, err = run_cli({}, "schema")
    assert code == 2 and err.count("\n") == 1 and "Permission denied" in err


_HEAVY = "sorted(m for m in sys.modules if m.split('.')[0] in {'langchain_core', 'tiktoken'})"


def _modules_after(code: str) -> list[str]:
    script = f"import sys\n{code}\nprint({_HEAVY})"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    return eval(done.stdout.strip().splitlines()[-1])  # a printed list of names


def test_import_ctxpolicy_is_light() -> None:
    assert _modules_after("import ctxpolicy") == []


def test_validate_command_is_light() -> None:
    code = (
        "from ctxpolicy.cli import main\n"
        "assert main(['validate', 'policies', '--format', 'json']) == 0"
    )
    assert _modules_after(code) == []


def test_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("ctxpolicy")
    if not script.exists():  # the package is not installed in this interpreter
        pytest.fail("the ctxpolicy console script is not installed")
    done = subprocess.run(
        [str(script), "validate", str(REPO / "policies")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_child_validates_from_inside_its_own_folder(monkeypatch) -> None:
    """A parent's template_file resolves the same whatever the working directory
    (regression: the parent folder reached through ``teams/..`` was not normalised)."""
    from ctxpolicy.cli import main

    teams = Path(__file__).resolve().parents[2] / "policies" / "teams"
    monkeypatch.chdir(teams)
    assert main(["validate", "data-platform.yaml", "analytics.toml"]) == 0


def test_validate_paths_takes_a_single_path_not_its_characters(tmp_path: Path) -> None:
    from ctxpolicy.loading import validate_paths

    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nname: p\n", encoding="utf-8")
    assert validate_paths(str(policy)) == []
    assert validate_paths(policy) == []
    (issue,) = validate_paths(str(tmp_path / "missing.yaml"))
    assert issue.rule == "file.missing"


def test_folder_scan_skips_hidden_files_and_folders(run_cli) -> None:
    files = {
        "policies/ok.yaml": "version: 1\nname: ok\n",
        "policies/.github/workflows/ci.yml": "on: push\njobs: {}\n",
        "policies/.venv/lib/pkg/METADATA.toml": "x = 1\n",
        "policies/.ctxpolicy-abc123.yaml": "version: 1\nname: [half-written\n",
    }
    code, out, err = run_cli(files, "validate", "policies", "--format", "json")
    assert code == 0, out + err
    assert [f.split("/")[-1] for f in json.loads(out)["files"]] == ["ok.yaml"]
