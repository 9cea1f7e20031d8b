"""Pure editing functions: one node patched, everything else byte for byte."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from ctxpolicy.editing import (
    EditError,
    format_yaml_value,
    parse_key,
    parse_value,
    set_toml_value,
    set_yaml_value,
)
from tests.editing.conftest import REPO

BASE = (REPO / "policies" / "base.yaml").read_text(encoding="utf-8")

DOC = """# head comment
version: 1                      # required
name: "data-platform"           # required

budget:
  ratios:                       # shares
    system_prompt: 0.12
    query: 0.12   # last

  redistribute: true
# between
order:
  - system_prompt
  - query   # end
vars:
processes:
  react:             {checkpoint_messages: true,  share_context: true}
  worker:  {checkpoint_messages: false,
            include: [a, b]}
notes: |
  first
  second

tail: x
"""


def load(text: str):
    return YAML(typ="safe", pure=True).load(text)


def lines_changed(before: str, after: str) -> list[int]:
    a, b = before.split("\n"), after.split("\n")  # YAML/TOML lines end only at \n
    assert len(a) == len(b)
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


def test_parse_key() -> None:
    assert parse_key("budget.ratios.query") == ("budget", "ratios", "query")
    assert parse_key("order.0") == ("order", "0")
    for bad in ("", " ", "a..b", ".a", "a.", "a b", "a.$x"):
        with pytest.raises(EditError, match="KEY"):
            parse_key(bad)


def test_parse_value_is_yaml() -> None:
    assert parse_value("0.1") == 0.1
    assert parse_value("false") is False
    assert parse_value("[a, b]") == ["a", "b"]
    assert parse_value("{x: 1}") == {"x": 1}
    assert parse_value('"false"') == "false"
    assert parse_value("plain text") == "plain text"
    with pytest.raises(EditError, match="VALUE"):
        parse_value("[a, b")


def test_scalar_replacement_touches_one_line() -> None:
    out = set_yaml_value(DOC, ("budget", "ratios", "query"), 0.2)
    assert lines_changed(DOC, out) == [7]
    assert out.splitlines()[7] == "    query: 0.2    # last"


def test_quoted_scalar_keeps_its_quotes() -> None:
    out = set_yaml_value(DOC, ("name",), "team-b")
    assert out.splitlines()[2] == 'name: "team-b"                  # required'


def test_flow_mapping_value_and_new_flow_item() -> None:
    out = set_yaml_value(DOC, ("processes", "worker", "include"), ["a"])
    assert lines_changed(DOC, out) == [18]
    assert out.splitlines()[18] == "            include: [a]}"
    out = set_yaml_value(DOC, ("processes", "react", "query"), "runtime")
    assert out.splitlines()[16].endswith("share_context: true, query: runtime}")
    assert load(out)["processes"]["react"]["query"] == "runtime"


def test_new_key_goes_after_its_siblings() -> None:
    out = set_yaml_value(DOC, ("budget", "ratios", "todo__context"), 0.05)
    assert out.splitlines()[8] == "    todo__context: 0.05"
    assert out.replace("    todo__context: 0.05\n", "", 1) == DOC


def test_new_nested_mappings_are_created() -> None:
    out = set_yaml_value(DOC, ("layers", "todo__context", "persist"), True)
    assert load(out)["layers"] == {"todo__context": {"persist": True}}
    assert "layers:\n  todo__context:\n    persist: true\n" in out
    assert out.replace("layers:\n  todo__context:\n    persist: true\n", "", 1) == DOC


def test_value_under_an_empty_key() -> None:
    out = set_yaml_value(DOC, ("vars", "product"), "Datapillar")
    assert "vars:\n  product: Datapillar\nprocesses:" in out
    assert load(out)["vars"] == {"product": "Datapillar"}


def test_block_list_replaced_in_block_style() -> None:
    out = set_yaml_value(DOC, ("order",), ["system_prompt", "checkpoint_messages", "query"])
    assert "order:\n  - system_prompt\n  - checkpoint_messages\n  - query   # end\n" in out
    out = set_yaml_value(DOC, ("order", "1"), "checkpoint_messages")
    assert lines_changed(DOC, out) == [13]


def test_block_scalar_replaced() -> None:
    out = set_yaml_value(DOC, ("notes",), "short")
    assert load(out)["notes"] == "short"
    assert out.endswith("notes: short\n\ntail: x\n")


def test_string_that_needs_quotes_is_quoted() -> None:
    for value in ("true", "1.5", "a: b", "x # y", "", " lead", "null", "[x]", "multi\nline"):
        out = set_yaml_value(DOC, ("tail",), value)
        assert load(out)["tail"] == value


def test_path_through_scalar_and_anchors_refused() -> None:
    with pytest.raises(EditError, match="single value"):
        set_yaml_value(DOC, ("version", "x"), 1)
    anchored = "a: &x {k: 1}\nb: *x\n"
    with pytest.raises(EditError, match="anchor"):
        set_yaml_value(anchored, ("a", "k"), 2)
    with pytest.raises(EditError, match="mapping"):
        set_yaml_value("- a\n- b\n", ("x",), 1)
    with pytest.raises(EditError, match="not valid YAML"):
        set_yaml_value("a: [\n", ("a",), 1)


def test_crlf_line_endings_are_kept() -> None:
    doc = "version: 1\r\nname: a\r\nbudget:\r\n  ratios:\r\n    query: 0.1\r\n"
    out = set_yaml_value(doc, ("budget", "ratios", "system_prompt"), 0.1)
    assert out == doc + "    system_prompt: 0.1\r\n"


def test_base_policy_every_leaf_edit_is_local() -> None:
    """Setting any scalar leaf of the real base policy to itself changes no byte."""
    data = load(BASE)

    def leaves(node, path=()):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from leaves(value, (*path, str(key)))
        elif not isinstance(node, list):
            yield path, node

    count = 0
    for path, value in leaves(data):
        assert set_yaml_value(BASE, path, value) == BASE or isinstance(value, float), path
        count += 1
    assert count > 30


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=40))
def test_any_string_round_trips_on_one_line(value: str) -> None:
    try:
        out = set_yaml_value(BASE, ("description",), value)
    except EditError:
        return  # refused is acceptable; a wrong file is not
    assert load(out)["description"] == value
    assert len(lines_changed(BASE, out)) == 1


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0, max_value=1, allow_nan=False))
def test_any_ratio_round_trips_on_one_line(value: float) -> None:
    out = set_yaml_value(BASE, ("budget", "ratios", "query"), value)
    assert load(out)["budget"]["ratios"]["query"] == value
    assert len(lines_changed(BASE, out)) == 1


def test_format_yaml_value_quotes_only_when_needed() -> None:
    assert format_yaml_value("team-a") == "team-a"
    assert format_yaml_value("true") == '"true"'
    assert format_yaml_value("123") == '"123"'
    assert format_yaml_value(["a", 1, None]) == "[a, 1, null]"


TOML = """# team
version = 1
name = "team-b"   # name
extends = "../base.yaml"

