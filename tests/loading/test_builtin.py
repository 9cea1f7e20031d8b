"""Bundled policies and samples, ``builtin:NAME`` everywhere a policy file is taken
(issue 33, finding 1), and errors that say "not found" without a made-up position
(finding 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxpolicy.builtin import (
    BUNDLE_DIR,
    builtin_name,
    builtin_policies,
    builtin_samples,
    resolve_ref,
)
from ctxpolicy.cli import main
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import PolicyNotFoundError, PolicyNotGivenError, PolicyValidationError
from ctxpolicy.loading import load_policy, resolve_policy, validate_paths

REPO = Path(__file__).resolve().parents[2]

#: The package's bundle is the source of truth; the repository keeps copies that the
#: demo, the docs and the tests read by path (docs/sharing.md, 'Bundled policies').
MIRRORS = {
    "base.yaml": REPO / "policies" / "base.yaml",
    "long-session.yaml": REPO / "policies" / "long-session.yaml",
    "templates/todo.j2": REPO / "policies" / "templates" / "todo.j2",
    "samples/state.json": REPO / "examples" / "state.json",
    "samples/manifest/context-config.json": REPO / "examples" / "context-config.json",
    **{
        f"samples/manifest/{p.name}": p
        for p in (REPO / "examples" / "docs").iterdir()
        if p.is_file()
    },
}


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder far from the repository, as the working folder."""
    monkeypatch.chdir(tmp_path)
    for name in ("ENABLE_SHARE_CONTEXT", "POLICY", "TOKENIZER", "CONTEXT_WINDOW"):
        monkeypatch.delenv(f"CTXPOLICY_{name}", raising=False)
    return tmp_path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_repository_copies_equal_the_bundle(name: str) -> None:
    bundled = BUNDLE_DIR / name
    assert bundled.is_file(), name
    assert MIRRORS[name].read_bytes() == bundled.read_bytes(), (
        f"{MIRRORS[name].relative_to(REPO)} differs from the bundled {name}: the bundle is "
        f"the source; cp ctxpolicy/policies/{name} {MIRRORS[name].relative_to(REPO)}"
    )


def test_every_bundled_file_is_mirrored_or_listed() -> None:
    files = {p.relative_to(BUNDLE_DIR).as_posix() for p in BUNDLE_DIR.rglob("*") if p.is_file()}
    assert files == set(MIRRORS)
    assert builtin_policies() == ("base", "long-session")
    assert builtin_samples() == (
        "builtin:samples/manifest/context-config.json",
        "builtin:samples/state.json",
    )


def test_names_resolve_inside_the_bundle_only() -> None:
    assert resolve_ref("builtin:base") == BUNDLE_DIR / "base.yaml"
    assert resolve_ref("builtin:samples/state.json") == BUNDLE_DIR / "samples" / "state.json"
    assert resolve_ref(Path("builtin:long-session")) == BUNDLE_DIR / "long-session.yaml"
    assert resolve_ref("policies/base.yaml") == Path("policies/base.yaml")
    for escape in ("builtin:../errors.py", "builtin:/etc/passwd", "builtin:", "builtin:a\\b"):
        assert not resolve_ref(escape).exists(), escape
    assert builtin_name(BUNDLE_DIR / "base.yaml") == "builtin:base"
    assert builtin_name(BUNDLE_DIR / "samples" / "state.json") == "builtin:samples/state.json"
    assert builtin_name(REPO / "policies" / "base.yaml") is None


def test_python_entry_points_take_builtin_names(elsewhere: Path, monkeypatch) -> None:
    base = load_policy("builtin:base")
    assert base.name == "datapillar-base"
    assert base.layer_base_dir("todo__context") == BUNDLE_DIR  # its template resolves there
    engine = PolicyEngine.from_file("builtin:long-session")
    assert "recall__context" in engine.policy.order
    monkeypatch.setenv("CTXPOLICY_POLICY", "builtin:long-session")
    assert load_policy().name == "long-session"


