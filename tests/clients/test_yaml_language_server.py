"""yaml-language-server (the server behind VS Code's YAML extension, Neovim's yamlls,
Helix, ...) reads the shipped schema through the ``# yaml-language-server: $schema=``
comment line and gives diagnostics, key completion and hover text from it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import REPO
from tests.clients.lsp import LspClient

SCHEMA = REPO / "ctxpolicy" / "schemas" / "ctxpolicy.schema.json"
SETTINGS = {
    "yaml": {
        "validate": True,
        "hover": True,
        "completion": True,
        "schemaStore": {"enable": False},  # offline; only the $schema comment counts
    }
}


@pytest.fixture
def server(yaml_language_server: list[str], tmp_path: Path) -> Any:
    with LspClient(yaml_language_server, settings=SETTINGS, cwd=tmp_path) as client:
        client.initialize(tmp_path)
        yield client


def _diagnostics(client: LspClient, path: Path, text: str) -> list[dict[str, Any]]:
    """Open ``path`` with ``text`` and wait for its (schema-based) diagnostics."""
    uri = client.open(path, text)
    params = client.wait_for_notification(
        "textDocument/publishDiagnostics", lambda p: p["uri"] == uri
    )
    return list(params["diagnostics"])


def _labels(result: Any) -> list[str]:
    items = result["items"] if isinstance(result, dict) else result
    return [item["label"] for item in items]


def test_bad_value_gets_a_diagnostic_at_its_place(server: LspClient, tmp_path: Path) -> None:
    text = (
        f"# yaml-language-server: $schema={SCHEMA}\n"
        "version: 1\nname: team-x\nbudget:\n  output_reserve: 2\n"
    )
    [diagnostic] = _diagnostics(server, tmp_path / "team.yaml", text)
    assert diagnostic["message"] == "Value is above the maximum of 0.9."
    assert diagnostic["severity"] == 1  # Error
    assert diagnostic["range"]["start"] == {"line": 4, "character": 18}
    assert diagnostic["source"] == "yaml-schema: ctxpolicy policy (version 1)"


def test_completion_inside_budget_offers_its_keys(server: LspClient, tmp_path: Path) -> None:
    text = f"# yaml-language-server: $schema={SCHEMA}\nversion: 1\nname: team-x\nbudget:\n  \n"
    path = tmp_path / "team.yaml"
    uri = server.open(path, text)
    result = server.request(
        "textDocument/completion",
        {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 2}},
    )
    assert {"output_reserve", "ratios", "redistribute"} <= set(_labels(result))
    assert "name" not in _labels(result)  # budget's keys, not the top level's


def test_hover_shows_the_schema_description(server: LspClient, tmp_path: Path) -> None:
    text = (
        f"# yaml-language-server: $schema={SCHEMA}\n"
        "version: 1\nname: team-x\nbudget:\n  output_reserve: 0.1\n"
    )
    uri = server.open(tmp_path / "team.yaml", text)
    hover = server.request(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 5}},
    )
    assert "Share of the context window kept free for the answer." in hover["contents"]["value"]


def test_repository_policies_and_their_relative_schema_comment_are_clean(
    server: LspClient,
) -> None:
    """The policies in ``policies/`` point at ``../schemas/...`` (a symlink to the
    packaged schema), as the README shows: the server resolves it and finds nothing."""
    for path in sorted((REPO / "policies").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "yaml-language-server: $schema=" not in text.splitlines()[0]:
            continue
        assert _diagnostics(server, path, text) == [], path


def test_init_output_is_clean_and_completes(server: LspClient, tmp_path: Path) -> None:
    """``ctxpolicy init`` writes the schema comment itself; editors resolve it. The
    project keeps the schema as docs/team-policy.md says (``ctxpolicy schema >
    schemas/ctxpolicy.schema.json``); without it ``init`` writes the schema's ``$id``,
    which no server can fetch while ctxpolicy is unpublished."""
    schema = subprocess.run(
        [sys.executable, "-m", "ctxpolicy", "schema"], check=True, capture_output=True, text=True
    )
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "ctxpolicy.schema.json").write_text(schema.stdout, encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "ctxpolicy", "init", "team-x", "-o", "team-x.yaml"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    path = tmp_path / "team-x.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=schemas/ctxpolicy.schema.json\n")
    assert _diagnostics(server, path, text) == []
    broken = text.replace("version: 1", "version: 2", 1)
    assert _diagnostics(server, tmp_path / "broken.yaml", broken) != []
