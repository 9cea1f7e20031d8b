"""`benchmarks/cache_footprint.py` runs each contender's turns, reads callgrind's totals and
tabulates them per turn (valgrind itself is not run here: it takes minutes)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

Loader = Callable[[str], ModuleType]


@pytest.mark.parametrize("contender", ["ctxpolicy", "floor", "encode"])
def test_the_worker_runs_every_turn_of_each_contender(
    benchmark_script: Loader,
    contender: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = benchmark_script("cache_footprint")
    calls: list[object] = []
    monkeypatch.setattr(module.operator, "call", lambda fn, *a, **k: calls.append(fn(*a, **k)))
    monkeypatch.setattr("sys.stdin", io.StringIO("go\n"))
    module.worker(contender, 200)
    assert capsys.readouterr().out == "ready\n"
    assert len(calls) == module.TURNS  # only the traced turns go through operator.call
    if contender == "ctxpolicy":
        assert all(len(result.messages) > 1 for result in calls)  # type: ignore[attr-defined]


def test_totals_are_read_by_event_name(benchmark_script: Loader, tmp_path: Path) -> None:
    module = benchmark_script("cache_footprint")
    out = tmp_path / "x.callgrind"
    out.write_text("version: 1\nevents: Ir ILmr DLmr DLmw\nfn=x\n0 1 2 3 4\ntotals: 10 20 30 40\n")
    assert module._totals(out) == {"Ir": 10, "ILmr": 20, "DLmr": 30, "DLmw": 40}
    out.write_text("events: Ir\n")
    with pytest.raises(RuntimeError, match="no totals line"):
        module._totals(out)


def test_the_table_gives_each_contender_and_ctxpolicy_s_excess(benchmark_script: Loader) -> None:
    module = benchmark_script("cache_footprint")
    columns = list(module.EVENTS.values())
    rows = {
        "ctxpolicy": dict.fromkeys(columns, 300.0),
        "floor": dict.fromkeys(columns, 200.0),
        "encode": dict.fromkeys(columns, 100.0),
    }
    text = module.table({"started": "2026-01-01T00:00:00Z", "n": 30_000, "contenders": rows})
    assert "| ctxpolicy | 300 | 300 | 300 | 300 |" in text
    assert "| ctxpolicy - encode | +200 | +200 | +200 | +200 |" in text
    assert "| ctxpolicy - floor | +100 | +100 | +100 | +100 |" in text
