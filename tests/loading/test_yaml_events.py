"""The libyaml event reader gives exactly what the ruamel.yaml round-trip reader gives.

`parse_yaml` reads policy files through libyaml's event stream when it can
(`ctxpolicy.loading.yaml_events`) and through ruamel.yaml otherwise; these tests hold
that both give the same data (same Python types: ``1`` is not ``1.0`` nor ``True``),
the same source map (every line and column) and the same issues, on every YAML file of
the repository, on generated documents in many styles, and on YAML-flavoured noise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxpolicy.errors import PolicyFileRefusedError
from ctxpolicy.loading.yaml_events import libyaml, plain_scalar, read_events
from ctxpolicy.loading.yaml_reader import parse_yaml
from ctxpolicy.loading.yaml_roundtrip import parse_yaml_roundtrip

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(libyaml is None, reason="PyYAML without libyaml")


def _yaml_files() -> list[Path]:
    found = []
    for folder in ("tests", "policies", "examples", "docs", ".github"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".yaml", ".yml") and path.is_file():
                found.append(path)
    return found


YAML_FILES = _yaml_files()


def _same(text: str) -> tuple[Any, ...]:
    """Both readers on ``text``; fails when they differ in anything."""
    fast = parse_yaml(text, "p.yaml")
    slow = parse_yaml_roundtrip(text, "p.yaml")
    assert repr(fast[0]) == repr(slow[0]), text  # repr: 1, 1.0 and True differ
    assert fast[1] == slow[1], text
    assert list(fast[1]) == list(slow[1]), text  # the same order too
    assert fast[2] == slow[2], text
    return fast


def _took_fast_path(text: str) -> bool:
    try:
        return read_events(text, "p.yaml") is not None
    except PolicyFileRefusedError:
        return True


def test_the_repository_has_yaml_files_to_compare() -> None:
    assert len(YAML_FILES) > 100


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_of_the_repository_reads_the_same(path: Path) -> None:
    try:
        text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8 (the reader never sees it)")
    _same(text)


def test_the_bundled_policies_take_the_fast_path() -> None:
    policies = sorted((ROOT / "policies").rglob("*.yaml"))
    assert policies
    for path in policies:
        assert _took_fast_path(path.read_text(encoding="utf-8")), path


# ------------------------------------------------------------------ chosen documents

CASES = {
    "yaml 1.1 booleans are strings": "a: yes\nb: on\nc: No\nd: off\ne: y\n",
    "yaml 1.2 booleans": "a: true\nb: False\nc: TRUE\n",
    "numbers": "a: 1\nb: -2\nc: +3\nd: 1.5\ne: .5\nf: 1e3\ng: -1.5E-2\nh: 0\ni: 1.\n",
    "other bases and underscores": "a: 0o17\nb: 0x1F\nc: 017\nd: 1_000\ne: 0b101\nf: 08\n",
    "floats ruamel reads its way": "a: .inf\nb: -.Inf\nc: .nan\nd: 1_0.5\ne: 1e999\n",
    "timestamps": "a: 2001-02-03\nb: 2001-02-03T04:05:06Z\nc: 2001-02-30\n",
    "nulls": "a:\nb: ~\nc: null\nd: NULL\n",
    "merge keys": "base: &b {x: 1}\nchild:\n  <<: *b\n  y: 2\n",
    "value key": "a: =\n",
    "anchors": "a: &x [1, 2]\nb: *x\n",
    "tags": "a: !!str 1\nb: !custom x\nc: !!binary aGk=\n",
    "python tag": "a: !!python/tuple [1, 2]\n",
    "collection tag": "a: !!set {x, y}\n",
    "duplicate key": "a: 1\nb: 2\na: 3\n",
    "duplicate quoted key": "a: 1\n'a': 2\n",
    "int key": "1: a\n",
    "bool key": "true: a\n",
    "null key": "? \n: a\n",
    "complex key": "? [a, b]\n: c\n",
    "flow complex key": "{[a]: b}\n",
    "block scalars": "a: |\n  one\n  two\nb: >-\n  folded\n  text\nc: |+\n  keep\n\nd: x\n",
    "block scalar after an indented blank line": "a: |\n \n   text\nb: |\n\n   text\n",
    "block scalar with a comment on its header": "a: | # note\n  text\nb: |#\n  text\n",
    "block scalar in a list": "a:\n  - |\n    text\n  - >\n    more\n",
    "quoted": "a: 'it''s'\nb: \"tab\\there\\u00e9\"\nc: \"1\"\nd: 'true'\n",
    "multi-line plain": "a: one\n  two\n  three\nb: x\n",
    "multi-line quoted": "a: \"one\n  two\"\nb: 'x\n\n  y'\n",
    "comments": "# head\na: 1 # one\n# between\nb:   # after key\n  c: 2\n",
    "sequences": (
        "a:\n- 1\n- 2\nb:\n  - x\n  - - nested\n    - more\n  - {k: v}\nc: [1, [2, 3], {d: e}]\n"
    ),
    "indentless list of mappings": "a:\n- k: v\n  l: w\n- m: n\n",
    "flow mappings": "a: {b: 1, c: [x, y], 'd': \"e\"}\nf: {}\ng: []\n",
    "root list": "- a\n- b\n",
    "root scalar": "hello\n",
    "root number": "42\n",
    "empty": "",
    "only comments": "# nothing\n\n",
    "document marker": "---\na: 1\n...\n",
    "empty document": "---\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "yaml directive": "%YAML 1.1\n---\na: yes\n",
    "tag directive": "%TAG !e! tag:example.com,2000:\n---\na: 1\n",
    "crlf": "a: 1\r\nb:\r\n  - x\r\n  - y\r\nc: |\r\n  t\r\n",
    "tabs": 'a:\tb\nc: "x\ty"\n',
    "unicode": '名前: 値\nemoji: "😀 x"\nb: été\n',
    "unicode columns": "a: {é: 1, ü: [2, 😀]}\n",
    "long key": "? long\n: value\n",
    "syntax error": "a: [1, 2\nb: 3\n",
    "bad indent": "a:\n  b: 1\n c: 2\n",
    "tab indent": "a:\n\tb: 1\n",
    "unknown escape": 'a: "\\q"\n',
    "slash escape": 'a: "\\/"\n',
    "nel": "a: b\x85c: d\n",
    "line separator": "a: b\u2028c\n",
    "bom inside": "a: \ufeffb\n",
    "huge integer": "a: " + "9" * 4100 + "\n",
    "big integer": "a: " + "9" * 3999 + "\n",
    "deep": "a: " + "[" * 70 + "]" * 70 + "\n",
    "colon in value": "a: b: c\n",
    "url": "a: http://x.y/z?q=1#f\n",
    "plain with hash": "a: b#c\nd: e # f\n",
    "question plain": "a: ?x\nb: -x\nc: :x\n",
    "special plain starts": "a: -\nb: .\nc: +\nd: <\ne: ~x\nf: nope\ng: Tru\n",
    "signed zero": "a: -0\nb: -0.0\nc: +0\n",
    "exponent forms": "a: 1e+3\nb: 1E3\nc: .5e+3\nd: .5e3\ne: 1.e3\n",
}


@pytest.mark.parametrize("text", list(CASES.values()), ids=list(CASES))
def test_chosen_documents_read_the_same(text: str) -> None:
    _same(text)


def test_the_fast_path_reads_the_usual_policy_constructs() -> None:
    for name in ("numbers", "block scalars", "sequences", "flow mappings", "comments", "crlf"):
        assert _took_fast_path(CASES[name]), name


@pytest.mark.parametrize("text", ["a: -_\n", "a: !!set x, y}\n", "a: !!set x\n"])
def test_values_ruamel_cannot_construct_are_syntax_issues(text: str) -> None:
    # ruamel.yaml crashed on these (IndexError, AttributeError): now a placed issue
    data, _, issues = _same(text)
    assert data is None
    assert [(i.rule, i.line, i.column) for i in issues] == [("yaml.syntax", 1, 4)]
    assert "cannot read this value" in issues[0].message


def test_a_mapping_inside_a_mapping_key_is_a_syntax_issue() -> None:
    # ruamel.yaml cannot hash it (TypeError): now an issue at the top of the file
    data, _, issues = _same("{0: 0, {0: {}}: 1}\n")
    assert data is None
    assert [(i.rule, i.line, i.column) for i in issues] == [("yaml.syntax", 1, 1)]


def test_yaml_1_2_scalars() -> None:
    assert plain_scalar("yes") == "yes"
    assert plain_scalar("on") == "on"
    assert plain_scalar("true") is True
    assert plain_scalar("1") == 1
    assert repr(plain_scalar("1.0")) == "1.0"
    assert plain_scalar("nope") == "nope"


# --------------------------------------------------------------- generated documents

_TRICKY = st.sampled_from(
    [
        "yes", "no", "on", "off", "y", "n", "true", "False", "TRUE", "null", "~", "Null",
        "0o17", "0x1F", "017", "08", "1_000", "0b11", "1e3", "1E-3", ".5", "1.", "-.inf",
        ".NaN", "+1", "-0", "007", "1:30", "2001-02-03", "2001-02-03 04:05:06", "<<", "=",
        "-", ".", "x y", "a#b", "é", "😀", "12abc", "0.1.2", "1e", "+.5e+3", "3.25",
    ]
)  # fmt: skip
_WORD = (
    st.text(st.sampled_from("abcxyz_-é0129. "), min_size=1, max_size=8).map(str.strip).filter(bool)
)
_KEY = st.one_of(_WORD, _TRICKY)
_LEAF = st.one_of(
    _WORD,
    _TRICKY,
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=12),
)


def _tree(depth: int = 3) -> st.SearchStrategy[Any]:
    if depth == 0:
        return _LEAF
    child = _tree(depth - 1)
    return st.one_of(
        _LEAF,
        st.lists(st.tuples(_KEY, child), max_size=4),  # a mapping (duplicates possible)
        st.lists(child, max_size=4).map(lambda items: ("seq", items)),
    )


_STYLE = st.sampled_from(["plain", "single", "double", "literal", "folded"])


class _Renderer:
    """Writes a generated tree as YAML text, each node in a style drawn from ``draw``."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw

    def scalar(self, text: str, indent: int, *, key: bool = False) -> str:
        style = self.draw(_STYLE)
        if style in ("literal", "folded") and not key:
            body = text.replace("\r", "").splitlines() or [""]
            pad = " " * (indent + 2)
            marker = "|" if style == "literal" else ">"
            chomp = self.draw(st.sampled_from(["", "-", "+"]))
            return marker + chomp + "\n" + "\n".join(pad + line for line in body)
        if style == "single" or (style in ("literal", "folded") and key):
            return "'" + text.replace("'", "''") + "'"
        if style == "double":
            return json.dumps(text, ensure_ascii=self.draw(st.booleans()))
        return text

    def flow(self, node: Any) -> str:
        if isinstance(node, list):
            pairs = ", ".join(f"{self.flow_scalar(k)}: {self.flow(v)}" for k, v in node)
            return "{" + pairs + "}"
        if isinstance(node, tuple):
            return "[" + ", ".join(self.flow(v) for v in node[1]) + "]"
        return self.flow_scalar(node)

    def flow_scalar(self, text: str) -> str:
        if self.draw(st.booleans()):
            return json.dumps(text)
        return text

    def block(self, node: Any, indent: int) -> str:
        pad = " " * indent
        if isinstance(node, list):
            if not node or self.draw(st.integers(0, 4)) == 0:
                return " " + self.flow(node)
            lines = []
            for key, value in node:
                comment = "  # note" if self.draw(st.integers(0, 5)) == 0 else ""
                rendered = self.block(value, indent + 2)
                lines.append(f"{pad}{self.scalar(key, indent, key=True)}:{rendered}{comment}")
            return "\n" + "\n".join(lines)
        if isinstance(node, tuple):
            items = node[1]
            if not items or self.draw(st.integers(0, 4)) == 0:
                return " " + self.flow(node)
            dash_pad = pad if self.draw(st.booleans()) else " " * max(indent - 2, 0)
            lines = [f"{dash_pad}-{self.block(item, len(dash_pad) + 2)}" for item in items]
            return "\n" + "\n".join(lines)
        return " " + self.scalar(node, indent)


@st.composite
def _documents(draw: Any) -> str:
    tree = draw(st.lists(st.tuples(_KEY, _tree()), min_size=1, max_size=5))
    text = _Renderer(draw).block(tree, 0).lstrip("\n") + "\n"
    if draw(st.integers(0, 9)) == 0:
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 9)) == 0:
        text = "# a policy\n---\n" + text
    return text


_GENERATED = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_GENERATED
@given(_documents())
def test_generated_documents_read_the_same(text: str) -> None:
    _same(text)


_NOISE = st.lists(
    st.sampled_from([*"ab1:-[]{},'\"#&*!|>?% \n\t.~=<0e+\\", "é", "\r\n", "  ", "- "]),
    max_size=40,
).map("".join)


@_GENERATED
@given(_NOISE)
def test_yaml_noise_reads_the_same(text: str) -> None:
    _same(text)


def test_generated_documents_mostly_take_the_fast_path() -> None:
    # the comparison above is only worth something if the fast path reads most of them
    texts = [
        "a: 1\nb: [x, y]\nc:\n  d: 'e'\n  f: |\n    g\n",
        "order:\n- system_prompt\n- query\n",
    ]
    assert all(_took_fast_path(t) for t in texts)
