"""``extends``: deep merge (child wins), lists replace, parent locations, base folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxpolicy.errors import PolicyValidationError
from ctxpolicy.loading import load_policy, resolve_policy

BASE = """\
version: 1
name: base
vars: {product: Datapillar, team: none}
budget:
  output_reserve: 0.2
  ratios:
    system_prompt: 0.1
    query: 0.1
order: [system_prompt, framework__context, knowledge__context, checkpoint_messages, query]
layers:
  framework__context:
    collector: {type: template, template_file: tpl/fw.j2}
  knowledge__context:
    collector: {type: retriever, service: kb, top_k: 3}
"""


def _base(write) -> None:
    write("base.yaml", BASE)
    write("tpl/fw.j2", "Framework of {{ vars.product }}\n")


def test_child_wins_mappings_merge_lists_replace(write) -> None:
    _base(write)
    write(
        "teams/a.yaml",
        """\
version: 1
name: team-a
extends: ../base.yaml
vars: {team: a}
budget:
  ratios: {query: 0.2}
order: [system_prompt, knowledge__context, framework__context, checkpoint_messages, query]
""",
    )
    policy = load_policy("teams/a.yaml")
    assert policy.name == "team-a"
    assert dict(policy.vars) == {"product": "Datapillar", "team": "a"}
    assert dict(policy.budget.ratios) == {"system_prompt": 0.1, "query": 0.2}
    assert policy.budget.output_reserve == 0.2
    assert policy.order == (
        "system_prompt",
        "knowledge__context",
        "framework__context",
        "checkpoint_messages",
        "query",
    )
    assert policy.extends == "../base.yaml"


def test_collector_mapping_replaces_the_parents_collector_whole(write) -> None:
    _base(write)
    write(
        "teams/a.yaml",
        """\
version: 1
name: team-a
extends: ../base.yaml
layers:
  knowledge__context:
    collector: {type: memory, tier: l2}
""",
    )
    spec = load_policy("teams/a.yaml").layers["knowledge__context"].collector
    assert spec is not None and spec.type == "memory"


def test_inherited_layer_resolves_against_the_parents_folder(write, tmp_path: Path) -> None:
    _base(write)
    write("teams/tpl/own.j2", "own\n")
    write(
        "teams/a.yaml",
        """\
version: 1
name: team-a
extends: ../base.yaml
order: [system_prompt, framework__context, knowledge__context, own__context,
        checkpoint_messages, query]
layers:
  own__context:
    collector: {type: template, template_file: tpl/own.j2}
""",
    )
    policy = load_policy("teams/a.yaml")
    assert policy.layer_base_dir("framework__context") == tmp_path
    assert policy.layer_base_dir("own__context") == tmp_path / "teams"
    assert policy.source == tmp_path / "teams" / "a.yaml"


def test_inherited_value_error_points_at_the_parent_file_line(write) -> None:
    write("base.yaml", "version: 1\nname: base\nbudget:\n  ratios:\n    query: 0.7\n")
    write(
        "teams/a.yaml",
        "version: 1\nname: a\nextends: ../base.yaml\nbudget:\n  ratios:\n    system_prompt: 0.5\n",
    )
    result = resolve_policy("teams/a.yaml")
    (issue,) = [i for i in result.issues if i.rule == "budget.ratios-sum"]
    # the `ratios` mapping is written in both files: the child's line wins
    assert (issue.file, issue.line) == ("teams/a.yaml", 5)
    write(
        "base.yaml", "version: 1\nname: base\nlayers:\n  framework__context:\n    persist: true\n"
    )
    result = resolve_policy("teams/a.yaml")
    (issue,) = [i for i in result.issues if i.rule == "persist.framework"]
    assert (issue.file, issue.line, issue.column) == ("base.yaml", 5, 5)


def test_several_parents_merge_in_order_later_wins(write) -> None:
    write("a.yaml", "version: 1\nname: a\nvars: {x: a, y: a}\n")
    write("b.yaml", "version: 1\nname: b\nvars: {y: b}\n")
    write("c.yaml", "version: 1\nname: c\nextends: [a.yaml, b.yaml]\n")
    policy = load_policy("c.yaml")
    assert dict(policy.vars) == {"x": "a", "y": "b"}
    assert resolve_policy("c.yaml").chain == (Path("a.yaml"), Path("b.yaml"), Path("c.yaml"))


def test_chain_deeper_than_eight_is_an_error(write) -> None:
    write("p0.yaml", "version: 1\nname: p0\n")
    for i in range(1, 11):
        write(f"p{i}.yaml", f"version: 1\nname: p{i}\nextends: p{i - 1}.yaml\n")
    load_policy("p8.yaml")  # eight parents: fine
    with pytest.raises(PolicyValidationError) as caught:
        load_policy("p10.yaml")
    assert "extends.depth" in {i.rule for i in caught.value.issues}


def test_cycle_through_three_files(write) -> None:
    write("a.yaml", "version: 1\nname: a\nextends: b.yaml\n")
    write("b.yaml", "version: 1\nname: b\nextends: c.yaml\n")
    write("c.yaml", "version: 1\nname: c\nextends: a.yaml\n")
    with pytest.raises(PolicyValidationError) as caught:
        load_policy("a.yaml")
    (issue,) = [i for i in caught.value.issues if i.rule == "extends.cycle"]
    assert issue.file == "c.yaml" and issue.line == 3
    assert "a.yaml -> b.yaml -> c.yaml -> a.yaml" in issue.message


def test_invalid_parent_reports_in_the_parent_and_at_the_extends_line(write) -> None:
    write("base.yaml", "version: 1\nname: base\nname: again\n")
    write("a.yaml", "version: 1\nname: a\nextends: base.yaml\n")
    issues = resolve_policy("a.yaml").issues
    assert ("base.yaml", 3, "yaml.duplicate-key") in {(i.file, i.line, i.rule) for i in issues}
    assert ("a.yaml", 3, "extends.invalid-parent") in {(i.file, i.line, i.rule) for i in issues}


def test_yaml_parent_toml_child(write) -> None:
    _base(write)
    write(
        "teams/b.toml",
        'version = 1\nname = "b"\nextends = "../base.yaml"\n'
        "enable_share_context = false\n[budget.ratios]\nquery = 0.3\n",
    )
    policy = load_policy("teams/b.toml")
    assert policy.enable_share_context is False
    assert policy.budget.ratios["query"] == 0.3
    assert policy.budget.ratios["system_prompt"] == 0.1
