"""`ctxpolicy preview` shows why each unit came back: label, source, score, tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import LONG_SESSION


def write_state(path: Path) -> Path:
    dump = [f"02:{i:02d} checkout INFO ok" for i in range(40)]
    dump.append("02:41 checkout ERROR pool exhausted on pg-replica-7")
    messages: list[dict] = [
        {"type": "human", "content": "Why did checkout fail last night?", "id": "h0"},
        {
            "type": "ai",
            "content": "",
            "tool_calls": [{"name": "get_logs", "args": {"svc": "checkout"}, "id": "c0"}],
            "id": "a0",
        },
        {"type": "tool", "content": "\n".join(dump), "tool_call_id": "c0", "id": "t0"},
    ]
    for i in range(1, 1500):
        messages.append({"type": "human", "content": f"status of batch {i}?", "id": f"h{i}"})
        messages.append(
            {"type": "ai", "content": f"batch {i} done; " + "rows written. " * 40, "id": f"a{i}"}
        )
    messages.append({"type": "human", "content": "Which replica ran out of connections?"})
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return path


def preview(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxpolicy",
            "preview",
            str(LONG_SESSION),
            "--process",
            "react",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_text_preview_lists_recalled_units(tmp_path: Path) -> None:
    result = preview("--state", str(write_state(tmp_path / "s.json")))
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if "recalled #2" in ln)
    assert "tool get_logs L41 (session, score" in line
    assert "pg-replica-7" in line


def test_json_preview_carries_recalled_units(tmp_path: Path) -> None:
    result = preview("--state", str(write_state(tmp_path / "s.json")), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    layer = next(x for x in data["report"]["layers"] if x["name"] == "recall__context")
    (unit,) = layer["recalled"]
    assert unit["label"] == "#2 tool get_logs L41"
    assert unit["source"] == "session"
    assert unit["score"] > 0
    assert unit["tokens"] > 0


def test_html_preview_lists_recalled_units(tmp_path: Path) -> None:
    out = tmp_path / "p.html"
    result = preview(
        "--state", str(write_state(tmp_path / "s.json")), "--format", "html", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    page = out.read_text(encoding="utf-8")
    assert "recalled 1 unit(s)" in page
    assert "#2 tool get_logs L41 (session, score" in page
