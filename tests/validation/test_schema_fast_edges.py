"""Each compiled keyword of `ctxpolicy.validation.schema_fast`, on small hand-made schemas.

The shipped schema exercises only some branches of each keyword (no non-string ``enum``,
no recursive ``$ref``, no schema with only ``patternProperties``...). Here every keyword
is compiled on its own and each verdict is both the exact expected value and the one
``jsonschema`` (draft 2020-12) gives, so the compiled check cannot drift from it.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from ctxpolicy.validation.schema_fast import (
    UnsupportedSchemaError,
    compile_schema,
    compile_sections,
    json_equal,
)

_TREE = {"$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}
_ONLY_PATTERNS = {"patternProperties": {"^a": {"type": "integer"}}}
_PATTERNS_CLOSED = {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False}
_DEPENDENT = {"dependentSchemas": {"a": {"required": ["b"]}}}
_ALL_THREE = {"allOf": [{"type": "integer"}, {"minimum": 0}, {"maximum": 3}]}
_PROPERTY_AND_PATTERN = {"properties": {"ab": {"minimum": 0}}, **_ONLY_PATTERNS}
_DECLARED_CLOSED = {"properties": {"a": {}}, "additionalProperties": False}
_SLASH = {"$defs": {"a/b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"}
_TILDE = {"$defs": {"a~b": {"type": "integer"}}, "$ref": "#/$defs/a~0b"}
_SHARED = {
    "$defs": {"i": {"type": "integer"}},
    "items": {"$ref": "#/$defs/i"},
    "not": {"$ref": "#/$defs/i"},
}

CASES: list[tuple[str, Any, Any, bool]] = [
    # an empty schema (and one of annotations only) accepts everything
    ("empty", {}, 1, True),
    ("empty", {}, None, True),
    ("annotations only", {"title": "t", "description": "d"}, "x", True),
    # boolean schemas
    ("true", True, 1, True),
    ("false", False, 1, False),
    ("not false", {"not": False}, 1, True),
    ("not true", {"not": True}, 1, False),
    # numeric bounds: only numbers are bounded, booleans are not numbers
    ("minimum below", {"minimum": 2}, 1, False),
    ("minimum equal", {"minimum": 2}, 2, True),
    ("minimum above", {"minimum": 2}, 2.5, True),
    ("minimum string", {"minimum": 2}, "a", True),
    ("minimum bool", {"minimum": 5}, True, True),
    ("maximum above", {"maximum": 2}, 3, False),
    ("maximum equal", {"maximum": 2}, 2, True),
    ("maximum below", {"maximum": 2}, 1, True),
    ("exclusiveMinimum equal", {"exclusiveMinimum": 2}, 2, False),
    ("exclusiveMinimum above", {"exclusiveMinimum": 2}, 3, True),
    ("exclusiveMaximum equal", {"exclusiveMaximum": 2}, 2, False),
    ("exclusiveMaximum below", {"exclusiveMaximum": 2}, 1.5, True),
    ("exclusiveMaximum null", {"exclusiveMaximum": 2}, None, True),
    # lengths of strings, arrays and objects apply to their own type only
    ("minLength short", {"minLength": 2}, "a", False),
    ("minLength equal", {"minLength": 2}, "ab", True),
    ("minLength list", {"minLength": 2}, [1], True),
    ("minLength number", {"minLength": 2}, 1, True),
    ("maxLength long", {"maxLength": 2}, "abc", False),
    ("maxLength equal", {"maxLength": 2}, "ab", True),
    ("maxLength list", {"maxLength": 2}, [1, 2, 3], True),
    ("maxLength number", {"maxLength": 2}, 7, True),
    ("minItems short", {"minItems": 2}, [1], False),
    ("minItems equal", {"minItems": 2}, [1, 2], True),
    ("minItems string", {"minItems": 2}, "a", True),
    ("minItems number", {"minItems": 2}, 3, True),
    ("maxItems long", {"maxItems": 2}, [1, 2, 3], False),
    ("maxItems equal", {"maxItems": 2}, [1, 2], True),
    ("maxItems string", {"maxItems": 2}, "abc", True),
    ("maxItems number", {"maxItems": 2}, 5, True),
    ("minProperties empty", {"minProperties": 1}, {}, False),
    ("minProperties equal", {"minProperties": 1}, {"a": 1}, True),
    ("minProperties string", {"minProperties": 1}, "", True),
    ("minProperties number", {"minProperties": 1}, 0, True),
    # items
    ("items all pass", {"items": {"type": "integer"}}, [1, 2], True),
    ("items one fails", {"items": {"type": "integer"}}, [1, "a"], False),
    ("items empty", {"items": {"type": "integer"}}, [], True),
    ("items string", {"items": {"type": "integer"}}, "abc", True),
    ("items number", {"items": {"type": "integer"}}, 5, True),
    # propertyNames
    ("propertyNames pass", {"propertyNames": {"maxLength": 2}}, {"ab": 1}, True),
    ("propertyNames fail", {"propertyNames": {"maxLength": 2}}, {"ab": 1, "abc": 1}, False),
    ("propertyNames string", {"propertyNames": {"maxLength": 2}}, "abc", True),
    ("propertyNames number", {"propertyNames": {"maxLength": 2}}, 5, True),
    # dependentSchemas: the dependent schema applies only when its key is present
    ("dependent present fails", _DEPENDENT, {"a": 1}, False),
    ("dependent present passes", _DEPENDENT, {"a": 1, "b": 2}, True),
    ("dependent absent", _DEPENDENT, {}, True),
    ("dependent absent other", _DEPENDENT, {"c": 1}, True),
    ("dependent number", _DEPENDENT, 5, True),
    # enum: strings only, and mixed values compared the JSON way
    ("enum strings in", {"enum": ["a", "b"]}, "b", True),
    ("enum strings out", {"enum": ["a", "b"]}, "c", False),
    ("enum strings not a string", {"enum": ["a", "b"]}, 1, False),
    ("enum mixed number", {"enum": [1, "a", None]}, 1, True),
    ("enum mixed float", {"enum": [1, "a", None]}, 1.0, True),
    ("enum mixed string", {"enum": [1, "a", None]}, "a", True),
    ("enum mixed null", {"enum": [1, "a", None]}, None, True),
    ("enum mixed other number", {"enum": [1, "a", None]}, 2, False),
    ("enum mixed boolean", {"enum": [1, "a", None]}, True, False),
    ("enum list", {"enum": [[1, 2], {"k": "v"}]}, [1, 2], True),
    ("enum list other", {"enum": [[1, 2], {"k": "v"}]}, [1, 3], False),
    ("enum object", {"enum": [[1, 2], {"k": "v"}]}, {"k": "v"}, True),
    ("enum object other value", {"enum": [[1, 2], {"k": "v"}]}, {"k": "w"}, False),
    # const
    ("const equal", {"const": [1, {"a": True}]}, [1, {"a": True}], True),
    ("const bool vs number", {"const": [1, {"a": True}]}, [1, {"a": 1}], False),
    # type: one name and several
    ("type one", {"type": "string"}, "x", True),
    ("type one wrong", {"type": "string"}, None, False),
    ("types first", {"type": ["string", "null"]}, "x", True),
    ("types second", {"type": ["string", "null"]}, None, True),
    ("types neither", {"type": ["string", "null"]}, 5, False),
    ("three types last", {"type": ["string", "null", "boolean"]}, False, True),
    ("three types none", {"type": ["string", "null", "boolean"]}, 0, False),
    ("integer float", {"type": "integer"}, 2.0, True),
    ("integer fraction", {"type": "integer"}, 2.5, False),
    ("integer bool", {"type": "integer"}, True, False),
    ("number bool", {"type": "number"}, False, False),
    # oneOf: exactly one
    ("oneOf none", {"oneOf": [{"type": "string"}, {"type": "integer"}]}, None, False),
    ("oneOf one", {"oneOf": [{"type": "string"}, {"type": "integer"}]}, 1, True),
    ("oneOf two", {"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1, False),
    ("oneOf second only", {"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 0.5, True),
    ("anyOf none", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, None, False),
    ("anyOf two", {"anyOf": [{"type": "integer"}, {"minimum": 0}]}, 1, True),
    ("allOf one fails", {"allOf": [{"type": "integer"}, {"minimum": 0}]}, -1, False),
    ("allOf three pass", _ALL_THREE, 2, True),
    ("allOf three third fails", _ALL_THREE, 4, False),
    # object shape: each of properties, patternProperties, additionalProperties alone
    ("properties only pass", {"properties": {"a": {"type": "integer"}}}, {"a": 1, "b": "x"}, True),
    ("properties only fail", {"properties": {"a": {"type": "integer"}}}, {"a": "x"}, False),
    ("properties non-object", {"properties": {"a": {"type": "integer"}}}, 5, True),
    ("properties const", {"properties": {"t": {"const": "x"}}}, {"t": "y"}, False),
    ("properties const pass", {"properties": {"t": {"const": "x"}}}, {"t": "x"}, True),
    ("patterns only pass", _ONLY_PATTERNS, {"ab": 1, "b": "x"}, True),
    ("patterns only fail", _ONLY_PATTERNS, {"ab": "x"}, False),
    ("patterns only second key fails", _ONLY_PATTERNS, {"ab": 1, "ac": "x"}, False),
    ("patterns only non-object", _ONLY_PATTERNS, "ab", True),
    ("patterns closed matched", _PATTERNS_CLOSED, {"ab": 1}, True),
    ("patterns closed matched wrong", _PATTERNS_CLOSED, {"ab": "x"}, False),
    ("patterns closed unmatched", _PATTERNS_CLOSED, {"b": 1}, False),
    ("patterns closed empty", _PATTERNS_CLOSED, {}, True),
    ("pattern and property both apply", _PROPERTY_AND_PATTERN, {"ab": 1.5}, False),
    ("additional false", {"additionalProperties": False}, {"a": 1}, False),
    ("additional false empty", {"additionalProperties": False}, {}, True),
    ("additional false non-object", {"additionalProperties": False}, [1], True),
    ("additional schema pass", {"additionalProperties": {"type": "integer"}}, {"a": 1}, True),
    ("additional schema fail", {"additionalProperties": {"type": "integer"}}, {"a": "x"}, False),
    ("additional true", {"properties": {}, "additionalProperties": True}, {"a": 1}, True),
    ("declared key is not additional", _DECLARED_CLOSED, {"a": 1}, True),
    # $ref: local, escaped (~1 is '/', ~0 is '~'), shared, and recursive
    ("ref slash", _SLASH, 1, True),
    ("ref slash wrong", _SLASH, "x", False),
    ("ref tilde", _TILDE, 1, True),
    ("ref tilde wrong", _TILDE, "x", False),
    ("ref twice", _SHARED, [1], True),
    ("ref twice wrong", _SHARED, ["x"], False),
    ("recursive flat", {**_TREE, "$ref": "#/$defs/tree"}, [], True),
    ("recursive nested", {**_TREE, "$ref": "#/$defs/tree"}, [[], [[]]], True),
    ("recursive nested wrong", {**_TREE, "$ref": "#/$defs/tree"}, [[], [[1]]], False),
    ("recursive top wrong", {**_TREE, "$ref": "#/$defs/tree"}, 1, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "document", "expected"),
    [case[1:] for case in CASES],
    ids=[f"{i}-{case[0]}" for i, case in enumerate(CASES)],
)
def test_the_compiled_check_agrees_with_jsonschema(
    schema: Any, document: Any, expected: bool
) -> None:
    assert Draft202012Validator(schema).is_valid(document) is expected
    assert compile_schema(schema)(document) is expected


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"items": 5}, "not a schema: 5"),
        ({"if": {}, "then": {}, "type": "object"}, "keywords not compiled: ['if', 'then']"),
        ({"$ref": "other.json"}, "$ref 'other.json' is not local"),
        ({"$defs": {}, "$ref": "#/$defs/missing"}, "$ref '#/$defs/missing' points nowhere"),
        ({"$defs": {"a": 1}, "$ref": "#/$defs/a/b"}, "$ref '#/$defs/a/b' points nowhere"),
        ({"$defs": {"a/b": {}}, "$ref": "#/$defs/a/b"}, "$ref '#/$defs/a/b' points nowhere"),
    ],
)
def test_a_schema_that_cannot_be_compiled_says_why(schema: Any, message: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as caught:
        compile_schema(schema)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("one", "two", "expected"),
    [
        ([1], [1, 2], False),
        ([1, 2], [1, 3], False),
        ([1, 2], [1.0, 2], True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {"b": 1}, False),
        ({"a": 1}, {"a": 1.0}, True),
        ("a", ["a"], False),
        (["a"], "a", False),
        ("ab", ["a", "b"], False),
        ("ab", "ab", True),
        (None, False, False),
        (0, False, False),
        (True, True, True),
    ],
)
def test_json_equal(one: Any, two: Any, expected: bool) -> None:
    assert json_equal(one, two) is expected


def test_sections_of_a_closed_root() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    }
    sections = compile_sections(schema)
    assert sections is not None
    required, checks = sections
    assert required == frozenset({"a"})
    assert sorted(checks) == ["a", "b"]
    assert [checks["a"](1), checks["a"]("x"), checks["b"]("x"), checks["b"](1)] == [
        True,
        False,
        True,
        False,
    ]


def test_sections_of_a_root_without_properties_or_required() -> None:
    assert compile_sections({"type": "object", "additionalProperties": False}) == (frozenset(), {})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {"type": "object", "additionalProperties": True},
        {"type": "array", "additionalProperties": False},
        {"additionalProperties": False},
        {"type": "object", "additionalProperties": False, "minProperties": 1},
        {"type": "object", "additionalProperties": {"type": "string"}},
    ],
)
def test_a_root_that_is_not_a_closed_object_has_no_sections(schema: dict[str, Any]) -> None:
    assert compile_sections(schema) is None
