"""The wheel, installed as users install it, works offline (issue 14, item 7; issue 33).

The wheel is built from this repository and installed with the ``langchain`` and
``langgraph`` extras into a fresh virtualenv outside the repository, both with the
network off (``unshare -n`` where the kernel allows it) from the wheelhouse
``tools/clients.sh`` fills (``pip --no-index --find-links``: the build backend and every
dependency, at this .venv's versions). Every documented command runs there, the README's
Python samples (the ``create_agent`` one-liner on ``builtin:long-session`` with a fake
tool-calling model) and every ``--help`` example from an empty folder, with an empty
``TIKTOKEN_CACHE_DIR``: the tokenizer files and the bundled policies come from the wheel,
nothing is downloaded or cached.
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

from tests.clients.conftest import CLIENTS_DIR, REPO, missing_client
from tests.support.help_examples import DIFFER_OK, all_examples

pytestmark = pytest.mark.slow

SAMPLE_TEXT = "Count the rows of dwd.orders_daily for 2024-06-01 — 数据 ✓"
IN_WHEEL = (
    "ctxpolicy/py.typed",
    "ctxpolicy/schemas/ctxpolicy.schema.json",
    "ctxpolicy/tokenizers/cl100k_base.tiktoken",
    "ctxpolicy/tokenizers/o200k_base.tiktoken",
    "ctxpolicy/tokenizers/SHA256SUMS",
    "ctxpolicy/policies/base.yaml",
    "ctxpolicy/policies/long-session.yaml",
    "ctxpolicy/policies/templates/todo.j2",
    "ctxpolicy/policies/samples/state.json",
    "ctxpolicy/policies/samples/manifest/context-config.json",
)
#: The build backend and the dependencies, for installing with the network off.
WHEELHOUSE = CLIENTS_DIR / "wheelhouse"

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


def _offline_pip() -> list[str]:
    """``pip`` options that take packages from the wheelhouse only (no index, no network)."""
    if not (WHEELHOUSE / ".complete").is_file():
        missing_client(f"no wheelhouse at {WHEELHOUSE}: run tools/clients.sh (make clients)")
    return ["--no-index", "--find-links", str(WHEELHOUSE)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    offline = [*_offline_prefix(), sys.executable, "-m", "pip", "wheel", *_offline_pip()]
    built = subprocess.run(
        [*offline, "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, f"pip could not build the wheel offline:\n{built.stderr}"
    [path] = out.glob("ctxpolicy-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("user")
    venv = base / "venv"
    python3 = shutil.which("python3") or sys.executable
    subprocess.run([python3, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = subprocess.run(
        [
            *_offline_prefix(),
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            *_offline_pip(),
            f"{wheel}[langchain,langgraph]",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=base,
        check=False,
    )
    assert pip.returncode == 0, f"pip could not install the wheel offline:\n{pip.stderr}"
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
    # no schemas/ folder in this project: the schema's $id, never a path into the venv
    schema_id = json.loads((REPO / "schemas" / "ctxpolicy.schema.json").read_text())["$id"]
    assert written.splitlines()[0] == f"# yaml-language-server: $schema={schema_id}"
    cli("validate", "policies/teams/team-z.yaml")
    cli("init", "standalone", "-o", "standalone.yaml")
    first = (installed.work / "standalone.yaml").read_text().splitlines()[0]
    assert first == f"# yaml-language-server: $schema={schema_id}", first
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


# ------------------------------------------------------------- from an empty folder

#: The README's one-liner needs a chat model and tools of the user's: a fake model that
#: calls a tool once, then answers, recording what it was sent.
ONE_LINER_PRELUDE = """\
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool


class ToolCallingModel(FakeMessagesListChatModel):
    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@tool
def lookup(key: str) -> str:
    \"\"\"Look a configuration key up.\"\"\"
    return f"{key}: the staging port is 5433 (端口 5433)"


script = []
for turn in range(3):
    call = {"name": "lookup", "args": {"key": f"k{turn}"}, "id": f"c{turn}"}
    script += [AIMessage("", tool_calls=[call]), AIMessage(f"answer {turn}: 5433")]
model = ToolCallingModel(responses=script)
tools = [lookup]
"""
ONE_LINER_CHECKS = """
messages = []
for turn in range(3):
    state = agent.invoke({"messages": [*messages, HumanMessage(f"What is k{turn}? 请回答")]})
    messages = state["messages"]
counts = [sum(isinstance(m, SystemMessage) for m in sent) for sent in model.seen]
assert counts == [1] * 6, counts
assert messages[-1].text == "answer 2: 5433"
print("one-liner OK", counts)
"""


def readme_one_liner() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## With LangChain `create_agent` (one line)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code, "no Python sample in the README's create_agent section"
    sample = code.group(1)
    assert 'ContextPolicyMiddleware("builtin:long-session")' in sample, sample
    return ONE_LINER_PRELUDE + sample + ONE_LINER_CHECKS


def _empty(installed: Installed, name: str) -> Path:
    folder = installed.work.parent / name
    folder.mkdir()
    return folder


def _run_in(
    installed: Installed, folder: Path, command: list[str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*installed.offline, *command],
        cwd=folder,
        env=installed.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_readme_create_agent_one_liner_from_an_empty_folder(installed: Installed) -> None:
    folder = _empty(installed, "agent")
    (folder / "agent.py").write_text(readme_one_liner(), encoding="utf-8")
    done = _run_in(installed, folder, [str(installed.venv / "bin" / "python"), "agent.py"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "one-liner OK [1, 1, 1, 1, 1, 1]" in done.stdout


def test_init_extends_builtin_then_validate_and_show_from_an_empty_folder(
    installed: Installed,
) -> None:
    folder = _empty(installed, "team")
    cli = str(installed.venv / "bin" / "ctxpolicy")
    done = _run_in(installed, folder, [cli, "init", "search", "--extends", "builtin:base"])
    assert done.returncode == 0, done.stderr
    text = (folder / "search.yaml").read_text(encoding="utf-8")
    assert "\nextends: builtin:base\n" in text
    assert str(installed.venv) not in text and "site-packages" not in text
    done = _run_in(installed, folder, [cli, "validate", "search.yaml"])
    assert (done.returncode, done.stdout) == (0, "1 file(s) valid\n"), done.stderr
    shown = _run_in(installed, folder, [cli, "show", "builtin:long-session"])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# Effective policy of builtin:long-session")
    assert "name: long-session" in shown.stdout and "recall__context" in shown.stdout
    listed = _run_in(installed, folder, [cli, "list"])
    assert "builtin:base" in listed.stdout and "builtin:long-session" in listed.stdout


@pytest.mark.parametrize(
    ("verb", "commands"), all_examples(), ids=[v or "top" for v, _ in all_examples()]
)
def test_every_help_example_from_an_empty_folder(
    installed: Installed, verb: str | None, commands: list[str]
) -> None:
    folder = _empty(installed, f"help-{verb or 'top'}")
    for command in commands:
        done = _run_in(installed, folder, ["bash", "-c", command])
        allowed = (0, 1) if verb in DIFFER_OK and " diff " in f" {command} " else (0,)
        assert done.returncode in allowed, f"{command}: exit {done.returncode}\n{done.stderr}"
        assert "Traceback" not in done.stderr, command