[budget]
output_reserve = 0.1

[budget.ratios]
query = 0.12    # q
knowledge__context = 0.1

[processes.react]
include = ["framework__context"]
description = '''
multi
line'''
"""


def test_toml_replace_and_insert() -> None:
    out = set_toml_value(TOML, ("budget", "ratios", "query"), 0.1)
    assert lines_changed(TOML, out) == [9]
    assert out.splitlines()[9] == "query = 0.1     # q"
    out = set_toml_value(TOML, ("name",), "team-c")
    assert out.splitlines()[2] == 'name = "team-c"   # name'
    out = set_toml_value(TOML, ("budget", "ratios", "todo__context"), 0.05)
    assert tomllib.loads(out)["budget"]["ratios"]["todo__context"] == 0.05
    assert out.replace("todo__context = 0.05\n", "", 1) == TOML
    out = set_toml_value(TOML, ("model", "context_window"), 1000)
    assert out.endswith("\n[model]\ncontext_window = 1000\n")
    out = set_toml_value(TOML, ("enable_share_context",), False)
    assert tomllib.loads(out)["enable_share_context"] is False


def test_toml_refuses_what_it_cannot_do_safely() -> None:
    with pytest.raises(EditError, match="null"):
        set_toml_value(TOML, ("name",), None)
    with pytest.raises(EditError, match="not valid TOML"):
        set_toml_value("a = [\n", ("a",), 1)
    with pytest.raises(EditError, match="not a table"):
        set_toml_value(TOML, ("name", "first"), "x")


def test_toml_multi_line_values_are_edited() -> None:
    """The regex editor refused these ("a multi-line TOML value"); tomlkit edits them in
    place and leaves every other line as it was."""
    out = set_toml_value(TOML, ("processes", "react", "description"), "x")
    assert tomllib.loads(out)["processes"]["react"]["description"] == "x"
    assert out == TOML.replace("'''\nmulti\nline'''", '"x"')
    layered = 'order = [\n  "system_prompt",   # first\n  "query",\n]\nname = "t"  # n\n'
    out = set_toml_value(layered, ("order",), ["system_prompt", "checkpoint_messages", "query"])
    assert tomllib.loads(out)["order"] == ["system_prompt", "checkpoint_messages", "query"]
    assert out.endswith('name = "t"  # n\n')
    out = set_toml_value(layered, ("name",), "u")
    assert out == layered.replace('"t"', '"u"')


def test_toml_key_inside_a_multi_line_string_is_not_a_key() -> None:
    """A line of a multi-line string that looks like ``key = value`` is text: the regex
    editor matched it first and refused the edit; the real key is the one edited."""
    text = 'description = """\nname = "fake"\n"""\nname = "team"\n'
    out = set_toml_value(text, ("name",), "other")
    assert out == text.replace('name = "team"', 'name = "other"')


def test_toml_inline_tables_and_dotted_keys() -> None:
    inline = 'version = 1\nprocesses = {react = {include = ["a"]}}  # p\n'
    out = set_toml_value(inline, ("processes", "react", "include"), ["b"])
    assert tomllib.loads(out)["processes"]["react"]["include"] == ["b"]
    assert out.startswith("version = 1\n") and out.endswith("# p\n")
    dotted = "# top\nbudget.output_reserve = 0.1\nname = 'x'\n"
    out = set_toml_value(dotted, ("budget", "output_reserve"), 0.2)
    assert out == dotted.replace("0.1", "0.2")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=30))
def test_toml_any_string_round_trips(value: str) -> None:
    try:
        out = set_toml_value(TOML, ("name",), value)
    except EditError:
        return
    assert tomllib.loads(out)["name"] == value
    assert len(lines_changed(TOML, out)) == 1


def test_check_candidate_reports_the_real_file(tmp_path: Path) -> None:
    from ctxpolicy.editing import check_candidate

    target = tmp_path / "p.yaml"
    issues = check_candidate(target, "version: 1\nname: BAD NAME\n")
    assert issues and all(i.file.endswith("p.yaml") for i in issues)
    assert list(tmp_path.iterdir()) == []


_SEGMENT = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_SCALAR = st.one_of(
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["vars", "model", "budget", "processes"]),
    st.lists(_SEGMENT, min_size=1, max_size=3),
    _SCALAR,
)
def test_any_new_key_lands_exactly_and_keeps_every_line(root, rest, value) -> None:
    """Creating keys (in flow or block mappings, any depth) changes only that value."""
    from ctxpolicy.editing import _with_value

    key = (root, *rest)
    original = load(BASE)
    try:
        out = set_yaml_value(BASE, key, value)
    except EditError:
        # refused only when the path runs through an existing scalar or list
        node = original
        for segment in key[:-1]:
            if not isinstance(node, dict):
                break
            node = node.get(segment, {})
        assert not isinstance(node, dict)  # the path runs through a scalar or a list
        return
    assert load(out) == _with_value(original, key, value)
    old_lines = BASE.split("\n")
    new_lines = out.split("\n")
    if len(new_lines) == len(old_lines):  # a flow mapping item or a replaced value
        assert len(lines_changed(BASE, out)) <= 1
    else:  # block lines inserted: the old lines survive in order
        it = iter(new_lines)
        assert all(any(line == other for other in it) for line in old_lines)
