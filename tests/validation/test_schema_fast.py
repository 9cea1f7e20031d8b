"""The compiled schema check accepts exactly the documents jsonschema accepts.

`ctxpolicy.validation.schema_fast` compiles the shipped schema into closures; a document
they accept is reported valid without running jsonschema, so they must agree with
``Draft202012Validator.is_valid`` on every document: the corpus, the bundled policies and
examples, every ``$defs`` entry on its own, and generated documents (mutations of valid
policies, arbitrary JSON values with the schema's own words).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.loading.extends import resolve_extends
from ctxpolicy.schema import load_schema
from ctxpolicy.validation import check_schema, schema_check
from ctxpolicy.validation.schema_fast import (
    UnsupportedSchemaError,
    compile_schema,
    compile_sections,
    json_equal,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = load_schema()
VALIDATOR = Draft202012Validator(SCHEMA)
FAST = compile_schema(SCHEMA)


def _documents() -> list[tuple[str, Any]]:
    found = []
    for folder in ("tests/corpus", "policies", "examples", "tests/hostile/corpus"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".yaml", ".yml", ".toml") and path.is_file():
                merged = resolve_extends(path)
                if isinstance(merged.data, dict):
                    found.append((str(path.relative_to(ROOT)), merged.data))
    return found


DOCUMENTS = _documents()


def _agree(value: Any) -> None:
    assert FAST(value) == VALIDATOR.is_valid(value), value


def test_the_shipped_schema_compiles() -> None:
    assert compile_schema(SCHEMA) is not None


def test_there_are_valid_and_invalid_documents_to_compare() -> None:
    verdicts = [VALIDATOR.is_valid(data) for _, data in DOCUMENTS]
    assert verdicts.count(True) > 20
    assert verdicts.count(False) > 20


@pytest.mark.parametrize(("name", "data"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_every_document_of_the_repository(name: str, data: Any) -> None:
    _agree(data)


@pytest.mark.parametrize("name", sorted(SCHEMA["$defs"]))
def test_every_definition_on_its_own(name: str) -> None:
    # a definition's check, fed values of every JSON type and the schema's own words
    schema = {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{name}"}
    fast = compile_schema(schema)
    validator = Draft202012Validator(schema)
    for value in _SAMPLES:
        assert fast(value) == validator.is_valid(value), (name, value)


def test_unknown_keywords_are_refused_not_skipped() -> None:
    for schema in ({"uniqueItems": True}, {"if": {}, "then": {}}, {"$ref": "other.json"}):
        with pytest.raises(UnsupportedSchemaError):
            compile_schema(schema)


def test_a_valid_document_needs_no_jsonschema() -> None:
    valid = next(data for _, data in DOCUMENTS if VALIDATOR.is_valid(data))
    assert check_schema(valid) == []


def test_json_equality_keeps_booleans_apart_from_numbers() -> None:
    assert json_equal(1, 1.0)
    assert not json_equal(True, 1)
    assert not json_equal([False], [0])
    assert json_equal({"a": [1]}, {"a": [1.0]})
    assert not json_equal("1", 1)


# --------------------------------------------------------------------- generated data


def _words(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("properties", "patternProperties", "$defs"):
                yield from value
            if key in ("enum", "required"):
                yield from (v for v in value if isinstance(v, str))
            if key == "const" and isinstance(value, str):
                yield value
            yield from _words(value)
    elif isinstance(node, list):
        for item in node:
            yield from _words(item)


WORDS = sorted({*_words(SCHEMA), *DEFAULT_ORDER, "x__context", "Bad", "", "a" * 200, "-x"})
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2, 3, 100, 10**6, 10**30, 0.0, -0.0, 0.5, 1.0, 1.5, 2.0, 0.9]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(WORDS),
    st.text(max_size=6),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(WORDS), st.text(max_size=4)), inner, max_size=4),
    ),
    max_leaves=10,
)
_SAMPLES = [
    None, True, False, 0, 1, -1, 0.5, 1.0, 2.5, 10**9, "", "x", "react", "system_prompt",
    [], ["system_prompt", "query"], [1], {}, {"type": "template"}, {"type": "retriever"},
    {"type": "retriever", "service": "s"}, {"type": "template", "template": "t"},
    {"type": "memory", "strategy": "x"}, {"root": "."}, {"x": 1},
]  # fmt: skip
_SAMPLES += [{"type": word} for word in WORDS[:80]] + [{word: 1} for word in WORDS[:80]]
_VALID = [data for _, data in DOCUMENTS if VALIDATOR.is_valid(data)]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*path, index))


@st.composite
def _mutated(draw: Any) -> Any:
    data = copy.deepcopy(draw(st.sampled_from(_VALID)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(data))))
        if not path:
            continue
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        op = draw(st.sampled_from(["delete", "replace", "insert", "rename"]))
        if op == "delete":
            del parent[last]
        elif op == "replace":
            parent[last] = draw(_VALUES)
        elif op == "insert" and isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(WORDS))] = draw(_VALUES)
        elif op == "insert" and isinstance(parent[last], list):
            parent[last].append(draw(_VALUES))
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(WORDS))] = parent.pop(last)
    return data


_GENERATED = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_GENERATED
@given(_mutated())
def test_mutated_valid_policies(data: Any) -> None:
    _agree(data)


@_GENERATED
@given(_VALUES)
def test_arbitrary_values(value: Any) -> None:
    _agree(value)


# ------------------------------------------------------- the check, section by section


def test_the_shipped_schema_splits_by_top_level_key() -> None:
    assert compile_sections(SCHEMA) is not None
    assert compile_sections({"type": "object", "minProperties": 1}) is None


@_GENERATED
@given(st.lists(_mutated(), min_size=1, max_size=4))
def test_section_by_section_with_a_shared_memo(documents: list[Any]) -> None:
    # documents that share values (as team files share their base's) and one memo
    shared = documents[0]
    memo: dict[Any, Any] = {}
    for document in documents:
        data = document
        if isinstance(document, dict) and isinstance(shared, dict):
            own = {k: v for k, v in document.items() if k not in ("layers", "order")}
            data = {**shared, **own}
        assert schema_check._valid(data, memo) == VALIDATOR.is_valid(data), data
        assert check_schema(data, memo=memo) == check_schema(data)
