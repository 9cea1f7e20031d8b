"""Every bad input of issue 2 gives exit 1 and FILE:LINE:COL in text, a line in JSON and
an ::error line in github format."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

MIN = "version: 1\nname: t\n"
LAUGHS = (
    "version: 1\nname: t\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n"
        for i in range(8)
    )
)


@dataclass(frozen=True)
class Case:
    files: dict[str, str | bytes]
    rule: str
    line: int
    column: int = 0  # 0: do not check
    target: str = "p.yaml"
    file: str = ""  # the file the issue must name (default: target)
    extra: dict[str, str] = field(default_factory=dict)


CASES = {
    "malformed-yaml": Case(
        {"p.yaml": MIN + "order: [system_prompt,\n  query\nlayers: {}\n"}, "yaml.syntax", 5, 7
    ),
    "malformed-toml": Case(
        {"p.toml": 'version = 1\nname = "t"\norder = = 1\n'}, "toml.syntax", 3, 9, target="p.toml"
    ),
    "duplicate-key": Case({"p.yaml": MIN + "name: u\n"}, "yaml.duplicate-key", 3, 1),
    "billion-laughs": Case({"p.yaml": LAUGHS}, "yaml.alias-expansion", 7),
    "too-large": Case({"p.yaml": MIN + "# " + "x" * (1024 * 1024) + "\n"}, "file.too-large", 1),
    "non-utf8": Case({"p.yaml": b"version: 1\nname: \xff\xfe\n"}, "file.encoding", 2, 7),
    "empty": Case({"p.yaml": ""}, "file.empty", 1),
    "comments-only": Case({"p.yaml": "# nothing here\n"}, "file.empty", 1),
    "top-level-list": Case({"p.yaml": "- version: 1\n- name: t\n"}, "file.not-mapping", 1),
    "wrong-type": Case({"p.yaml": MIN + "enable_share_context: maybe\n"}, "schema.type", 3, 1),
    "out-of-range": Case(
        {"p.yaml": MIN + "budget:\n  output_reserve: 1.5\n"}, "schema.range", 4, 3
    ),
    "unknown-key": Case({"p.yaml": MIN + "bugdet: {}\n"}, "schema.unknown-key", 3, 1),
    "ratios-over-1": Case(
        {"p.yaml": MIN + "budget:\n  ratios: {system_prompt: 0.6, query: 0.6}\n"},
        "budget.ratios-sum",
        4,
        3,
    ),
    "bad-layer-name": Case(
        {"p.yaml": MIN + "layers:\n  Todo__context: {}\n"}, "schema.unknown-key", 4, 3
    ),
    "bad-order-name": Case(
        {
            "p.yaml": MIN + "order:\n  - system_prompt\n  - todo\n"
            "  - checkpoint_messages\n  - query\n"
        },
        "schema.pattern",
        5,
        5,
    ),
    "order-start": Case(
        {
            "p.yaml": MIN + "order:\n  - framework__context\n  - system_prompt\n"
            "  - checkpoint_messages\n  - query\n"
        },
        "order.starts-with-system-prompt",
        4,
        5,
    ),
    "order-end": Case(
        {"p.yaml": MIN + "order: [system_prompt, query, checkpoint_messages]\n"},
        "order.ends-with-query",
        3,
    ),
    "order-duplicate": Case(
        {
            "p.yaml": MIN + "order:\n  - system_prompt\n  - query\n"
            "  - checkpoint_messages\n  - query\n"
        },
        "order.duplicate",
        7,
        5,
    ),
    "order-no-history": Case(
        {"p.yaml": MIN + "order: [system_prompt, query]\n"},
        "order.missing-checkpoint-messages",
        3,
        1,
    ),
    "persist-framework": Case(
        {"p.yaml": MIN + "layers:\n  framework__context:\n    persist: true\n"},
        "persist.framework",
        5,
        5,
    ),
    "persist-system-prompt": Case(
        {"p.yaml": MIN + "layers:\n  system_prompt: {persist: true}\n"}, "persist.system-prompt", 4
    ),
    "shared-system-prompt": Case(
        {"p.yaml": MIN + "layers:\n  system_prompt:\n    shared: true\n"},
        "shared.system-prompt",
        5,
        5,
    ),
    "mapreduce-history": Case(
        {
            "p.yaml": MIN + "processes:\n  react: {}\n  mapreduce_worker:\n"
            "    checkpoint_messages: true\n    query: runtime\n"
        },
        "process.mapreduce-history",
        6,
        5,
    ),
    "include-unknown": Case(
        {
            "p.yaml": MIN + "processes:\n  react:\n"
            "    include: [knowledge__context, nope__context]\n"
        },
        "process.include-unknown",
        5,
    ),
    "include-exclude-overlap": Case(
        {
            "p.yaml": MIN + "processes:\n  react:\n"
            "    include: [knowledge__context]\n"
            "    exclude:\n      - knowledge__context\n"
        },
        "process.include-exclude",
        7,
        9,
    ),
    "extends-cycle": Case(
        {"p.yaml": MIN + "extends: q.yaml\n", "q.yaml": MIN + "extends: p.yaml\n"},
        "extends.cycle",
        3,
        1,
        file="q.yaml",
    ),
    "extends-missing": Case(
        {"p.yaml": MIN + "extends: ../nowhere/base.yaml\n"}, "extends.missing", 3, 1
    ),
    "extends-not-policy-suffix": Case(
        {"p.yaml": MIN + "extends: notes.txt\n", "notes.txt": "hello\n"}, "extends.not-policy", 3, 1
    ),
    "extends-not-policy-content": Case(
        {"p.yaml": MIN + "extends:\n  - other.yaml\n", "other.yaml": "colors: [red]\n"},
        "extends.not-policy",
        4,
        5,
    ),
    "extends-absolute": Case(
        {"p.yaml": MIN + "extends: /etc/base.yaml\n"}, "extends.absolute", 3, 1
    ),
    "template-syntax-inline": Case(
        {
            "p.yaml": MIN + "layers:\n  framework__context:\n"
            "    collector:\n      type: template\n      template: |\n"
            "        line one\n        {{ broken\n"
        },
        "template.syntax",
        9,
    ),
    "template-syntax-file": Case(
        {
            "p.yaml": MIN + "layers:\n  todo__context:\n    collector:\n"
            "      type: state\n      field: todo\n"
            "      template_file: tpl/todo.j2\n",
            "tpl/todo.j2": "ok\n{% for x in %}\n",
        },
        "template.syntax",
        2,
        file="tpl/todo.j2",
    ),
    "template-file-escape": Case(
        {
            "p.yaml": MIN + "layers:\n  todo__context:\n    collector:\n"
            "      {type: state, field: todo, template_file: ../x.j2}\n"
        },
        "path.outside",
        6,
    ),
    "deep-nesting": Case(
        {"p.yaml": MIN + "vars:\n  x: " + "[" * 200 + "]" * 200 + "\n"}, "yaml.too-deep", 4
    ),
    "too-many-values": Case(
        {"p.yaml": MIN + "vars:\n  big: [" + "1," * 60_000 + "1]\n"}, "file.too-many-nodes", 4
    ),
    "non-finite": Case(
        {"p.yaml": MIN + "budget:\n  output_reserve: .nan\n"}, "value.non-finite", 4, 3
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_bad_input_text_format(name: str, run_cli) -> None:
    case = CASES[name]
    code, out, err = run_cli(case.files, "validate", case.target)
    assert code == 1, (out, err)
    file = case.file or case.target
    prefix = f"{file}:{case.line}:" + (f"{case.column}:" if case.column else "")
    matching = [line for line in out.splitlines() if f"[{case.rule}]" in line]
    assert matching, out
    assert any(line.startswith(prefix) for line in matching), (prefix, out)
    assert "Traceback" not in out + err


@pytest.mark.parametrize("name", CASES)
def test_bad_input_json_format(name: str, run_cli) -> None:
    case = CASES[name]
    code, out, _ = run_cli(case.files, "validate", case.target, "--format", "json")
    assert code == 1
    payload = json.loads(out)
    assert payload["valid"] is False
    assert payload["files"] == [case.target]
    hits = [i for i in payload["issues"] if i["rule"] == case.rule]
    assert hits, payload
    assert any(i["line"] == case.line and i["file"] == (case.file or case.target) for i in hits)
    assert set(hits[0]) == {"file", "line", "column", "path", "message", "rule", "severity"}


@pytest.mark.parametrize("name", CASES)
def test_bad_input_github_format(name: str, run_cli) -> None:
    case = CASES[name]
    code, out, _ = run_cli(case.files, "validate", case.target, "--format", "github")
    assert code == 1
    file = case.file or case.target
    expected = f"::error file={file},line={case.line},"
    assert any(line.startswith(expected) and case.rule in line for line in out.splitlines()), out


def test_billion_laughs_is_refused_before_any_expansion() -> None:
    # fails fast: the event pre-scan stops at the first alias that crosses the cap,
    # long before 9**9 nodes could be built (the test would never finish otherwise)
    from ctxpolicy.loading.yaml_reader import parse_yaml

    data, _, issues = parse_yaml(LAUGHS, "p.yaml")
    assert data is None
    assert [i.rule for i in issues] == ["yaml.alias-expansion"]


def test_small_aliases_are_allowed(run_cli) -> None:
    text = MIN + "vars:\n  a: &x {k: 1}\n  b: *x\n"
    code, out, _ = run_cli({"p.yaml": text}, "validate", "p.yaml")
    assert code == 0, out
