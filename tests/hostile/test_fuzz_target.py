"""The optional atheris target runs over the hostile corpus with a stand-in for atheris
(the suite never needs atheris itself)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from tests.hostile.cases import committed_cases

ROOT = Path(__file__).resolve().parents[2]


def test_fuzz_target_accepts_every_corpus_input(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = types.ModuleType("atheris")
    stub.instrument_imports = contextlib.nullcontext  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "atheris", stub)
    spec = importlib.util.spec_from_file_location("fuzz_loader", ROOT / "fuzz" / "fuzz_loader.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = [content for case in committed_cases() for content in case.files.values()]
    inputs += [b"", b"\x00\xff", (ROOT / "policies" / "base.yaml").read_bytes()]
    for data in inputs:
        module.test_one_input(data)
