"""``ctxpolicy show`` prints a self-contained effective policy: saved anywhere, it loads to
the same effective policy (issue 14: ``extends:`` used to be printed and broke the copy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from ctxpolicy.loading import load_policy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "policies", tmp_path / "policies")
    return tmp_path / "policies"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("name", ["teams/data-platform.yaml", "teams/analytics.toml", "base.yaml"])
def test_saved_show_output_loads_elsewhere_to_the_same_policy(run_cli, policies, fmt, name) -> None:
    source = f"policies/{name}"
    code, out, err = run_cli({}, "show", source, "--format", fmt)
    assert code == 0, err
    data = json.loads(out) if fmt == "json" else YAML(typ="safe", pure=True).load(out)
    assert "extends" not in data
    for spec in data.get("layers", {}).values():  # template files are inlined
        assert "template_file" not in spec.get("collector", {})
    saved = policies.parent / "elsewhere" / "deeper" / f"effective.{fmt}"
    saved = saved.with_suffix(".yaml")  # JSON is YAML: the loader reads it as such
    saved.parent.mkdir(parents=True)
    saved.write_text(out, encoding="utf-8")
    code, out, err = run_cli({}, "validate", str(saved))
    assert code == 0, out + err
    code, out, err = run_cli({}, "diff", source, str(saved))
    assert code == 0, out + err
    assert "identical" in out
    assert load_policy(saved).to_data() == data


def test_template_files_are_inlined_with_their_text(run_cli, policies) -> None:
    code, out, _ = run_cli({}, "show", "policies/teams/data-platform.yaml", "--format", "json")
    assert code == 0
    layers = json.loads(out)["layers"]
    warehouse = (policies / "teams" / "templates" / "warehouse.j2").read_text(encoding="utf-8")
    todo = (policies / "templates" / "todo.j2").read_text(encoding="utf-8")
    assert layers["warehouse__context"]["collector"]["template"] == warehouse
    assert layers["todo__context"]["collector"]["template"] == todo


def test_yaml_output_says_where_it_comes_from_and_keeps_multiline_text_readable(
    run_cli, policies
) -> None:
    code, out, _ = run_cli({}, "show", "policies/teams/data-platform.yaml")
    assert code == 0
    assert out.startswith("# Effective policy of policies/teams/data-platform.yaml")
    assert "extends:" not in out
    assert "template: |" in out  # a literal block, not one long escaped string


def test_a_files_root_is_kept_and_noted(run_cli, policies) -> None:
    code, out, err = run_cli({}, "show", "policies/docs-demo.yaml")
    assert code == 0
    assert "root: docs" in out
    assert "docs-demo.yaml" in err and "root" in err and "docs" in err


def test_diff_ignores_only_how_the_policy_was_written(run_cli, policies) -> None:
    """An inlined template equals its template file; a changed template text differs."""
    team = policies / "teams" / "data-platform.yaml"
    code, out, _ = run_cli({}, "show", str(team))
    saved = policies.parent / "copy.yaml"
    saved.write_text(out.replace("Warehouse", "WAREHOUSE"), encoding="utf-8")
    code, out, _ = run_cli({}, "diff", str(team), str(saved))
    assert code == 1
    assert "layers.warehouse__context.collector.template" in out
