from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxpolicy.blocks import (
    BlockNotFoundError,
    BlockReference,
    FileAccessError,
    FileReference,
    LineRangeError,
    LineReference,
    PathEscapeError,
    ReferenceSyntaxError,
    find_references,
    parse_reference,
    resolve_reference,
    slice_reference,
)
from ctxpolicy.errors import CtxPolicyError

from .conftest import SEED_PROFILE


@pytest.fixture
def root(tmp_path: Path) -> Path:
    docs = tmp_path / "root"
    docs.mkdir()
    (docs / "profile.md").write_text(SEED_PROFILE, encoding="utf-8")
    lines = "".join(f"line {i}\n" for i in range(1, 41))
    (docs / "guidance.md").write_text(lines, encoding="utf-8")
    (docs / "sub").mkdir()
    (docs / "sub" / "notes.md").write_text("# N\nnote\n", encoding="utf-8")
    (docs / "cfg.json").write_text('{\n  "a": {\n    "b": 1\n  }\n}\n', encoding="utf-8")
    (tmp_path / "secret.md").write_text("# Secret\ntop secret\n", encoding="utf-8")
    return docs


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path os.open sees during the test."""
    seen: list[str] = []
    real_open = os.open

    def spy(path, flags, *args, **kwargs):
        seen.append(os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return seen


# ---------------------------------------------------------------- parsing


def test_parse_reference_shapes():
    assert parse_reference("[guidance.md:12:30]") == LineReference("guidance.md", 12, 30)
    assert parse_reference("guidance.md:7") == LineReference("guidance.md", 7, 7)
    assert parse_reference("[profile.md#父/子]") == BlockReference("profile.md", "父/子")
    assert parse_reference("sub/notes.md") == FileReference("sub/notes.md")
    assert str(LineReference("a.md", 1, 2)) == "[a.md:1:2]"


@pytest.mark.parametrize("bad", ["", "[a.md:0:3]", "a.md:5:2", "a.md#", "a b.md:1:2"])
def test_parse_reference_rejects_bad_shapes(bad):
    with pytest.raises(ReferenceSyntaxError):
        parse_reference(bad)


def test_find_inline_references_in_a_query():
    query = (
        "这段是什么意思 [guidance.md:12:30]，还有 [profile.md#基本信息/教育背景] "
        "[see above] [guidance.md:12:30]"
    )
    assert find_references(query) == [
        LineReference("guidance.md", 12, 30),
        BlockReference("profile.md", "基本信息/教育背景"),
    ]
    assert find_references("plain [note] text [v2] and [a#b]") == []


def test_inline_escape_attempts_are_found_not_ignored():
    refs = find_references("look at [/etc/passwd:1:3] and [../secret.md#Secret]")
    assert [r.path for r in refs] == ["/etc/passwd", "../secret.md"]


# ---------------------------------------------------------------- resolving


def test_line_reference_reads_exact_lines(root):
    got = resolve_reference(root, "guidance.md:12:14")
    assert got.text == "line 12\nline 13\nline 14"
    assert got.label == "guidance.md:12-14"
    assert got.format() == "[guidance.md:12-14]\nline 12\nline 13\nline 14"


def test_block_reference_reads_block_with_children(root):
    got = resolve_reference(root, {"path": "profile.md", "block": "基本信息"})
    assert (got.start_line, got.end_line) == (1, 9)
    assert got.text.splitlines()[0] == "# 基本信息"
    assert got.text.splitlines()[-1] == "3年后端开发"
    leaf = resolve_reference(root, "[profile.md#基本信息/教育背景]")
    assert leaf.text == "## 教育背景\n本科: 软件工程\n研究生: 计算机科学"
    assert leaf.label == "profile.md#基本信息/教育背景 (lines 4-6)"


def test_manifest_shaped_line_reference(root):
    got = resolve_reference(root, {"path": "guidance.md", "startLine": 2, "endLine": 3})
    assert got.text == "line 2\nline 3"


def test_json_block_reference(root):
    got = resolve_reference(root, "cfg.json#a")
    assert got.text == '  "a": {\n    "b": 1\n  }'


def test_dotdot_that_stays_inside_is_fine(root):
    assert resolve_reference(root, "sub/../sub/notes.md#N").text == "# N\nnote"


def test_bad_ranges_and_missing_blocks(root):
    with pytest.raises(LineRangeError, match="has 40 line"):
        resolve_reference(root, "guidance.md:39:41")
    with pytest.raises(LineRangeError):
        resolve_reference(root, "guidance.md:41:41")
    with pytest.raises(BlockNotFoundError, match="'基本信息/教育背景'"):
        resolve_reference(root, "profile.md#没有")
    with pytest.raises(FileAccessError, match="no such file"):
        resolve_reference(root, "missing.md:1:2")


def test_slice_reference_is_pure():
    got = slice_reference(LineReference("x.md", 2, 2), "a\nb\nc\n")
    assert got.text == "b"


# ---------------------------------------------------------------- escapes


@pytest.mark.parametrize(
    "ref",
    [
        "/etc/passwd:1:1",  # absolute
        {"path": "/etc/hostname"},  # absolute, manifest shape
        "../secret.md#Secret",  # .. leaves the root
        "sub/../../secret.md:1:1",  # .. leaves after a detour
        {"path": "C:/Windows/win.ini"},  # windows drive
        "sub\\..\\..\\secret.md",  # backslashes
    ],
)
def test_escapes_are_refused_and_nothing_is_opened(root, opened, ref):
    with pytest.raises(PathEscapeError) as info:
        resolve_reference(root, ref)
    assert isinstance(info.value, CtxPolicyError)
    assert "refused path" in str(info.value)
    assert opened == []


def test_symlink_leaving_the_root_is_refused(root, opened):
    (root / "link.md").symlink_to(root.parent / "secret.md")
    (root / "linkdir").symlink_to(root.parent)
    with pytest.raises(PathEscapeError, match="outside the root"):
        resolve_reference(root, "link.md#Secret")
    with pytest.raises(PathEscapeError, match="outside the root"):
        resolve_reference(root, "linkdir/secret.md:1:1")
    assert opened == []


def test_symlink_inside_the_root_is_fine(root):
    (root / "alias.md").symlink_to(root / "profile.md")
    assert resolve_reference(root, "alias.md#学习目标").text.endswith("深入理解分布式系统原理")


def test_device_and_fifo_are_refused_without_opening(root, opened):
    (root / "null").symlink_to("/dev/null")
    with pytest.raises(PathEscapeError):
        resolve_reference(root, "null")
    os.mkfifo(root / "pipe.md")  # opening a FIFO would hang: it must never be opened
    with pytest.raises(PathEscapeError, match="not a regular file"):
        resolve_reference(root, "pipe.md")
    assert opened == []


def test_device_file_inside_the_root_is_refused(root, opened):
    try:
        os.mknod(root / "dev.md", 0o600 | 0o020000, os.makedev(1, 3))  # char device like /dev/null
    except (PermissionError, AttributeError):
        pytest.skip("creating a device node needs privileges (FIFO case covers the rule)")
    with pytest.raises(PathEscapeError, match="not a regular file"):
        resolve_reference(root, "dev.md")
    assert opened == []


def test_size_limit_and_encoding(root):
    (root / "big.md").write_text("x" * 2000, encoding="utf-8")
    with pytest.raises(FileAccessError, match="over the limit"):
        resolve_reference(root, "big.md", max_bytes=1000)
    (root / "bin.md").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FileAccessError, match="not UTF-8"):
        resolve_reference(root, "bin.md")
    with pytest.raises(FileAccessError, match="folder"):
        resolve_reference(root, "sub")


def test_open_walks_down_without_following_a_swapped_in_symlink(root):
    from ctxpolicy.blocks.sandbox import _open_beneath

    real_root = root.resolve()
    fd = _open_beneath(real_root, real_root / "sub" / "notes.md")
    os.close(fd)
    # "sub" passed the check as a folder, then is swapped for a link to the outside
    (root / "sub" / "notes.md").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(root.parent)
    with pytest.raises(OSError):
        _open_beneath(real_root, real_root / "sub" / "secret.md")
    (root / "last.md").symlink_to(root.parent / "secret.md")
    with pytest.raises(OSError):
        _open_beneath(real_root, real_root / "last.md")


def test_import_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, ctxpolicy.blocks, ctxpolicy.collectors.files; "
        "print(any(m.startswith(('langchain_core', 'tiktoken')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Issue 32, finding 12: a renamed parent heading resolves by the remaining path.
RENAMED = "# 新手册\n## 目标\n正文\n### 细节\nd\n# 附录\n## 目标\n另一个\n"


def test_a_stale_parent_resolves_by_the_longest_remaining_path() -> None:
    from ctxpolicy.blocks import parse_markdown_blocks
    from ctxpolicy.blocks.model import find_block, renamed_from

    blocks = parse_markdown_blocks(RENAMED, "h.md")
    found = find_block(blocks, "旧手册/目标/细节")
    assert found is not None and found.id == "新手册/目标/细节"
    assert renamed_from("旧手册/目标/细节", found.id)
    # the shorthand suffix is not a rename
    assert not renamed_from("目标/细节", found.id)
    # "目标" alone is under two parents: ambiguous, never a guess
    assert find_block(blocks, "旧手册/目标") is None
    with pytest.raises(BlockNotFoundError, match="旧手册/目标"):
        slice_reference(BlockReference("h.md", "旧手册/目标"), RENAMED)
    # a top-level block reached from a stale parent path
    top = find_block(parse_markdown_blocks("# 附录\nx\n", "a.md"), "旧/附录")
    assert top is not None and top.id == "附录"
