"""What one run works out once (`DocumentCache.checks`): the schema verdict on a base's
values, the findings of its template files. The findings are those of a run without it,
and a template file changed during the run is checked again."""

from __future__ import annotations

import os
from pathlib import Path

from ctxpolicy.loading import validate_paths
from ctxpolicy.loading.extends import DocumentCache, resolve_extends

BASE = """version: 1
name: base
order: [system_prompt, todo__context, notes__context, checkpoint_messages, query]
layers:
  todo__context:
    collector: {type: state, field: todo, template_file: templates/todo.j2}
  notes__context:
    collector: {type: template, template: "{{ vars.x }"}
budget:
  ratios:
    query: 0.2
"""
TEAM = "version: 1\nname: team-{n}\nextends: ../base.yaml\nbudget:\n  ratios:\n    query: {r}\n"


def _tree(root: Path, teams: int = 6) -> None:
    (root / "templates").mkdir()
    (root / "templates" / "todo.j2").write_text("{% for x in todo %}{{ x }}\n", "utf-8")
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "teams").mkdir()
    for n in range(teams):
        ratio = 2 if n == 3 else 0.1
        (root / "teams" / f"t{n}.yaml").write_text(TEAM.format(n=n, r=ratio), encoding="utf-8")


def _separately(root: Path) -> set[object]:
    found = set(validate_paths(root / "base.yaml", documents=DocumentCache()))
    for path in sorted((root / "teams").glob("*.yaml")):
        found |= set(validate_paths(path, documents=DocumentCache()))
    return found


def test_the_findings_of_a_shared_run_are_those_of_separate_runs(tmp_path: Path) -> None:
    _tree(tmp_path)
    shared = validate_paths(tmp_path)
    rules = {issue.rule for issue in shared}
    assert {"template.syntax", "schema.range"} <= rules  # the planted problems
    assert set(shared) == _separately(tmp_path)


def test_a_template_file_changed_during_the_run_is_checked_again(tmp_path: Path) -> None:
    _tree(tmp_path)
    documents = DocumentCache()
    team = tmp_path / "teams" / "t0.yaml"
    first = validate_paths(team, documents=documents)
    template = tmp_path / "templates" / "todo.j2"
    template.write_text("{% for x in todo %}{{ x }}\n{% endfor %}\n", encoding="utf-8")
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # surely newer
    second = validate_paths(team, documents=documents)
    lines = {(i.file.rsplit("/", 1)[-1], i.rule) for i in first} - {
        (i.file.rsplit("/", 1)[-1], i.rule) for i in second
    }
    assert ("todo.j2", "template.syntax") in lines  # the fixed template is clean now
    assert set(second) == set(validate_paths(team, documents=DocumentCache()))


def test_readers_get_copies_and_the_sharing_view_the_cache_s_own_data(tmp_path: Path) -> None:
    _tree(tmp_path)
    documents = DocumentCache()
    base = tmp_path / "base.yaml"
    one, _ = documents.read(base)
    two, _ = documents.read(base)
    shared_one, _ = documents.sharing().read(base)
    shared_two, _ = documents.sharing().read(base)
    assert one is not None and two is not None
    assert shared_one is not None and shared_two is not None
    assert one.data == two.data == shared_one.data
    assert one.data is not two.data and one.data["layers"] is not two.data["layers"]
    assert shared_one.data is shared_two.data  # the view hands out what it keeps
    assert documents.sharing().checks is documents.checks
    merged = resolve_extends(tmp_path / "teams" / "t0.yaml", documents=documents)
    assert merged.data is not None
    merged.data["layers"]["todo__context"]["collector"]["field"] = "changed"  # a copy
    again, _ = documents.sharing().read(base)
    assert again is not None
    assert again.data["layers"]["todo__context"]["collector"]["field"] == "todo"