def test_extends_builtin_from_any_folder(elsewhere: Path) -> None:
    team = elsewhere / "deep" / "er" / "team.yaml"
    team.parent.mkdir(parents=True)
    team.write_text(
        "version: 1\nname: team\nextends: builtin:base\nbudget: {ratios: {query: 0.1}}\n",
        encoding="utf-8",
    )
    result = resolve_policy(team)
    assert result.policy is not None, result.issues
    assert result.policy.budget.ratios["query"] == 0.1
    assert result.policy.process("mapreduce_worker").include == (
        "framework__context",
        "knowledge__context",
    )
    assert [p.name for p in result.chain] == ["base.yaml", "team.yaml"]
    # an inherited value points at the bundled file by name, never into the package
    where = result.sourcemap[("name",)].describe()
    assert where.startswith("deep/er/team.yaml:2:1") or where.endswith("team.yaml:2:1")
    assert result.sourcemap[("order",)].file == "builtin:base"


def test_an_unknown_builtin_is_not_found_with_the_names_that_exist(elsewhere: Path) -> None:
    with pytest.raises(PolicyNotFoundError) as caught:
        load_policy("builtin:nope")
    text = str(caught.value)
    assert text.startswith("policy file not found:\nbuiltin:nope: ")
    assert "builtin:base, builtin:long-session" in text
    assert ":0:0" not in text
    team = elsewhere / "team.yaml"
    team.write_text("version: 1\nname: team\nextends: builtin:bsae\n", encoding="utf-8")
    [issue] = validate_paths([Path("team.yaml")])
    assert (issue.file, issue.line, issue.column, issue.rule) == (
        "team.yaml",
        3,
        1,
        "extends.missing",
    )
    assert "builtin:base" in issue.message


@pytest.mark.parametrize("name", ["builtin:", "builtin:../pyproject", "builtin:/etc/passwd"])
def test_a_builtin_name_that_leaves_the_bundle_is_not_found(
    elsewhere: Path, capsys, name: str
) -> None:
    with pytest.raises(PolicyNotFoundError) as caught:
        load_policy(name)
    assert str(caught.value).startswith(f"policy file not found:\n{name}: no bundled file ")
    code, out, err = cli(capsys, "show", name)
    assert code == 2 and out == ""
    assert f"{name}: no bundled file {name!r}; bundled policies: builtin:base" in err
    assert "file.type" not in err and "not a policy file" not in err


@pytest.mark.parametrize(
    ("ref", "rule"),
    [
        ("builtin:samples/state.json", "extends.not-policy"),
        ("builtin:../pyproject", "extends.missing"),
        ("builtin:", "extends.missing"),
        ("builtin:nope.toml", "extends.missing"),
    ],
)
def test_extends_a_bundled_file_is_checked_like_any_parent(
    elsewhere: Path, ref: str, rule: str
) -> None:
    team = elsewhere / "team.yaml"
    team.write_text(f"version: 1\nname: team\nextends: '{ref}'\n", encoding="utf-8")
    [issue] = validate_paths([team])
    assert (issue.line, issue.rule) == (3, rule), issue


def test_missing_file_is_not_found_not_invalid_and_has_no_position(elsewhere: Path) -> None:
    with pytest.raises(PolicyNotFoundError) as caught:
        load_policy("policies/long-session.yaml")
    assert isinstance(caught.value, FileNotFoundError)
    assert isinstance(caught.value, PolicyValidationError)
    assert str(caught.value) == (
        "policy file not found:\npolicies/long-session.yaml: no such file or folder [file.missing]"
    )
    assert caught.value.filename == "policies/long-session.yaml"  # as a FileNotFoundError
    assert caught.value.args == (str(caught.value),)
    with pytest.raises(PolicyNotGivenError) as given:
        load_policy()
    assert ":0:0" not in str(given.value)
    assert "<env CTXPOLICY_POLICY>: no policy path given" in str(given.value)


def test_an_invalid_file_is_still_invalid_with_its_position(elsewhere: Path) -> None:
    (elsewhere / "bad.yaml").write_text("version: 1\nname: bad\norder: 3\n", encoding="utf-8")
    with pytest.raises(PolicyValidationError) as caught:
        load_policy("bad.yaml")
    assert not isinstance(caught.value, PolicyNotFoundError)
    assert "bad.yaml:3:1: $.order" in str(caught.value)


