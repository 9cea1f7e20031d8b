"""Concurrent `ctxpolicy set` processes on one file: never a corrupt file, never a lost
edit, and the final file validates and equals one of the possible outcomes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ctxpolicy.loading import load_policy, validate_paths
from tests.filesafety.support import ROOT, copy_policies, temp_files, text_after

#: Values each process sets in turn (small, so the ratios never sum past 1).
ROUNDS = 6


def run_burst(base: Path, go: Path, jobs: list[tuple[str, list[str]]]) -> list[list[int]]:
    """Start one warm process per job, release them together, return their exit codes."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.filesafety.driver",
                "burst",
                str(go),
                str(base),
                key,
                *values,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for key, values in jobs
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_processes_setting_one_key_leave_one_candidate(tmp_path: Path) -> None:
    folder = copy_policies(tmp_path)
    base = folder / "base.yaml"
    jobs = [
        ("budget.ratios.query", [f"0.0{p}{r}" for r in range(1, ROUNDS + 1)]) for p in range(3, 9)
    ]  # process p sets 0.0p1 ... 0.0p6
    candidates = {
        text_after(base, tmp_path, [("budget.ratios.query", values[-1])]) for _, values in jobs
    }
    codes = run_burst(base, tmp_path / "go", jobs)
    assert codes == [[0] * ROUNDS] * len(jobs)
    assert base.read_bytes() in candidates
    assert [i for i in validate_paths([base]) if i.severity == "error"] == []
    assert temp_files(folder) == set()


def test_processes_setting_different_keys_lose_no_edit(tmp_path: Path) -> None:
    folder = copy_policies(tmp_path)
    base = folder / "base.yaml"
    keys = [
        "system_prompt",
        "framework__context",
        "experience__context",
        "knowledge__context",
        "todo__context",
        "compression__context",
    ]
    jobs = [(f"budget.ratios.{key}", [f"0.0{r}" for r in range(1, ROUNDS + 1)]) for key in keys]
    codes = run_burst(base, tmp_path / "go", jobs)
    assert codes == [[0] * ROUNDS] * len(jobs)
    expected = text_after(
        (ROOT / "policies" / "base.yaml"), tmp_path, [(key, values[-1]) for key, values in jobs]
    )
    assert base.read_bytes() == expected  # every process's last edit, nothing else
    ratios = load_policy(base).budget.ratios
    assert {k: ratios[k] for k in keys} == dict.fromkeys(keys, float(f"0.0{ROUNDS}"))
    assert temp_files(folder) == set()


#: Figures: set calls that ran concurrently in this module.
CONCURRENT_SET_CALLS = ROUNDS * 6 + ROUNDS * 6
