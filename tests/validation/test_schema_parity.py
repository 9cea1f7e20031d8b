"""The JSON Schema and the pydantic models accept and reject the same files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from ctxpolicy.loading import validate_paths
from ctxpolicy.loading.read import read_document
from ctxpolicy.policy import Policy
from ctxpolicy.schema import load_schema, read_schema_text

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
VALIDATOR = Draft202012Validator(load_schema())


def _files(folder: str) -> list[Path]:
    return sorted(p for p in (CORPUS / folder).iterdir() if p.suffix in {".yaml", ".toml"})


def _data(path: Path) -> dict[str, Any]:
    document, issues = read_document(path)
    assert document is not None, issues
    return document.data


def _schema_ok(data: Any) -> bool:
    return not list(VALIDATOR.iter_errors(data))


def _model_ok(data: Any) -> bool:
    try:
        Policy.model_validate(data)
    except ValidationError:
        return False
    return True


def test_schema_is_a_valid_draft_2020_12_schema_with_descriptions() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert json.loads(read_schema_text()) == schema

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for name, prop in node.get("properties", {}).items():
                assert "description" in prop or "$ref" in prop, f"{path}.{name} lacks a description"
            if node.get("type") == "object" and "properties" in node and "oneOf" not in node:
                # closed objects everywhere (the collector union is closed in each branch)
                assert node.get("additionalProperties") is False, path
            for key, child in node.items():
                walk(child, f"{path}/{key}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, f"{path}/{index}")

    walk(schema, "#")


def test_repository_symlink_points_at_the_packaged_schema() -> None:
    link = Path(__file__).resolve().parents[2] / "schemas" / "ctxpolicy.schema.json"
    assert link.is_symlink()
    assert json.loads(link.read_text(encoding="utf-8")) == load_schema()


@pytest.mark.parametrize("path", _files("valid"), ids=lambda p: p.name)
def test_valid_corpus_is_accepted_by_schema_models_and_rules(path: Path) -> None:
    data = _data(path)
    assert _schema_ok(data), list(VALIDATOR.iter_errors(data))
    assert _model_ok(data)
    assert [i for i in validate_paths([path]) if i.severity == "error"] == []


@pytest.mark.parametrize("path", _files("invalid"), ids=lambda p: p.name)
def test_invalid_corpus_is_rejected_by_schema_and_models(path: Path) -> None:
    data = _data(path)
    assert not _schema_ok(data)
    assert not _model_ok(data)
    issues = validate_paths([path])
    assert issues and all(i.rule.startswith("schema.") for i in issues if i.severity == "error")
    assert all(i.line >= 1 for i in issues)


@pytest.mark.parametrize("path", _files("semantic"), ids=lambda p: p.name)
def test_semantic_corpus_is_structurally_valid_and_breaks_its_rule(path: Path) -> None:
    data = _data(path)
    assert _schema_ok(data) and _model_ok(data)
    expected = path.name.split("__")[0]
    rules = {i.rule for i in validate_paths([path]) if i.severity == "error"}
    assert expected in rules, rules


# ---------------------------------------------------------------- property: random edits

_BASE = _data(CORPUS / "valid" / "full.yaml")
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 200_000),
    st.floats(-2, 2, allow_nan=False),
    st.sampled_from(
        [
            "",
            "x",
            "react",
            "query",
            "a__context",
            "template",
            "l1",
            "1",
            "0.5",
            "system_prompt",
            "drop",
            "summarize",
            "runtime",
            "true",
        ]
    ),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["type", "x", "query", "a__context"]), inner, max_size=2),
    ),
    max_leaves=4,
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for key, child in node.items():
            out += _paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            out += _paths(child, (*path, index))
    return out


_ALL_PATHS = [p for p in _paths(_BASE) if p and p[0] != "vars"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(_ALL_PATHS), _VALUES, st.booleans()), min_size=1, max_size=3
    )
)
def test_schema_and_models_agree_on_random_edits(edits: list[Any]) -> None:
    data = copy.deepcopy(_BASE)
    for path, value, add_key in edits:
        node: Any = data
        try:
            for part in path[:-1]:
                node = node[part]
            if add_key and isinstance(node, dict):
                node[f"{path[-1]}_extra"] = value
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    assert _schema_ok(data) == _model_ok(data), (data, list(VALIDATOR.iter_errors(data)))