def test_every_cli_verb_takes_builtin_names(elsewhere: Path, capsys) -> None:
    code, out, _ = cli(capsys, "validate", "builtin:base", "builtin:long-session")
    assert (code, out) == (0, "2 file(s) valid\n")
    code, out, _ = cli(capsys, "validate", "builtin:base", "--format", "json")
    assert json.loads(out)["files"] == ["builtin:base"]
    code, out, _ = cli(capsys, "show", "builtin:long-session")
    assert code == 0 and "name: long-session" in out
    assert out.startswith("# Effective policy of builtin:long-session (ctxpolicy show)")
    code, out, _ = cli(capsys, "show", "--explain", "builtin:base")
    assert code == 0 and "# builtin:base:" in out and str(BUNDLE_DIR) not in out
    code, out, _ = cli(
        capsys, "preview", "builtin:base", "-p", "react", "--state", "builtin:samples/state.json"
    )
    assert code == 0 and "Compare yesterday's row count" in out
    code, out, _ = cli(capsys, "diff", "builtin:base", "builtin:base")
    assert code == 0
    code, out, _ = cli(capsys, "diff", "builtin:base", "builtin:long-session")
    assert code == 1 and "recall__context" in out
    code, out, _ = cli(capsys, "compile", "builtin:samples/manifest/context-config.json")
    assert code == 0 and "这段是什么意思" in out
    code, out, _ = cli(capsys, "list")
    assert code == 0
    assert "builtin:base" in out and "builtin:long-session" in out
    assert "History drop_oldest plus a recall layer" in out
    assert json.loads(cli(capsys, "list", "--format", "json")[1])["samples"] == list(
        builtin_samples()
    )


def test_preview_state_names_a_bundled_file_by_its_builtin_name(elsewhere: Path, capsys) -> None:
    base = ("preview", "builtin:base", "-p", "react", "--state")
    code, _, err = cli(capsys, *base, "builtin:nope.json")
    assert code == 2
    assert err.startswith("ctxpolicy preview: --state builtin:nope.json: no bundled file ")
    assert str(BUNDLE_DIR) not in err
    code, _, err = cli(capsys, *base, "builtin:templates/todo.j2")
    assert code == 2
    assert err.startswith("ctxpolicy preview: --state builtin:templates/todo.j2: cannot parse")
    assert str(BUNDLE_DIR) not in err


def test_set_refuses_a_bundled_policy(elsewhere: Path, capsys) -> None:
    before = (BUNDLE_DIR / "base.yaml").read_bytes()
    code, _, err = cli(capsys, "set", "builtin:base", "budget.ratios.query", "0.1")
    assert code == 2
    assert "read-only" in err and "init NAME --extends builtin:base" in err
    assert (BUNDLE_DIR / "base.yaml").read_bytes() == before


def test_init_extends_builtin_validates_from_any_folder(elsewhere: Path, capsys) -> None:
    code, _, err = cli(capsys, "init", "search", "--extends", "builtin:base", "-o", "t/s.yaml")
    assert (code, err) == (0, ""), err
    text = (elsewhere / "t" / "s.yaml").read_text(encoding="utf-8")
    assert "\nextends: builtin:base\n" in text
    first = text.splitlines()[0]
    assert (
        first
        == "# yaml-language-server: $schema=https://ctxpolicy.dev/schemas/ctxpolicy.schema.json"
    )
    assert "site-packages" not in text and str(BUNDLE_DIR) not in text
    moved = elsewhere / "far" / "away"
    moved.mkdir(parents=True)
    (moved / "s.yaml").write_text(text, encoding="utf-8")
    assert validate_paths([moved / "s.yaml"]) == []
    assert load_policy(moved / "s.yaml").vars["team"] == "search"
    code, _, err = cli(capsys, "init", "x", "--extends", "builtin:bsae")
    assert code == 2 and "builtin:base" in err
