"""The shipped schema is what the models generate: the models are the format's one source.

``ctxpolicy/schemas/ctxpolicy.schema.json`` is generated from ``ctxpolicy.policy`` by
``ctxpolicy.schemas.generate``. When the first test fails, a model changed and the file
did not: regenerate it (the failure prints the command) and commit both.
"""

from __future__ import annotations

import difflib
import itertools
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from ctxpolicy.layers import (
    COLLECTOR_TYPES,
    DEFAULT_OVERFLOW,
    OVERFLOW_RULES,
    TOKENIZER_NAMES,
    FileToolName,
    MemorySource,
    MemoryStrategy,
    MemoryTier,
    QueryPath,
)
from ctxpolicy.policy import KIND_ONLY_FIELDS, LayerSpec, Policy
from ctxpolicy.schema import SCHEMA_FILE, read_schema_text
from ctxpolicy.schemas import generate
from ctxpolicy.schemas.generate import (
    LAYER_DEFINITIONS,
    REGENERATE,
    generate_policy_schema,
    main,
    render_policy_schema,
)

SCHEMA = generate_policy_schema()
DEFS: dict[str, Any] = SCHEMA["$defs"]


def test_shipped_schema_is_what_the_models_generate() -> None:
    shipped = read_schema_text()
    generated = render_policy_schema()
    if shipped != generated:
        diff = difflib.unified_diff(
            shipped.splitlines(keepends=True),
            generated.splitlines(keepends=True),
            f"shipped {SCHEMA_FILE}",
            "generated from ctxpolicy.policy",
        )
        pytest.fail(
            f"ctxpolicy/schemas/{SCHEMA_FILE} differs from what the models generate; "
            f"regenerate it with\n\n    {REGENERATE}\n\n{''.join(itertools.islice(diff, 80))}",
            pytrace=False,
        )


def test_generation_is_deterministic() -> None:
    assert render_policy_schema() == render_policy_schema()


def test_check_names_the_command_and_write_repairs(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / SCHEMA_FILE
    stale.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(generate, "SHIPPED_SCHEMA", stale)
    assert main(["--check"]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--write"]) == 0
    assert stale.read_text(encoding="utf-8") == render_policy_schema()
    assert main(["--check"]) == 0
    assert main([]) == 0
    assert capsys.readouterr().out.endswith(render_policy_schema())


def _nodes(node: Any, path: str = "#") -> list[tuple[str, dict[str, Any]]]:
    """Every schema object with its path (``default`` values are data, not schemas)."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, child in node.items():
            if key in {"default", "enum", "const", "required"}:
                continue
            if key in {"properties", "patternProperties", "$defs", "dependentSchemas"}:
                for name, sub in child.items():
                    found += _nodes(sub, f"{path}/{key}/{name}")
            else:
                found += _nodes(child, f"{path}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _nodes(child, f"{path}/{index}")
    return found


def test_the_generated_schema_carries_no_generator_noise() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] == "https://ctxpolicy.dev/schemas/ctxpolicy.schema.json"
    assert SCHEMA["title"] == "ctxpolicy policy (version 1)"
    for path, node in _nodes(SCHEMA):
        if path != "#":
            assert "title" not in node, path
        assert node.get("type") != "null", path  # the format has no null
        # pydantic's own keywords and annotated-types' bound names are not JSON Schema
        assert not {"discriminator", "ge", "gt", "le", "lt"} & set(node), path
        ref = node.get("$ref")
        if ref is not None:
            assert ref.removeprefix("#/$defs/") in DEFS, path


def test_definition_names_are_stable() -> None:
    # editors, docs and tests (tests/memory/test_policy_keys.py) refer to these names
    assert set(DEFS) == {
        "collector",
        "templateCollector",
        "stateCollector",
        "retrieverCollector",
        "callableCollector",
        "memoryCollector",
        "filesCollector",
        "toolsCollector",
        "agentOutputsCollector",
        "skillsCollector",
        "aggregateCollector",
        "recallCollector",
        "blockLayer",
        "systemPromptLayer",
        "historyLayer",
        "queryLayer",
        "layerName",
        "blockLayerName",
        "ratio",
        "fileTools",
        "process",
    }


def test_enumerations_come_from_the_vocabulary() -> None:
    model = SCHEMA["properties"]["model"]["properties"]
    assert model["tokenizer"]["enum"] == list(TOKENIZER_NAMES)
    assert DEFS["collector"]["properties"]["type"]["enum"] == list(COLLECTOR_TYPES)
    branches = [DEFS[b["$ref"].removeprefix("#/$defs/")] for b in DEFS["collector"]["oneOf"]]
    assert [b["properties"]["type"]["const"] for b in branches] == list(COLLECTOR_TYPES)
    for kind, definition in LAYER_DEFINITIONS.items():
        overflow = DEFS[definition]["properties"]["overflow"]
        assert overflow["enum"] == list(OVERFLOW_RULES[kind])
        assert overflow["default"] == DEFAULT_OVERFLOW[kind]
    assert DEFS["process"]["properties"]["query"]["enum"] == list(get_args(QueryPath))
    memory = DEFS["memoryCollector"]["properties"]
    assert memory["strategy"]["enum"] == list(get_args(MemoryStrategy))
    assert memory["tier"]["enum"] == list(get_args(MemoryTier))
    assert list(memory["shares"]["properties"]) == list(get_args(MemorySource))
    assert DEFS["fileTools"]["properties"]["allow"]["items"]["enum"] == list(get_args(FileToolName))


def test_each_kind_of_layer_takes_its_own_fields_only() -> None:
    common = set(LayerSpec.model_fields) - set(KIND_ONLY_FIELDS)
    for kind, definition in LAYER_DEFINITIONS.items():
        own = {field for field, (owner, _) in KIND_ONLY_FIELDS.items() if owner == kind}
        assert set(DEFS[definition]["properties"]) == common | own, kind


_KIND_ONLY_VALUES: dict[str, Any] = {
    "collector": {"type": "template", "template": "x"},
    "references": {"root": "."},
    "curate": True,
    "clear_tool_results": True,
    "cache": "volatile-ok",
}


@pytest.mark.parametrize("field", sorted(KIND_ONLY_FIELDS))
def test_models_refuse_a_kind_only_field_on_another_layer(field: str) -> None:
    owner, message = KIND_ONLY_FIELDS[field]
    other = "system_prompt" if owner != "system_prompt" else "query"
    data = {"version": 1, "name": "x", "layers": {other: {field: _KIND_ONLY_VALUES[field]}}}
    with pytest.raises(ValidationError, match=message):
        Policy.model_validate(data)


def test_pydantic_own_generator_still_works_on_the_models() -> None:
    # the schema hooks on the models must not break Policy.model_json_schema()
    for mode in ("validation", "serialization"):
        assert Policy.model_json_schema(mode=mode)["$defs"]
