"""The wheel, installed as users install it, works offline (issue 14, item 7).

The wheel is built from this repository, installed with its dependencies from PyPI into
a fresh virtualenv outside the repository, and every documented command is run there,
plus the README's Python sample, without network access (``unshare -n`` where the
kernel allows it) and with an empty ``TIKTOKEN_CACHE_DIR``: the tokenizer files come
from the wheel, nothing is downloaded or cached.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.clients.conftest import REPO, missing_client

pytestmark = pytest.mark.slow

SAMPLE_TEXT = "Count the rows of dwd.orders_daily for 2024-06-01 — 数据 ✓"
IN_WHEEL = (
    "ctxpolicy/py.typed",
    "ctxpolicy/schemas/ctxpolicy.schema.json",
    "ctxpolicy/tokenizers/cl100k_base.tiktoken",
    "ctxpolicy/tokenizers/o200k_base.tiktoken",
    "ctxpolicy/tokenizers/SHA256SUMS",
)

# The README's sample names a retriever of the user's and elides a few values; these
# stand in for them, everything else runs as printed.
README_PRELUDE = """\
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


class _Retriever(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager):
        return [Document(page_content="dwd.orders_daily is partitioned by dt.")]


my_retriever = _Retriever()
"""
README_CHECKS = """
assert result.messages and worker.messages, "nothing composed"
assert result.messages[-1].content == "Why did rows drop?"
assert "dwd.orders_daily is partitioned by dt." in str([m.content for m in worker.messages])
assert messages, "compose_messages gave nothing"
print("README sample OK", len(result.messages), len(worker.messages), len(messages))
"""


def _offline_prefix() -> list[str]:
    """``unshare -n`` (no network at all) when this machine allows it, else nothing."""
    unshare = shutil.which("unshare")
    if (
        unshare
        and subprocess.run([unshare, "-n", "true"], capture_output=True, check=False).returncode
        == 0
    ):
        return [unshare, "-n"]
    return []


def readme_sample() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code, "no Python sample in the README's Python API section"
    sample = code.group(1)
    for elided, value in (
        ('"todo": [...]', '"todo": ["check the partitions"]'),
        ('"compression__context": "..."', '"compression__context": "Earlier: counted rows."'),
        ("contexts={...}", 'contexts={"knowledge__context": "dt is the partition key."}'),
    ):
        assert elided in sample, f"the README sample changed: {elided!r} is gone"
        sample = sample.replace(elided, value)
    return README_PRELUDE + sample + README_CHECKS


class Installed:
    def __init__(self, venv: Path, work: Path, env: dict[str, str]) -> None:
        self.venv, self.work, self.env = venv, work, env
        self.offline = _offline_prefix()

    def run(self, *argv: str, code: int = 0) -> str:
        done = subprocess.run(
            [*self.offline, *argv],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == code, (
            f"{argv}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        )
        return done.stdout

    def ctxpolicy(self, *argv: str, code: int = 0) -> str:
        return self.run(str(self.venv / "bin" / "ctxpolicy"), *argv, code=code)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if built.returncode != 0:
        missing_client(f"pip could not build the wheel (hatchling from PyPI):\n{built.stderr}")
    [path] = out.glob("ctxpolicy-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("user")
    venv = base / "venv"
    python3 = shutil.which("python3") or sys.executable
    subprocess.run([python3, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=base,
        check=False,
    )
    if pip.returncode != 0:
        missing_client(f"pip could not install the wheel's dependencies from PyPI:\n{pip.stderr}")
    work = base / "project"
    shutil.copytree(REPO / "policies", work / "policies")
    shutil.copy(REPO / "examples" / "state.json", work / "state.json")
    (base / "tiktoken-cache").mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(base),
        "LANG": "C.UTF-8",
        "TIKTOKEN_CACHE_DIR": str(base / "tiktoken-cache"),
        "DATA_GYM_CACHE_DIR": str(base / "tiktoken-cache"),
        "NO_COLOR": "1",
    }
    return Installed(venv, work, env)


def test_wheel_contains_schema_tokenizers_and_py_typed(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [name for name in IN_WHEEL if name not in names] == []
    schema = json.loads(zipfile.ZipFile(wheel).read("ctxpolicy/schemas/ctxpolicy.schema.json"))
    assert schema == json.loads((REPO / "schemas" / "ctxpolicy.schema.json").read_text())


def test_installed_outside_the_repository(installed: Installed) -> None:
    where = installed.run(
        str(installed.venv / "bin" / "python"), "-c", "import ctxpolicy; print(ctxpolicy.__file__)"
    )
    assert where.startswith(str(installed.venv)), where
    assert not where.startswith(str(REPO))


def test_every_documented_command(installed: Installed) -> None:
    cli = installed.ctxpolicy
    assert cli("--version").strip() == "ctxpolicy 0.1.0"
    assert installed.run(str(installed.venv / "bin" / "python"), "-m", "ctxpolicy", "--version")
    policies = [
        p
        for p in (installed.work / "policies").rglob("*")
        if p.suffix in {".yaml", ".yml", ".toml"} and not p.name.startswith(".")
    ]
    assert cli("validate", "policies/") == f"{len(policies)} file(s) valid\n"
    report = json.loads(cli("validate", "policies/", "--format", "json"))
    assert report["valid"] is True
    assert "name: data-platform" in cli("show", "policies/teams/data-platform.yaml")
    assert json.loads(cli("show", "policies/teams/analytics.toml", "--format", "json"))
    assert cli("show", "--explain", "policies/teams/data-platform.yaml")
    assert json.loads(cli("schema")) == json.loads(
        (REPO / "schemas" / "ctxpolicy.schema.json").read_text()
    )
    text = cli("preview", "policies/base.yaml", "--process", "react", "--state", "state.json")
    assert "system_prompt" in text
    preview = json.loads(
        cli(
            "preview",
            "policies/base.yaml",
            "--process",
            "mapreduce_worker",
            "--query",
            "Count the rows of dwd.orders_daily for 2024-06-01",
            "--format",
            "json",
        )
    )
    assert preview["messages"]
    cli(
        "preview",
        "policies/base.yaml",
        "--process",
        "react",
        "--state",
        "state.json",
        "--format",
        "html",
        "-o",
        "p.html",
    )
    assert (installed.work / "p.html").read_text().lstrip().lower().startswith("<!doctype html")
    cli("init", "team-z", "--extends", "policies/base.yaml", "-o", "policies/teams/team-z.yaml")
    written = (installed.work / "policies" / "teams" / "team-z.yaml").read_text()
    schema_path = written.splitlines()[0].split("$schema=", 1)[1]
    assert (installed.work / "policies" / "teams" / schema_path).resolve().is_file(), schema_path
    cli("validate", "policies/teams/team-z.yaml")
    cli("init", "standalone", "-o", "standalone.yaml")
    first = (installed.work / "standalone.yaml").read_text().splitlines()[0]
    standalone_schema = (installed.work / first.split("$schema=", 1)[1]).resolve()
    assert standalone_schema.is_file(), first
    assert standalone_schema.is_relative_to(installed.venv.resolve()), first  # from the wheel
    cli("validate", "standalone.yaml")
    shutil.copy(
        installed.work / "policies" / "base.yaml", installed.work / "policies" / "copy.yaml"
    )
    cli("set", "policies/copy.yaml", "budget.output_reserve", "0.2")
    assert "output_reserve: 0.2" in (installed.work / "policies" / "copy.yaml").read_text()
    cli("diff", "policies/base.yaml", "policies/base.yaml")
    changed = cli("diff", "policies/base.yaml", "policies/copy.yaml", code=1)
    assert "output_reserve" in changed
    cli("set", "policies/copy.yaml", "budget.output_reserve", "2", code=1)
    assert "complete" in cli("completion", "bash")
    assert cli("completion", "zsh")
    missing = cli("validate", "nowhere.yaml", code=2).splitlines()
    assert missing[0] == "nowhere.yaml: no such file or folder [file.missing]"


def test_readme_python_sample_offline(installed: Installed) -> None:
    (installed.work / "sample.py").write_text(readme_sample(), encoding="utf-8")
    out = installed.run(str(installed.venv / "bin" / "python"), "sample.py")
    assert "README sample OK" in out


def test_tokenizer_works_offline_without_a_cache(installed: Installed) -> None:
    probe = (
        "from ctxpolicy.tokens import get_tokenizer\n"
        "for name in ('cl100k_base', 'o200k_base'):\n"
        "    tokenizer = get_tokenizer(name)\n"
        "    print(name, tokenizer.exact, tokenizer.count(TEXT))\n"
    ).replace("TEXT", repr(SAMPLE_TEXT))
    out = installed.run(str(installed.venv / "bin" / "python"), "-c", probe)
    from ctxpolicy.tokens import get_tokenizer

    expected = {
        name: f"True {get_tokenizer(name).count(SAMPLE_TEXT)}"  # this repository's count
        for name in ("cl100k_base", "o200k_base")
    }
    assert dict(line.split(" ", 1) for line in out.splitlines()) == expected
    assert list(Path(installed.env["TIKTOKEN_CACHE_DIR"]).iterdir()) == []
    if not installed.offline:
        pytest.skip("unshare -n is not allowed here: ran with network (empty cache checked)")
