"""`benchmarks/run.py`'s command line, without running a benchmark."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


def test_an_output_outside_the_repository_is_written_and_named_as_given(
    benchmark_script: Callable[[str], ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--output`` anywhere: the JSON and its Markdown are written there and the last line
    names the file (it used to end in a traceback: the path is not under the repository)."""
    run = benchmark_script("run")
    monkeypatch.setattr(run, "discover", lambda only: [])
    output = tmp_path / "figures.json"
    assert run.main(["--only", "compose", "--output", str(output)]) == 0
    report = json.loads(output.read_text())
    assert report["benchmarks"] == {}
    assert output.with_suffix(".md").exists()
    assert capsys.readouterr().out.splitlines()[-1] == f"Wrote {output} and figures.md"
