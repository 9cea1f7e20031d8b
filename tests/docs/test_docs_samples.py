"""Every ```python block of docs/*.md runs, in order, and passes its own asserts.

The blocks of one guide share a namespace (a later block may use what an earlier one
defined) and run in a scratch copy of the repository's ``policies/``, ``examples/`` and
``schemas/`` (so relative paths in samples work and nothing in the checkout changes).

Two HTML-comment directives (invisible in rendered Markdown) exist:

* ``<!-- docs-test: skip -->`` right before a fence skips that block. Only for blocks
  that are deliberately partial; runnable samples are preferred.
* ``<!-- docs-test: cwd=examples/docs -->`` runs the following blocks of that guide
  from that folder of the scratch copy.
"""

from __future__ import annotations

import os
import re
import shutil
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
_FENCE = re.compile(r"^```python\s*$")
_SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\s*-->\s*$")
_CWD = re.compile(r"^<!--\s*docs-test:\s*cwd=(\S+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the first code line
    code: str
    skip: bool
    cwd: str


def extract_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, with their directives."""
    blocks: list[Block] = []
    lines = text.splitlines()
    cwd, skip_next, index = ".", False, 0
    while index < len(lines):
        line = lines[index]
        if _SKIP.match(line):
            skip_next = True
        elif match := _CWD.match(line):
            cwd = match.group(1)
        elif _FENCE.match(line):
            start = index + 1
            end = start
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append(Block(start + 1, "\n".join(lines[start:end]) + "\n", skip_next, cwd))
            skip_next, index = False, end
        elif line.strip():
            skip_next = False
        index += 1
    return blocks


def guides() -> list[Path]:
    return sorted(DOCS.glob("*.md")) if DOCS.is_dir() else []


def test_extract_blocks_and_directives() -> None:
    text = (
        "# t\n```python\na = 1\n```\n<!-- docs-test: skip -->\n```python\nb = 2\n```\n"
        "<!-- docs-test: cwd=examples -->\n```bash\nls\n```\n```python\nc = 3\n```\n"
    )
    blocks = extract_blocks(text)
    assert [(b.line, b.code, b.skip, b.cwd) for b in blocks] == [
        (3, "a = 1\n", False, "."),
        (7, "b = 2\n", True, "."),
        (14, "c = 3\n", False, "examples"),
    ]


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("policies", "examples", "schemas"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, tmp_path / name, symlinks=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("guide", guides(), ids=lambda p: p.name)
def test_guide_samples_run(guide: Path, sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for b in extract_blocks(guide.read_text(encoding="utf-8")) if not b.skip]
    if not blocks:
        return
    namespace: dict[str, object] = {"__name__": f"docs_{guide.stem}"}
    for block in blocks:
        monkeypatch.chdir(sandbox / block.cwd)
        code = compile("\n" * (block.line - 1) + block.code, str(guide), "exec")
        try:
            exec(code, namespace)
        except Exception:
            pytest.fail(
                f"{guide.name}: the sample at line {block.line} failed:\n"
                + traceback.format_exc(limit=-3),
                pytrace=False,
            )
        finally:
            os.chdir(sandbox)


def test_every_guide_of_this_step_exists() -> None:
    names = {p.name for p in guides()}
    assert {"team-policy.md", "sharing.md", "ci.md", "app-start.md", "custom-collector.md"} <= names


_STEP6_GUIDES = ("team-policy.md", "sharing.md", "ci.md", "app-start.md", "custom-collector.md")


@pytest.mark.parametrize("name", _STEP6_GUIDES)
def test_yaml_snippets_parse(name: str) -> None:
    """Workflow, pre-commit and policy snippets are valid YAML (copy-paste safe)."""
    from ruamel.yaml import YAML

    text = (DOCS / name).read_text(encoding="utf-8")
    snippets = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)
    for snippet in snippets:
        YAML(typ="safe", pure=True).load(snippet)
    if name == "ci.md":
        workflow = YAML(typ="safe", pure=True).load(snippets[0])
        steps = workflow["jobs"]["validate"]["steps"]
        assert any(
            "ctxpolicy validate policies/ --format github" in s.get("run", "") for s in steps
        )
        precommit = YAML(typ="safe", pure=True).load(snippets[1])
        assert precommit["repos"][0]["hooks"][0]["id"] == "ctxpolicy-validate"
