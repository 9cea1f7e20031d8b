"""check-jsonschema, with the shipped schema, agrees with ``ctxpolicy validate``.

The schema is the public contract: a third-party validator that reads it must accept
every file of ``tests/corpus/valid`` and reject every file of ``tests/corpus/invalid``
(YAML and TOML; check-jsonschema reads both), at the same places ctxpolicy reports.
``tests/corpus/semantic`` files are valid for the schema and rejected only by
ctxpolicy's semantic rules, each by the rule its name gives.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import REPO, python_client

CORPUS = REPO / "tests" / "corpus"
SCHEMA = REPO / "ctxpolicy" / "schemas" / "ctxpolicy.schema.json"
CTXPOLICY = [sys.executable, "-m", "ctxpolicy"]


def _corpus() -> list[Path]:
    return sorted(
        path
        for folder in ("valid", "invalid", "semantic")
        for path in (CORPUS / folder).iterdir()
        if path.suffix in {".yaml", ".yml", ".toml"}
    )


def _json(command: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _covers(outer: str, inner: str) -> bool:
    """``outer`` is ``inner`` or one of its ancestors (JSON paths as both tools print)."""
    return outer in {"$", inner} or inner.startswith((outer + ".", outer + "["))


@pytest.fixture(scope="module")
def verdicts() -> tuple[dict[str, set[str]], dict[str, set[tuple[str, str]]], list[str]]:
    check_jsonschema = python_client("check_jsonschema")
    files = [str(path.relative_to(REPO)) for path in _corpus()]
    theirs = _json(
        [*check_jsonschema, "--schemafile", str(SCHEMA), "--output-format", "json", *files]
    )
    assert theirs["parse_errors"] == [], theirs["parse_errors"]
    ours = _json([*CTXPOLICY, "validate", "--format", "json", *files])
    schema_errors: dict[str, set[str]] = defaultdict(set)
    for error in theirs["errors"]:
        schema_errors[error["filename"]].add(error["path"])
    our_errors: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for issue in ours["issues"]:
        if issue["severity"] == "error":
            our_errors[issue["file"]].add((issue["path"], issue["rule"]))
    return schema_errors, our_errors, files


def test_corpus_has_toml_files_in_every_folder() -> None:
    for folder in ("valid", "invalid", "semantic"):
        assert any(path.suffix == ".toml" for path in (CORPUS / folder).iterdir()), folder


def test_valid_files_pass_both(verdicts: Any) -> None:
    schema_errors, our_errors, files = verdicts
    valid = [name for name in files if name.startswith("tests/corpus/valid/")]
    assert valid
    assert {name: schema_errors[name] for name in valid if schema_errors[name]} == {}
    assert {name: our_errors[name] for name in valid if our_errors[name]} == {}


def test_invalid_files_fail_both_at_the_same_places(verdicts: Any) -> None:
    schema_errors, our_errors, files = verdicts
    invalid = [name for name in files if name.startswith("tests/corpus/invalid/")]
    assert invalid
    for name in invalid:
        theirs = schema_errors[name]
        ours = {path for path, _ in our_errors[name]}
        assert theirs, f"check-jsonschema accepts {name}"
        assert ours, f"ctxpolicy accepts {name}"
        assert all(rule.startswith("schema.") for _, rule in our_errors[name]), name
        # ctxpolicy points at the offending key where check-jsonschema names the object
        # holding it (additionalProperties, oneOf): every place of one is at or under a
        # place of the other.
        assert all(any(_covers(t, o) for t in theirs) for o in ours), (name, theirs, ours)
        assert all(any(_covers(t, o) for o in ours) for t in theirs), (name, theirs, ours)


def test_semantic_files_pass_the_schema_and_fail_only_their_rule(verdicts: Any) -> None:
    schema_errors, our_errors, files = verdicts
    semantic = [name for name in files if name.startswith("tests/corpus/semantic/")]
    assert semantic
    for name in semantic:
        rule = Path(name).name.split("__")[0]
        assert not schema_errors[name], f"check-jsonschema rejects {name}: {schema_errors[name]}"
        assert {r for _, r in our_errors[name]} == {rule}, (name, our_errors[name])
