"""A schema-valid document read as a `PlainPolicy` is the `Policy` of the same data, as
far as any rule can tell.

``ctxpolicy validate`` checks the documents the schema accepts without pydantic
(`ctxpolicy.validation.plain`). These tests hold that route to the models: the defaults
of every model, which fields hold another model, the fields and views of whole policies
(the repository's documents and generated ones), and the findings of both routes.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typing_extensions import TypeAliasType

import ctxpolicy.policy as models
from ctxpolicy.layers import COLLECTOR_TYPES
from ctxpolicy.loading import loader
from ctxpolicy.policy import Policy
from ctxpolicy.settings import SETTING_FIELDS, CtxPolicySettings
from ctxpolicy.validation import build_policy, check_schema, validate_data
from ctxpolicy.validation.plain import (
    COLLECTOR_MODELS,
    DEFAULTS,
    NESTED,
    PlainPolicy,
    Section,
    section,
)

from .test_schema_fast import DOCUMENTS

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("tests/corpus", "policies", "examples", "tests/hostile/corpus")


def _data(value: Any) -> Any:
    """A model, a section, a mapping or a sequence as plain nested data."""
    if isinstance(value, BaseModel):
        return {name: _data(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, Section):
        return {name: _data(item) for name, item in vars(value).items()}
    if isinstance(value, Mapping):
        return {key: _data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_data(item) for item in value]
    return value


def _model(name: str) -> type[BaseModel]:
    found = getattr(models, name)
    assert isinstance(found, type)
    assert issubclass(found, BaseModel)
    return found


# ------------------------------------------------------------------ the models' shape


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_the_defaults_are_the_models_defaults(name: str) -> None:
    fields = _model(name).model_fields
    optional = {k: f.get_default(call_default_factory=True) for k, f in fields.items()}
    optional = {k: v for k, v in optional.items() if not fields[k].is_required()}
    assert set(DEFAULTS[name]) == set(optional)
    empty = section(name, {})
    for field, default in optional.items():
        assert _data(getattr(empty, field)) == _data(default), (name, field)


def _models_in(annotation: Any) -> set[type[BaseModel]]:
    """The models an annotation can hold (through unions, aliases, Annotated, generics)."""
    if isinstance(annotation, TypeAliasType):
        return _models_in(annotation.__value__)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    found: set[type[BaseModel]] = set()
    for argument in typing.get_args(annotation):
        found |= _models_in(argument)
    return found


def _nested_of(model: type[BaseModel], field: str) -> str | None:
    annotation = model.model_fields[field].annotation
    held = _models_in(annotation)
    if not held:
        return None
    names = {m.__name__ for m in held}
    if names == set(COLLECTOR_MODELS.values()):
        return "collector"
    (name,) = names
    origin = typing.get_origin(annotation)
    return f"{{{name}}}" if origin is not None and "Mapping" in repr(annotation) else name


def test_every_model_the_format_reaches_has_its_defaults() -> None:
    reached: set[str] = set()
    todo = [Policy]
    while todo:
        model = todo.pop()
        if model.__name__ in reached:
            continue
        reached.add(model.__name__)
        for field in model.model_fields.values():
            todo.extend(_models_in(field.annotation))
    assert reached == set(DEFAULTS)


def test_nested_names_every_field_that_holds_a_model() -> None:
    found = {
        (name, field): nested
        for name in DEFAULTS
        for field in _model(name).model_fields
        if (nested := _nested_of(_model(name), field)) is not None
    }
    assert found == dict(NESTED)


def test_only_fields_with_a_default_hold_a_model() -> None:
    # `section` converts the nested models of the fields in DEFAULTS only
    assert all(field in DEFAULTS[model] for model, field in NESTED)


def test_each_collector_type_has_its_model() -> None:
    assert tuple(COLLECTOR_MODELS) == COLLECTOR_TYPES
    for kind, name in COLLECTOR_MODELS.items():
        assert typing.get_args(_model(name).model_fields["type"].annotation) == (kind,)


def test_the_settings_fields_are_the_models() -> None:
    assert tuple(CtxPolicySettings.model_fields) == SETTING_FIELDS


# ------------------------------------------------------------------ sections


def test_a_section_is_read_only_and_equal_by_its_fields() -> None:
    one = section("ProcessRule", {"include": ["a__context"]})
    same = section("ProcessRule", {"include": ("a__context",), "query": "checkpoint"})
    assert one == same
    assert hash(one) == hash(same)
    assert one.include == ("a__context",)
    assert one != section("ProcessRule", {"query": "runtime"})
    assert one != {"include": ("a__context",)}
    with pytest.raises(AttributeError, match="read-only"):
        one.query = "runtime"
    assert repr(one).startswith("Section(checkpoint_messages=True, ")


def test_a_section_holding_a_mapping_is_unhashable_like_the_model() -> None:
    budget = section("BudgetSpec", {"ratios": {"query": 0.1}})
    assert budget.ratios == {"query": 0.1}
    with pytest.raises(TypeError):
        hash(budget)
    with pytest.raises(TypeError):
        budget.ratios["query"] = 0.2  # type: ignore[index]


def test_collectors_get_the_model_their_type_names() -> None:
    layer = section("LayerSpec", {"collector": {"type": "recall", "candidates": 9}})
    assert layer.collector.candidates == 9
    assert layer.collector.weights == section("RecallWeights", {})
    assert layer.collector.memory_limit == 20
    assert getattr(layer.collector, "template", None) is None  # recall takes no template


def test_a_plain_policy_keeps_what_the_document_sets_apart() -> None:
    plain = PlainPolicy({"version": 1, "name": "p", "processes": {}}, source=Path("/x/p.yaml"))
    assert plain.model_fields_set == {"version", "name", "processes"}
    assert plain.source == Path("/x/p.yaml")
    assert plain.layer_base_dir("a__context") == Path("/x")
    assert "model_fields_set" not in vars(plain)
    assert plain.as_policy() is plain


def test_a_run_reads_each_shared_section_once() -> None:
    # team files that extend one base share its sections (the same objects): read once
    layers = {"a__context": {"collector": {"type": "template", "template": "x"}}}
    order = ["system_prompt", "a__context", "checkpoint_messages", "query"]
    memo: dict[Any, Any] = {}
    one = PlainPolicy({"version": 1, "name": "a", "layers": layers, "order": order}, memo=memo)
    two = PlainPolicy({"version": 1, "name": "b", "layers": layers, "order": order}, memo=memo)
    assert two.layers is one.layers
    assert two.order is one.order
    # only the mappings and lists are remembered, not each file's own scalars
    assert sorted(key[1] for key in memo) == ["layers", "order"]
    assert vars(one) == vars(
        PlainPolicy({"version": 1, "name": "a", "layers": layers, "order": order})
    )
    copied = {"a__context": {"collector": {"type": "template", "template": "x"}}}
    other = PlainPolicy({"version": 1, "name": "c", "layers": copied}, memo=memo)
    assert other.layers == one.layers
    assert other.layers is not one.layers
    assert PlainPolicy({"version": 1, "name": "d", "layers": layers}).layers is not one.layers


def test_a_reused_id_is_read_again() -> None:
    # the memo keeps the object it read: another object at the same address is not it
    layers = {"b__context": {"persist": True}}
    memo: dict[Any, Any] = {("plain", "layers", id(layers)): ({}, "stale")}
    plain = PlainPolicy({"version": 1, "name": "a", "layers": layers}, memo=memo)
    assert plain.layers["b__context"].persist is True
    assert memo[("plain", "layers", id(layers))] == (layers, plain.layers)


def test_an_unset_field_shares_its_default() -> None:
    one, two = PlainPolicy({"version": 1, "name": "a"}), PlainPolicy({"version": 1, "name": "b"})
    assert one.processes is two.processes
    assert one.processes["react"] == section("ProcessRule", {})


# ------------------------------------------------------------------ whole policies


VALID = [(n, d) for n, d in DOCUMENTS if not [f for f in check_schema(d) if f.severity == "error"]]


def _agree(data: dict[str, Any]) -> None:
    """Fields, views and findings of the plain and the typed route agree."""
    policy = Policy.model_validate(data)
    plain = PlainPolicy(data).as_policy()
    assert _data(vars(plain)) == _data(policy)
    assert plain.model_fields_set == policy.model_fields_set
    assert plain.available_tokens == policy.available_tokens
    assert plain.block_layers == policy.block_layers
    for name in {*policy.order, *policy.layers}:
        assert _data(plain.layer(name)) == _data(policy.layer(name)), name
        assert plain.ratio(name) == policy.ratio(name)
    for process in policy.processes:
        assert _data(plain.process(process)) == _data(policy.process(process))
        assert _data(plain.file_tools(process)) == _data(policy.file_tools(process))
    assert build_policy(data, typed=False)[1] == build_policy(data)[1]


def test_there_are_documents_to_compare() -> None:
    assert len(VALID) > 20
    assert len(DOCUMENTS) - len(VALID) > 20


@pytest.mark.parametrize(("name", "data"), VALID, ids=[n for n, _ in VALID])
def test_every_valid_document_of_the_repository(name: str, data: Any) -> None:
    _agree(data)


def _files() -> list[Path]:
    return [
        path
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".yaml", ".yml", ".toml") and path.is_file()
    ]


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_gets_the_same_issues_from_both_routes(path: Path) -> None:
    # files as the loader reads them: extends, folders, template files, every finding placed
    typed = loader.resolve_policy(path).issues
    assert loader._resolve(path, typed=False).issues == typed


def test_a_document_the_schema_refuses_still_gets_the_models_findings() -> None:
    order = ["query", "system_prompt", "checkpoint_messages"]
    data = {"version": 1, "name": "n", "order": order, "budget": {"ratios": {"query": "x"}}}
    policy, findings = build_policy(data, typed=False)
    assert policy is None
    assert findings == build_policy(data)[1]
    assert {f.rule for f in findings} >= {"schema.type", "order.starts-with-system-prompt"}


def test_the_plain_route_resolves_paths_against_the_source(tmp_path: Path) -> None:
    # no base_dirs: the file rules fall back to the policy file's folder, in both routes
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "ok.j2").write_text("{{ x }}", encoding="utf-8")
    (tmp_path / "prompts" / "bad.j2").write_text("{% if %}", encoding="utf-8")
    data = {
        "version": 1,
        "name": "p",
        "order": ["system_prompt", "a__context", "b__context", "checkpoint_messages", "query"],
        "layers": {
            "a__context": {"collector": {"type": "template", "template_file": "prompts/ok.j2"}},
            "b__context": {"collector": {"type": "template", "template_file": "prompts/bad.j2"}},
        },
        "tools": {"root": "missing"},
    }
    source = tmp_path / "p.yaml"
    typed = build_policy(data, source=source)[1]
    assert build_policy(data, source=source, typed=False)[1] == typed
    assert [(f.rule, f.file) for f in typed if f.file] == [
        ("template.syntax", str(tmp_path / "prompts" / "bad.j2"))
    ]
    assert "files.root-missing" in {f.rule for f in typed}


def test_the_plain_route_remembers_template_files_in_the_memo(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("hello", encoding="utf-8")
    order = ["system_prompt", "a__context", "checkpoint_messages", "query"]
    collector = {"type": "template", "template_file": "t.j2"}
    data = {
        "version": 1,
        "name": "p",
        "order": order,
        "layers": {"a__context": {"collector": collector}},
    }
    memo: dict[Any, Any] = {}
    build_policy(data, source=tmp_path / "p.yaml", memo=memo, typed=False)
    assert [key for key in memo if isinstance(key, tuple) and key[0] == "template_file"] == [
        ("template_file", tmp_path, "t.j2", ("layers", "a__context", "collector", "template_file"))
    ]


def test_the_plain_route_reads_shared_sections_through_the_memo() -> None:
    layers = {"a__context": {"persist": True}}
    memo: dict[Any, Any] = {}
    build_policy({"version": 1, "name": "p", "layers": layers}, memo=memo, typed=False)
    assert memo[("plain", "layers", id(layers))][0] is layers


def test_validate_data_passes_typed_on() -> None:
    data = {"version": 1, "name": "ok"}
    assert validate_data(data, {}, file="p.yaml", typed=False) == (None, [])
    policy, issues = validate_data(data, {}, file="p.yaml")
    assert policy is not None
    assert issues == []


def test_a_plain_route_returns_no_policy() -> None:
    policy, findings = build_policy({"version": 1, "name": "ok"}, typed=False)
    assert policy is None
    assert findings == []
    assert build_policy({"version": 1, "name": "ok"})[0] is not None


# ------------------------------------------------------------------ generated policies

BLOCKS = ["framework__context", "knowledge__context", "todo__context", "team__context"]
RESERVED = ["system_prompt", "checkpoint_messages", "query"]
COLLECTORS = [
    {"type": "template", "template": "{{ vars.x }}"},
    {"type": "template", "template": "{% if %}"},
    {"type": "state", "field": "todo__context"},
    {"type": "state", "field": "notes"},
    {"type": "retriever", "service": "kb", "top_k": 3},
    {"type": "memory", "strategy": "balanced"},
    {"type": "memory", "tier": "l2", "tiers": {"l1": 5}},
    {"type": "recall", "weights": {"dense": 0}},
    {"type": "tools"},
    {"type": "skills"},
    {"type": "agent_outputs", "limit": 3},
    {"type": "callable", "target": "pkg.mod:fn"},
    {"type": "files", "root": ".", "select": ["a.md", "../b.md"]},
]


@st.composite
def _layer(draw: st.DrawFn, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for key in ("persist", "shared"):
        if draw(st.booleans()):
            spec[key] = draw(st.booleans())
    if name.endswith("__context"):
        if draw(st.booleans()):
            spec["collector"] = draw(st.sampled_from(COLLECTORS))
        if draw(st.booleans()):
            spec["cache"] = "volatile-ok"
    if name == "checkpoint_messages" and draw(st.booleans()):
        spec["overflow"] = draw(st.sampled_from(["drop_oldest", "summarize"]))
        spec["clear_tool_results"] = draw(st.booleans())
    return spec


@st.composite
def _process(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    for key in ("checkpoint_messages", "share_context"):
        if draw(st.booleans()):
            rule[key] = draw(st.booleans())
    if draw(st.booleans()):
        rule["query"] = draw(st.sampled_from(["runtime", "checkpoint"]))
    for key in ("include", "exclude"):
        if draw(st.booleans()):
            rule[key] = draw(st.lists(st.sampled_from(BLOCKS), max_size=3))
    if draw(st.booleans()):
        rule["tools"] = {"root": "."}
    return rule


@st.composite
def _documents_generated(draw: st.DrawFn) -> dict[str, Any]:
    blocks = draw(st.lists(st.sampled_from(BLOCKS), unique=True, max_size=4))
    reserved = draw(st.lists(st.sampled_from(RESERVED), min_size=2, max_size=4))
    data: dict[str, Any] = {"version": 1, "name": "generated"}
    if draw(st.integers(0, 4)):
        data["order"] = draw(st.permutations([*blocks, *reserved]))
    names = draw(st.lists(st.sampled_from([*BLOCKS, *RESERVED]), unique=True, max_size=5))
    if names:
        data["layers"] = {name: draw(_layer(name)) for name in names}
    ratios = draw(st.lists(st.sampled_from([*BLOCKS, *RESERVED]), unique=True, max_size=4))
    if ratios or draw(st.booleans()):
        data["budget"] = {"ratios": {n: draw(st.sampled_from([0, 0.1, 0.25, 0.5])) for n in ratios}}
    processes = draw(st.lists(st.sampled_from(["react", "mapreduce_worker", "own"]), unique=True))
    if processes or draw(st.booleans()):
        data["processes"] = {p: draw(_process()) for p in processes}
    if draw(st.booleans()):
        data["default_process"] = draw(st.sampled_from(["react", "own", "planner"]))
    if draw(st.booleans()):
        data["enable_share_context"] = draw(st.booleans())
    if draw(st.booleans()):
        data["model"] = {"context_window": draw(st.sampled_from([1, 8000, 128_000]))}
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents_generated())
def test_generated_policies_agree(data: dict[str, Any]) -> None:
    valid = not [f for f in check_schema(data) if f.severity == "error"]
    event("schema-valid" if valid else "schema errors")
    if valid:
        _agree(data)
    else:
        assert build_policy(data, typed=False)[1] == build_policy(data)[1]


def test_sections_never_hold_lists_or_dicts() -> None:
    # what the models freeze, the sections freeze: no list or dict anywhere inside
    def walk(value: Any) -> None:
        assert not isinstance(value, list | dict), value
        if isinstance(value, Section):
            for item in vars(value).values():
                walk(item)
        elif isinstance(value, Mapping | tuple):
            for item in value.values() if isinstance(value, Mapping) else value:
                walk(item)

    for _, data in VALID:
        walk(PlainPolicy(data))
