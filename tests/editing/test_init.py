"""`ctxpolicy init`: a commented team policy that validates, with the editor schema line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxpolicy.loading import load_policy, validate_paths
from tests.editing.conftest import REPO, run_cli, stray_files


def schema_target(policy: Path) -> Path:
    first = policy.read_text().splitlines()[0]
    match = re.fullmatch(r"# yaml-language-server: \$schema=(.+)", first)
    assert match, first
    return (policy.parent / match.group(1)).resolve()


def test_init_extending_base(policies: Path, monkeypatch, capsys) -> None:
    (policies.parent / "schemas").mkdir()  # a project that keeps the schema
    (policies.parent / "schemas" / "ctxpolicy.schema.json").write_text("{}")
    monkeypatch.chdir(policies / "teams")
    assert run_cli("init", "search-team", "--extends", "../base.yaml") == 0
    written = policies / "teams" / "search-team.yaml"
    assert "wrote search-team.yaml" in capsys.readouterr().out
    assert validate_paths([written]) == []
    policy = load_policy(written)
    assert policy.name == "search-team"
    assert policy.extends == "../base.yaml"
    assert policy.vars["team"] == "search-team"
    assert policy.vars["product"] == "Datapillar"  # inherited and merged
    assert schema_target(written).name == "ctxpolicy.schema.json"
    assert schema_target(written).is_file()
    assert written.read_text().count("\n#") > 10  # commented for people


def test_extends_path_is_relative_to_the_new_file(policies: Path, monkeypatch) -> None:
    monkeypatch.chdir(policies.parent)
    out = policies / "teams" / "nested" / "deep.yaml"
    assert run_cli("init", "deep", "--extends", "policies/base.yaml", "--output", str(out)) == 0
    assert load_policy(out).extends == "../../base.yaml"


def test_schema_line_points_into_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "ctxpolicy.schema.json").write_text("{}")
    out = tmp_path / "policies" / "teams" / "t.yaml"
    assert run_cli("init", "t", "--output", str(out)) == 0
    assert out.read_text().splitlines()[0] == (
        "# yaml-language-server: $schema=../../schemas/ctxpolicy.schema.json"
    )


def test_schema_line_falls_back_to_the_schema_id_not_the_package(tmp_path: Path) -> None:
    out = tmp_path / "solo.yaml"
    assert run_cli("init", "solo", "--output", str(out)) == 0
    # no path into the installed package (it breaks when the virtualenv is rebuilt): the
    # schema's own $id, which does not depend on where ctxpolicy is installed
    schema_id = json.loads((REPO / "schemas" / "ctxpolicy.schema.json").read_text())["$id"]
    assert out.read_text().splitlines()[0] == f"# yaml-language-server: $schema={schema_id}"
    assert validate_paths([out]) == []
    policy = load_policy(out)
    assert policy.extends is None
    assert set(policy.processes) >= {"react", "mapreduce_worker"}


def test_refuses_to_overwrite_without_force(tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.yaml"
    out.write_text("keep me\n")
    assert run_cli("init", "t", "--output", str(out)) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "keep me\n"
    assert run_cli("init", "t", "--output", str(out), "--force") == 0
    assert load_policy(out).name == "t"
    assert stray_files(tmp_path) == []


@pytest.mark.parametrize("name", ["Team", "-x", "a b", "x" * 129, "", "team.yaml"])
def test_bad_name_exits_2(tmp_path: Path, name: str, capsys) -> None:
    assert run_cli("init", name, "--output", str(tmp_path / "x.yaml")) == 2
    assert "NAME" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_name_that_yaml_would_misread_stays_a_string(tmp_path: Path) -> None:
    for name in ("true", "123", "null"):
        out = tmp_path / f"n{name}.yaml"
        assert run_cli("init", name, "--output", str(out)) == 0
        assert load_policy(out).name == name


def test_other_usage_errors_exit_2(tmp_path: Path, capsys) -> None:
    assert run_cli("init", "t", "--output", str(tmp_path / "t.toml")) == 2
    assert run_cli("init", "t", "--output", str(tmp_path / "t.yaml"), "--extends", "nope.yaml") == 2
    err = capsys.readouterr().err
    assert "t.toml" in err and "nope.yaml" in err
    assert list(tmp_path.iterdir()) == []


def test_invalid_parent_is_reported_and_nothing_written(tmp_path: Path, capsys) -> None:
    parent = tmp_path / "base.yaml"
    parent.write_text("version: 1\nname: base\nbudget: {output_reserve: 3}\n")
    out = tmp_path / "team.yaml"
    assert run_cli("init", "team", "--extends", str(parent), "--output", str(out)) == 2
    assert "base.yaml:3:" in capsys.readouterr().err
    assert not out.exists()
    assert stray_files(tmp_path) == []


def test_a_failed_init_leaves_no_folder_it_made(tmp_path: Path, capsys) -> None:
    parent = tmp_path / "base.yaml"
    parent.write_text("version: 1\nname: base\nbudget: {output_reserve: 3}\n")
    (tmp_path / "团队").mkdir()  # there already: kept
    out = tmp_path / "团队" / "新" / "深" / "team.yaml"
    assert run_cli("init", "team", "--extends", str(parent), "--output", str(out)) == 2
    assert "base.yaml:3:" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["base.yaml", "团队"]
    assert run_cli("init", "team", "--output", str(out)) == 0  # made when it is written
    assert out.is_file()
