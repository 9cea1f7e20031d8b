"""Reading one file: YAML and TOML readers, source maps, limits, and never a traceback."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxpolicy.diagnostics import MAX_FILE_BYTES, Location, format_path, locate
from ctxpolicy.errors import PolicyValidationError
from ctxpolicy.loading import load_policy, resolve_policy, validate_paths
from ctxpolicy.loading.read import read_document
from ctxpolicy.loading.toml_reader import parse_toml, scan_toml_keys
from ctxpolicy.loading.yaml_reader import parse_yaml

REPO = Path(__file__).resolve().parents[2]


def test_yaml_source_map_has_key_and_item_positions() -> None:
    text = "version: 1\nbudget:\n  ratios: {query: 0.1}\norder:\n  - system_prompt\n  - query\n"
    data, smap, issues = parse_yaml(text, "p.yaml")
    assert issues == [] and data["order"] == ["system_prompt", "query"]
    assert smap[("budget", "ratios", "query")] == Location("p.yaml", 3, 12, 3)
    assert smap[("order", 1)] == Location("p.yaml", 6, 5, 6)


def test_yaml_block_scalar_value_starts_on_the_next_line() -> None:
    _, smap, _ = parse_yaml("a: |\n  text\n", "p.yaml")
    assert smap[("a",)].value_line == 2


def test_toml_key_scan_finds_tables_dotted_and_quoted_keys() -> None:
    text = (
        'version = 1\n[budget]\nratios.query = 0.1\n[layers."a__context".collector]\n'
        'type = "template"\ntemplate = """\nline\n"""\n[processes.react]\n'
    )
    smap = scan_toml_keys(text, "p.toml")
    assert smap[("budget", "ratios", "query")].line == 3
    assert smap[("layers", "a__context", "collector", "type")].line == 5
    assert smap[("layers", "a__context", "collector", "template")].value_line == 7
    assert smap[("processes", "react")].line == 9


def test_toml_location_of_a_schema_error(tmp_path: Path, write) -> None:
    write("p.toml", 'version = 1\nname = "t"\n\n[model]\ncontext_window = -1\n')
    (issue,) = validate_paths(["p.toml"])
    assert (issue.file, issue.line, issue.rule) == ("p.toml", 5, "schema.range")


def test_yaml_and_toml_load_to_the_same_effective_policy(write) -> None:
    write(
        "p.yaml",
        """\
version: 1
name: same
enable_share_context: false
budget: {ratios: {query: 0.2, knowledge__context: 0.3}}
layers:
  knowledge__context:
    overflow: drop
    collector: {type: retriever, service: kb, top_k: 4}
processes:
  react: {include: [knowledge__context]}
  mapreduce_worker: {checkpoint_messages: false, share_context: false, query: runtime}
""",
    )
    write(
        "p.toml",
        """\
