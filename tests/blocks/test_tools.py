from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool

from ctxpolicy.blocks import FileAccessError
from ctxpolicy.blocks.curation import CurationLog
from ctxpolicy.blocks.tools import FileTools, create_file_tools

from .conftest import SEED_PROFILE


@pytest.fixture
def root(tmp_path: Path) -> Path:
    docs = tmp_path / "session"
    (docs / "notes").mkdir(parents=True)
    (docs / "profile.md").write_text(SEED_PROFILE, encoding="utf-8")
    (docs / "ground-truth.md").write_text(
        "".join(f"fact {i}\n" for i in range(1, 61)), encoding="utf-8"
    )
    (docs / "notes" / "a.md").write_text("# A\nalpha beta\n", encoding="utf-8")
    (docs / "cfg.json").write_text('{"limits": {"rows": 10}}\n', encoding="utf-8")
    (tmp_path / "secret.md").write_text("TOP SECRET beta\n", encoding="utf-8")
    return docs


def _tools(root: Path, **kwargs) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in create_file_tools(root, **kwargs)}


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real_open = os.open

    def spy(path, flags, *args, **kwargs):
        seen.append(os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return seen


def test_default_tool_set_has_no_write(root):
    assert sorted(_tools(root)) == ["list_files", "read_block", "read_file", "search"]
    assert "write_file" in _tools(root, enable_write=True)
    assert "dismiss_memory" in _tools(root, curation_log=CurationLog())


def test_tools_have_schemas_for_models(root):
    read = _tools(root)["read_file"]
    assert set(read.args) == {"path", "start_line", "end_line"}
    assert "sed" in read.description


def test_read_file_lines(root):
    out = _tools(root)["read_file"].invoke(
        {"path": "ground-truth.md", "start_line": 30, "end_line": 32}
    )
    assert out == "[ground-truth.md:30-32 of 60 lines]\nfact 30\nfact 31\nfact 32"
    whole = _tools(root)["read_file"].invoke({"path": "notes/a.md"})
    assert whole == "[notes/a.md:1-2 of 2 lines]\n# A\nalpha beta"


def test_read_file_output_limit_says_how_to_continue(root):
    out = _tools(root, max_output_chars=40)["read_file"].invoke({"path": "ground-truth.md"})
    assert out.startswith("[ground-truth.md:1-")
    assert "continue with start_line=" in out
    assert len(out) < 200


def test_read_block(root):
    tools = _tools(root)
    out = tools["read_block"].invoke({"path": "profile.md", "block_id": "基本信息/工作经验"})
    assert out == "[profile.md#基本信息/工作经验 (lines 8-9)]\n## 工作经验\n3年后端开发"
    assert "10" in tools["read_block"].invoke({"path": "cfg.json", "block_id": "limits/rows"})
    missing = tools["read_block"].invoke({"path": "profile.md", "block_id": "nope"})
    assert "no block 'nope'" in missing and "学习目标" in missing


def test_list_files_and_search(root):
    tools = _tools(root)
    assert tools["list_files"].invoke({}).splitlines() == [
        "cfg.json",
        "ground-truth.md",
        "profile.md",
        "notes/a.md",
    ]
    assert tools["list_files"].invoke({"path": "notes"}) == "notes/a.md"
    assert tools["list_files"].invoke({"pattern": "*.json"}) == "cfg.json"
    assert tools["search"].invoke({"pattern": "beta"}) == "notes/a.md:2: alpha beta"
    assert tools["search"].invoke({"pattern": r"fact 5\d", "regex": True}).count("\n") == 9
    assert "no match" in tools["search"].invoke({"pattern": "zzz"})
    assert "invalid regular expression" in tools["search"].invoke({"pattern": "(", "regex": True})


def test_search_and_list_limits(root):
    tools = _tools(root, max_results=3)
    out = tools["search"].invoke({"pattern": "fact"})
    assert out.count("ground-truth.md:") == 3 and "more than 3 matches" in out
    (root / "b.md").write_text("x", encoding="utf-8")
    (root / "c.md").write_text("x", encoding="utf-8")
    assert "more than 3 entries" in tools["list_files"].invoke({})


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "../secret.md"}),
        ("read_file", {"path": "notes/../../secret.md"}),
        ("read_block", {"path": "../secret.md", "block_id": "x"}),
        ("list_files", {"path": ".."}),
        ("list_files", {"path": "/"}),
        ("search", {"pattern": "SECRET", "path": "../secret.md"}),
        ("search", {"pattern": "SECRET", "path": "/etc"}),
    ],
)
def test_escapes_come_back_as_tool_errors_and_nothing_is_opened(root, opened, tool, args):
    out = _tools(root)[tool].invoke(args)
    assert "refused path" in out
    assert opened == []


def test_symlinks_out_of_the_root_are_neither_listed_nor_read(root, opened):
    (root / "leak.md").symlink_to(root.parent / "secret.md")
    (root / "up").symlink_to(root.parent)
    tools = _tools(root)
    assert "leak.md" not in tools["list_files"].invoke({})
    assert tools["search"].invoke({"pattern": "SECRET"}).startswith("[no match")
    assert "refused path" in tools["read_file"].invoke({"path": "leak.md"})
    assert "refused path" in tools["read_file"].invoke({"path": "up/secret.md"})
    assert not any("secret" in p for p in opened)


def test_fifo_is_not_opened_by_search(root, opened):
    os.mkfifo(root / "pipe.md")
    out = _tools(root)["search"].invoke({"pattern": "beta"})
    assert "notes/a.md:2" in out and "1 file(s) skipped" in out
    assert not any(p.endswith("pipe.md") for p in opened)


def test_size_limit(root):
    out = _tools(root, max_file_bytes=50)["read_file"].invoke({"path": "ground-truth.md"})
    assert "over the limit of 50" in out


def test_write_file_only_when_enabled(root):
    with pytest.raises(Exception, match="disabled"):
        FileTools(root).write_file("x.md", "hi")
    tools = _tools(root, enable_write=True)
    assert tools["write_file"].invoke({"path": "notes/new.md", "content": "one\ntwo\n"}) == (
        "wrote notes/new.md (2 lines)"
    )
    assert (root / "notes" / "new.md").read_text(encoding="utf-8") == "one\ntwo\n"
    tools["write_file"].invoke(
        {"path": "notes/new.md", "content": "TWO", "start_line": 2, "end_line": 2}
    )
    assert (root / "notes" / "new.md").read_text(encoding="utf-8") == "one\nTWO\n"
    assert not [p for p in (root / "notes").iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize("path", ["../evil.md", "/tmp/evil.md", "missing/dir/x.md", "leak.md"])
def test_write_file_escapes_are_refused(root, path):
    (root / "leak.md").symlink_to(root.parent / "secret.md")
    out = _tools(root, enable_write=True)["write_file"].invoke({"path": path, "content": "x"})
    assert "refused path" in out or "no such file" in out
    assert (root.parent / "secret.md").read_text(encoding="utf-8") == "TOP SECRET beta\n"
    assert not (root.parent / "evil.md").exists()


def test_write_file_size_limit(root):
    out = _tools(root, enable_write=True, max_file_bytes=10)["write_file"].invoke(
        {"path": "x.md", "content": "x" * 11}
    )
    assert "over the limit" in out and not (root / "x.md").exists()


def test_root_must_exist(tmp_path):
    with pytest.raises(FileAccessError):
        create_file_tools(tmp_path / "nope")
