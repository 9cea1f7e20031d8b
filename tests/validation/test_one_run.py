"""One run reports everything: schema errors do not hide the semantic rules.

The semantic rules run on the parts of a document that passed the schema (each rule
whose sections are structurally valid), and both kinds of issue come back together,
sorted by position, from the API and from every reporter of ``ctxpolicy validate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxpolicy.cli import main
from ctxpolicy.diagnostics import Finding
from ctxpolicy.errors import PolicyValidationError
from ctxpolicy.loading import load_policy, validate_paths
from ctxpolicy.validation import build_policy
from ctxpolicy.validation.sections import WHOLE_POLICY, BrokenSections
from ctxpolicy.validation.semantic import RULE_SECTIONS, RULES

#: Two schema errors (in ``model``) and three semantic problems (in ``order`` and
#: ``budget``): before, only the first two were reported, and fixing them revealed the
#: other three.
FIVE_PROBLEMS = """\
version: 1
name: five-problems
model:
  tokenizer: gpt2
  context_window: -5
order:
  - system_prompt
  - knowledge__context
  - knowledge__context
  - checkpoint_messages
budget:
  ratios:
    knowledge__context: 0.8
    system_prompt: 0.5
"""

EXPECTED = [
    (4, 3, "$.model.tokenizer", "schema.enum"),
    (5, 3, "$.model.context_window", "schema.range"),
    (9, 5, "$.order[2]", "order.duplicate"),
    (10, 5, "$.order[3]", "order.ends-with-query"),
    (12, 3, "$.budget.ratios", "budget.ratios-sum"),
]


@pytest.fixture
def five(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("ENABLE_SHARE_CONTEXT", "POLICY", "TOKENIZER", "CONTEXT_WINDOW"):
        monkeypatch.delenv(f"CTXPOLICY_{name}", raising=False)
    path = Path("five.yaml")
    path.write_text(FIVE_PROBLEMS, encoding="utf-8")
    return path


def test_schema_and_semantic_problems_come_back_in_one_run(five: Path) -> None:
    issues = validate_paths([five])
    assert [(i.line, i.column, i.path, i.rule) for i in issues] == EXPECTED
    assert {i.file for i in issues} == {"five.yaml"}
    with pytest.raises(PolicyValidationError) as caught:
        load_policy(five)
    assert [i.rule for i in caught.value.issues] == [rule for *_, rule in EXPECTED]


def test_text_reporter_lists_all_five_sorted_by_position(
    five: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(five)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[5].startswith("5 error(s)")
    for text, (line, column, path, rule) in zip(lines, EXPECTED, strict=False):
        assert text.startswith(f"five.yaml:{line}:{column}: {path}: "), text
        assert text.endswith(f" [{rule}]"), text


def test_json_reporter_lists_all_five_sorted_by_position(
    five: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--format", "json", str(five)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    got = [(i["line"], i["column"], i["path"], i["rule"]) for i in report["issues"]]
    assert got == EXPECTED


def test_a_broken_layer_does_not_hide_the_rules_of_the_other_layers(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 1\nname: t\n"
        "order: [system_prompt, framework__context, warehouse__context, checkpoint_messages,"
        " query]\n"
        "layers:\n"
        "  framework__context:\n    persist: true\n"
        "  warehouse__context:\n    collector: {type: telepathy}\n"
        "  query:\n    persist: true\n",
        encoding="utf-8",
    )
    rules = [i.rule for i in validate_paths([path])]
    assert rules == ["persist.framework", "schema.enum", "persist.query"]


def test_a_rule_whose_section_is_broken_does_not_run(tmp_path: Path) -> None:
    # order is broken: the order rules (and those that read order) must not guess
    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 1\nname: t\norder: [system_prompt, Bad-Name, query]\n"
        "layers:\n  warehouse__context: {collector: {type: state, field: w}}\n"
        "budget:\n  ratios: {query: 0.6, system_prompt: 0.6}\n",
        encoding="utf-8",
    )
    rules = [i.rule for i in validate_paths([path])]
    assert rules == ["schema.pattern", "budget.ratios-sum"]


def test_nothing_semantic_when_the_top_level_itself_is_broken() -> None:
    policy, findings = build_policy({"name": "t", "order": ["query", "system_prompt"]})
    assert policy is None
    assert [f.rule for f in findings] == ["schema.required"]


def test_broken_sections_record_sections_and_entries() -> None:
    broken = BrokenSections.of(
        [
            Finding(("model", "tokenizer"), "m", "schema.enum"),
            Finding(("layers", "a__context", "collector", "type"), "m", "schema.enum"),
            Finding(("procesess",), "m", "schema.unknown-key"),
        ]
    )
    assert broken.sections == {"model", "procesess"}
    assert broken.entries == {("layers", "a__context")}
    data = {"model": {}, "procesess": {}, "layers": {"a__context": {}, "b__context": {}}}
    assert broken.prune(data) == {"layers": {"b__context": {}}}
    known = frozenset({"model", "layers", "order", "budget"})
    assert broken.allows(frozenset({"order", "budget"}), known=known)
    assert broken.allows(frozenset({"layers.*"}), known=known)
    assert not broken.allows(frozenset({"layers"}), known=known)
    assert not broken.allows(frozenset({"model"}), known=known)
    assert not broken.allows(frozenset({WHOLE_POLICY}), known=known)
    assert not BrokenSections.of([Finding((), "m", "schema.required")]).allows(
        frozenset(), known=known
    )


def test_every_semantic_rule_says_which_sections_it_reads() -> None:
    assert set(RULE_SECTIONS) == set(RULES)
