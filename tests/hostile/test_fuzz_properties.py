"""Property-based fuzzing of the loader and the validator (hypothesis).

Arbitrary text and bytes, YAML/TOML-flavoured noise, and structured mutations of
``policies/base.yaml``: the loader never raises anything but `PolicyValidationError`,
every issue has a file, a line and a column, and every example finishes within a
per-example deadline (hypothesis fails an example that takes longer).

Figures: the ``max_examples`` below add up to `TOTAL_EXAMPLES` per run.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxpolicy.diagnostics import PolicyIssue
from ctxpolicy.errors import PolicyValidationError
from ctxpolicy.loading import load_policy, validate_paths
from ctxpolicy.loading.toml_reader import parse_toml
from ctxpolicy.loading.yaml_reader import parse_yaml
from ctxpolicy.policy import Policy
from ctxpolicy.validation import validate_data

ROOT = Path(__file__).resolve().parents[2]
BASE_TEXT = (ROOT / "policies" / "base.yaml").read_text(encoding="utf-8")
BASE_DATA: dict[str, Any] = parse_yaml(BASE_TEXT, "base.yaml")[0]

#: A generous bound per example: parsing and validating a small file takes milliseconds;
#: only a hang or a pathological slowdown gets near it.
FUZZ = settings(
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
EXAMPLES = {
    "text_yaml": 400,
    "text_toml": 250,
    "bytes": 300,
    "yaml_noise": 400,
    "toml_noise": 250,
    "splice_base": 300,
    "mutate_base": 300,
    "validator_data": 400,
}
TOTAL_EXAMPLES = sum(EXAMPLES.values())


def fuzz(name: str) -> settings:
    """The shared settings with the example budget of one test."""
    return settings(FUZZ, max_examples=EXAMPLES[name])


YAML_NOISE = st.text(
    alphabet=st.sampled_from(list("{}[]:,-?&*!|>'\"#%@`\n\t ~<=.ab01_\u0430\ufeff\x00\r")),
    max_size=300,
)
TOML_NOISE = st.text(
    alphabet=st.sampled_from(list("[]{}=.,\"'#\n\r\t abn01_-+:TZe\\u\u0430\x00")),
    max_size=300,
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=20), inner, max_size=5)
    ),
    max_leaves=25,
)
KEYS = st.sampled_from(
    [
        "version",
        "name",
        "extends",
        "order",
        "layers",
        "budget",
        "ratios",
        "model",
        "processes",
        "collector",
        "type",
        "template",
        "template_file",
        "root",
        "include",
        "exclude",
        "persist",
        "shared",
        "overflow",
        "query",
        "checkpoint_messages",
        "share_context",
        "default_process",
        "knowledge__context",
        "framework__context",
        "system_prompt",
        "l\u0430yers",
        "<<",
    ]
)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-fuzz-") as name:
        folder = Path(name)
        (folder / "templates").mkdir()
        (folder / "templates" / "todo.j2").write_text("{{ value }}\n")
        yield folder


def check_issues(issues: list[PolicyIssue]) -> None:
    for issue in issues:
        assert isinstance(issue, PolicyIssue)
        assert issue.file
        assert isinstance(issue.line, int)
        assert isinstance(issue.column, int)
        assert issue.line >= 1
        assert issue.column >= 1
        assert issue.message


def check_file(path: Path) -> None:
    """The loader's whole contract on one file."""
    issues = validate_paths([path])
    check_issues(issues)
    errors = [i for i in issues if i.severity == "error"]
    try:
        policy = load_policy(path)
    except PolicyValidationError as exc:
        assert errors
        check_issues(list(exc.issues))
    else:
        assert not errors
        assert isinstance(policy, Policy)


def write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    return path


@fuzz("text_yaml")
@given(text=st.text(max_size=400))
def test_any_text_as_yaml(workdir: Path, text: str) -> None:
    check_file(write(workdir, "p.yaml", text))


@fuzz("text_toml")
@given(text=st.text(max_size=400))
def test_any_text_as_toml(workdir: Path, text: str) -> None:
    check_file(write(workdir, "p.toml", text))


