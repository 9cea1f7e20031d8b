"""The real ``ctxpolicy`` console script on hostile inputs: exit 1 or 2 (0 for the valid
ones), never a traceback, always within a timeout (a timeout fails the test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.hostile.cases import Case, committed_cases, generated_cases

ROOT = Path(__file__).resolve().parents[2]
#: Generous: the slowest hostile file takes a few seconds; a hang never ends.
TIMEOUT_S = 120


def ctxpolicy(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPOLICY_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", "from ctxpolicy.cli import console_main; console_main()", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        check=False,
    )


def clean(result: subprocess.CompletedProcess[str], *, allowed: tuple[int, ...]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr[-2000:]
    assert result.returncode in allowed, (result.returncode, result.stderr[-2000:])


#: The generated cases that stress time and memory most, plus one of each other kind.
BIG = (
    "10000-layers",
    "10000-layers-toml",
    "10000-order-entries",
    "1mb-line-at-limit",
    "1mb-key",
    "1mb-quoted-escapes",
    "100k-digit-int",
    "100k-digit-int-toml",
    "nested-flow-seq-100000",
    "nested-flow-map-100000",
    "unclosed-flow-100000",
    "nested-toml-inline-100000",
    "nested-toml-table-2000",
    "alias-bomb-mappings",
    "extends-chain-12",
    "extends-binary-tree",
    "garbage-00.yaml",
    "garbage-01.toml",
    "nul-only",
    "encoding-utf16",
    "bom-crlf-base.yaml",
    "mutated-base-000",
)
#: Committed cases run through ``show`` one by one (the rest go through folder runs).
SHOWN = (
    "yaml.tag__python-object-apply.yaml",
    "schema.unknown-key__cyrillic-a-in-layers.yaml",
    "extends.cycle__diamond-with-back-edge",
    "valid__extends-diamond",
    "template.syntax__template-file-includes-itself",
    "toml.syntax__surrogate-escape.toml",
    "yaml.syntax__impossible-date.yaml",
)


def expected_code(case: Case) -> int | None:
    if case.expected == "any":
        return None
    return 0 if case.expected == "valid" else 1


def check_case(case: Case, folder: Path) -> None:
    folder.mkdir(parents=True)
    case.write(folder)
    validate = ctxpolicy("validate", case.target, cwd=folder)
    show = ctxpolicy("show", "--format", "json", case.target, cwd=folder)
    for result in (validate, show):
        clean(result, allowed=(0, 1))
    assert validate.returncode == show.returncode, case.name
    if validate.returncode == 0:
        json.loads(show.stdout)
    expected = expected_code(case)
    assert expected in (None, validate.returncode), (case.name, validate.stdout[-2000:])


def selected() -> list[Case]:
    by_name = {c.name: c for c in generated_cases()}
    by_name.update({c.name.removeprefix("corpus/"): c for c in committed_cases()})
    return [by_name[name] for name in (*BIG, *SHOWN)]


def test_console_script_validate_and_show_on_the_hardest_cases(tmp_path: Path) -> None:
    cases = selected()
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda ic: check_case(ic[1], tmp_path / str(ic[0])), enumerate(cases)))


def test_console_script_formats_on_a_folder_of_the_hardest_cases(tmp_path: Path) -> None:
    cases = [c for c in selected() if c.target.count("/") == 0]
    for index, case in enumerate(cases):
        case.write(tmp_path / f"c{index:02d}")
    for fmt in ("json", "github"):
        result = ctxpolicy("validate", "--format", fmt, ".", cwd=tmp_path)
        clean(result, allowed=(1,))
        if fmt == "json":
            payload = json.loads(result.stdout)
            assert payload["valid"] is False
            assert all(i["line"] >= 1 for i in payload["issues"])


def test_validate_whole_corpus_folder_in_every_format(tmp_path: Path) -> None:
    for index, case in enumerate(committed_cases()):
        case.write(tmp_path / f"c{index:03d}")
    files = sorted(p for p in tmp_path.rglob("*") if p.suffix in (".yaml", ".toml"))
    for fmt in ("text", "json", "github"):
        result = ctxpolicy("validate", "--format", fmt, ".", cwd=tmp_path)
        clean(result, allowed=(1,))
        if fmt == "json":
            payload = json.loads(result.stdout)
            assert len(payload["files"]) == len(files)
            assert payload["valid"] is False


def test_unreadable_and_missing_paths_exit_2_or_1_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "folder.yaml").mkdir()
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # reading a FIFO would block forever: must be refused, not read
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    result = ctxpolicy("validate", "missing.yaml", cwd=tmp_path)
    clean(result, allowed=(2,))
    assert "missing.yaml" in result.stderr + result.stdout
    result = ctxpolicy("validate", "folder.yaml", "pipe.yaml", "zero.yaml", cwd=tmp_path)
    clean(result, allowed=(2,))
    for target in ("pipe.yaml", "zero.yaml"):
        assert f"{target}: cannot read file: not a regular file" in result.stdout
    for target in ("pipe.yaml", "zero.yaml"):
        result = ctxpolicy("show", target, cwd=tmp_path)
        clean(result, allowed=(2,))
        assert "not a regular file" in result.stderr + result.stdout