version = 1
name = "same"
enable_share_context = false
[budget.ratios]
query = 0.2
knowledge__context = 0.3
[layers.knowledge__context]
overflow = "drop"
collector = { type = "retriever", service = "kb", top_k = 4 }
[processes.react]
include = ["knowledge__context"]
[processes.mapreduce_worker]
checkpoint_messages = false
share_context = false
query = "runtime"
""",
    )
    a = resolve_policy("p.yaml").policy
    b = resolve_policy("p.toml").policy
    assert a is not None and b is not None
    assert a.to_data() == b.to_data()


def test_size_limit_is_checked_before_reading(write, monkeypatch) -> None:
    path = write("big.yaml", "version: 1\nname: t\n#" + "x" * MAX_FILE_BYTES + "\n")

    def refuse(*_args, **_kwargs):
        raise AssertionError("a file over the limit must not be opened")

    monkeypatch.setattr(Path, "open", refuse)
    document, issues = read_document(path)
    assert document is None and [i.rule for i in issues] == ["file.too-large"]


def test_unreadable_file_is_an_issue(write) -> None:
    issues = validate_paths(["missing.yaml"])
    assert [i.rule for i in issues] == ["file.missing"]
    write("dir.yaml/x.txt", "")  # a folder named like a policy: nothing to validate
    assert validate_paths(["dir.yaml"]) == []


def test_non_string_keys_and_tags_are_refused(write) -> None:
    write("a.yaml", "version: 1\nname: t\n1: x\n")
    write("b.yaml", "version: 1\nname: !!binary aGk=\n")
    rules = {i.rule for i in validate_paths(["a.yaml", "b.yaml"])}
    assert rules == {"yaml.key-type", "yaml.tag"}


def test_toml_deep_nesting_is_refused(write) -> None:
    write("p.toml", 'version = 1\nname = "t"\n[vars]\nx = ' + "[" * 100 + "]" * 100 + "\n")
    rules = {i.rule for i in validate_paths(["p.toml"])}
    assert rules & {"toml.too-deep", "toml.syntax"}


def test_validate_paths_returns_every_issue_of_every_file(write) -> None:
    write("pol/a.yaml", "version: 1\nname: A\nbugdet: {}\n")
    write("pol/sub/b.toml", 'version = 2\nname = "b"\n')
    write("pol/notes.md", "not a policy\n")
    issues = validate_paths(["pol"])
    assert {(i.file, i.rule) for i in issues} == {
        ("pol/a.yaml", "schema.pattern"),
        ("pol/a.yaml", "schema.unknown-key"),
        ("pol/sub/b.toml", "schema.enum"),
    }


def test_did_you_mean_on_unknown_keys_and_enums(write) -> None:
    write(
        "p.yaml",
        "version: 1\nname: t\nmodel: {tokeniser: cl100k_base}\n"
        "layers:\n  todo_context: {}\n  knowledge__context: {overflow: truncate}\n",
    )
    messages = {i.path: i.message for i in validate_paths(["p.yaml"])}
    assert "did you mean 'tokenizer'?" in messages["$.model.tokeniser"]
    assert "did you mean 'todo__context'?" in messages["$.layers.todo_context"]
    assert "did you mean 'truncate_tail'" in messages["$.layers.knowledge__context.overflow"]


def test_format_path_and_locate_fallback() -> None:
    assert format_path(("a", 0, "b c")) == "$.a[0]['b c']"
    smap = {(): Location("f", 1, 1, 1), ("a",): Location("f", 2, 1, 2)}
    assert locate(smap, ("a", "b", 3), default="f").line == 2
    assert locate({}, ("x",), default="g") == Location("g", 1, 1, 1)


def test_bundled_policies_are_valid() -> None:
    issues = validate_paths([REPO / "policies"])
    assert [i for i in issues if i.severity == "error"] == []


# ------------------------------------------------------------------ property: never crash

_SEED_YAML = (REPO / "policies" / "base.yaml").read_text(encoding="utf-8")
_SEED_TOML = (REPO / "policies" / "teams" / "analytics.toml").read_text(encoding="utf-8")
_NOISE = st.sampled_from(
    [
        *":-[]{}&*!|>'\"#%@`,?\n\t =.\\",
        "  ",
        "\n  ",
        "- ",
        ": ",
        "&a ",
        "*a",
        "<<: ",
        "!!binary ",
        "---\n",
        "\ufeff",
        "\x00",
        "é",
        "[[",
    ]
)


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for position, delete, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + delete :]
    return text


_EDITS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 8), _NOISE), max_size=6)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(edits=_EDITS, toml=st.booleans())
def test_loader_never_raises_on_mutated_text(tmp_path: Path, edits, toml: bool) -> None:
    name = "m.toml" if toml else "m.yaml"
    path = tmp_path / name
    text = _mutate(_SEED_TOML if toml else _SEED_YAML, edits)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = resolve_policy(path)  # must return, whatever the text
    for issue in result.issues:
        assert issue.rule and issue.message
    if result.policy is None:
        assert result.errors
    try:
        load_policy(path)
    except PolicyValidationError as exc:  # the only exception the loader may raise
        assert exc.issues


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab=.[]{}\"'\\u\n #:-,*&!|>0x")), max_size=80))
def test_readers_return_issues_never_raise_on_arbitrary_text(text: str) -> None:
    for parse in (parse_yaml, parse_toml):
        data, _, issues = parse(text, "f")
        assert data is None or not issues
    assert scan_toml_keys(text, "f")[()].line == 1