@fuzz("bytes")
@given(data=st.binary(max_size=600), suffix=st.sampled_from([".yaml", ".yml", ".toml"]))
def test_any_bytes(workdir: Path, data: bytes, suffix: str) -> None:
    check_file(write(workdir, f"p{suffix}", data))


@fuzz("yaml_noise")
@given(head=st.sampled_from(["", "version: 1\nname: t\n"]), noise=YAML_NOISE)
def test_yaml_syntax_noise(workdir: Path, head: str, noise: str) -> None:
    check_file(write(workdir, "p.yaml", head + noise))
    data, _, issues = parse_yaml(head + noise, "p.yaml")
    assert data is None or not issues


@fuzz("toml_noise")
@given(head=st.sampled_from(["", 'version = 1\nname = "t"\n']), noise=TOML_NOISE)
def test_toml_syntax_noise(workdir: Path, head: str, noise: str) -> None:
    check_file(write(workdir, "p.toml", head + noise))
    data, _, issues = parse_toml(head + noise, "p.toml")
    assert data is None or not issues


@fuzz("splice_base")
@given(
    at=st.integers(0, len(BASE_TEXT)),
    cut=st.integers(0, 80),
    insert=st.one_of(YAML_NOISE, st.text(max_size=40), KEYS.map(lambda k: f"\n{k}: ")),
)
def test_spliced_base_policy(workdir: Path, at: int, cut: int, insert: str) -> None:
    check_file(write(workdir, "p.yaml", BASE_TEXT[:at] + insert + BASE_TEXT[at + cut :]))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*path, index))


BASE_PATHS = list(_paths(BASE_DATA))[1:]


def _mutated(data: Any, path: tuple[Any, ...], op: str, key: str, value: Any) -> Any:
    data = json.loads(json.dumps(data))
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "replace":
        parent[last] = value
    elif op == "insert" and isinstance(parent[last], dict):
        parent[last][key] = value
    elif op == "insert" and isinstance(parent[last], list):
        parent[last].append(value)
    elif op == "rename" and isinstance(parent, dict):
        parent[key] = parent.pop(last)
    elif op == "duplicate" and isinstance(parent, list):
        parent.append(parent[last])
    return data


MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(BASE_PATHS),
        st.sampled_from(["delete", "replace", "insert", "rename", "duplicate"]),
        KEYS,
        JSON_VALUES,
    ),
    min_size=1,
    max_size=4,
)


def _apply(mutations: list[tuple[Any, ...]]) -> Any:
    data: Any = BASE_DATA
    for path, op, key, value in mutations:
        try:
            data = _mutated(data, path, op, key, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the path
    return data


@fuzz("mutate_base")
@given(mutations=MUTATIONS, as_toml=st.booleans())
def test_structurally_mutated_base_policy(
    workdir: Path, mutations: list[tuple[Any, ...]], as_toml: bool
) -> None:
    data = _apply(mutations)
    if as_toml:
        text = _to_toml(data)
        if text is None:
            return
        check_file(write(workdir, "p.toml", text))
    else:
        check_file(write(workdir, "p.yaml", json.dumps(data, indent=2)))  # JSON is YAML


def _to_toml(data: Any) -> str | None:
    """A TOML rendering (inline tables) of JSON-like data, None when TOML cannot hold it."""

    def value(v: Any) -> str | None:
        if v is None:
            return None
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            parts = [value(x) for x in v]
            return None if None in parts else "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
        parts = [(json.dumps(k), value(x)) for k, x in v.items()]
        if any(p is None for _, p in parts):
            return None
        return "{" + ", ".join(f"{k} = {p}" for k, p in parts) + "}"

    if not isinstance(data, dict):
        return None
    lines = []
    for key, item in data.items():
        rendered = value(item)
        if rendered is None:
            return None
        lines.append(f"{json.dumps(key)} = {rendered}")
    return "\n".join(lines) + "\n"


@fuzz("validator_data")
@given(data=st.one_of(JSON_VALUES, MUTATIONS.map(_apply)))
def test_validator_on_arbitrary_data(data: Any) -> None:
    policy, issues = validate_data(data, {}, file="memory.yaml")
    check_issues(issues)
    errors = [i for i in issues if i.severity == "error"]
    assert (policy is None) == bool(errors)


def test_fuzz_budget_is_reported() -> None:
    assert TOTAL_EXAMPLES >= 2500
