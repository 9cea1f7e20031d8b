"""Path escapes in ``template_file``, ``files`` roots/references and the file tools.

Absolute paths, ``..``, symlinks leaving the folder, device files (``/dev/zero``) and
FIFOs are refused with a clear error — at load time (validation) or at run time when
the file system changed after loading — and the target outside is never opened
(checked with an audit hook on every ``open``/``os.open`` of the process).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from ctxpolicy.blocks import BlocksError, PathEscapeError
from ctxpolicy.blocks.references import resolve_reference
from ctxpolicy.blocks.tools import FileTools, create_file_tools
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import CollectorError, PolicyValidationError
from ctxpolicy.loading import load_policy

from .conftest import assert_never_opened, watchdog, write_policy

SECRET = "TOP-SECRET-OUTSIDE-THE-ROOT"
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
needs_dev_zero = pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """``outside/secret.md`` next to a policy folder with a template and a docs root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n{SECRET}\n", encoding="utf-8")
    policy_dir = tmp_path / "policy"
    docs = policy_dir / "docs"
    docs.mkdir(parents=True)
    (docs / "ok.md").write_text("# Ok\nfine\n", encoding="utf-8")
    (policy_dir / "t.j2").write_text("hello {{ query }}", encoding="utf-8")
    return {"outside": outside, "secret": outside / "secret.md", "policy": policy_dir, "docs": docs}


def _layers(
    *,
    template_file: str = "t.j2",
    root: str = "docs",
    select: tuple[str, ...] = ("ok.md",),
    on_error: str = "fail",
) -> dict[str, Any]:
    return {
        "knowledge__context": {
            "collector": {"type": "template", "template_file": template_file, "on_error": on_error}
        },
        "experience__context": {
            "collector": {
                "type": "files",
                "root": root,
                "select": list(select),
                "on_error": on_error,
            }
        },
    }


def _compose(engine: PolicyEngine) -> Any:
    state = {"messages": [HumanMessage("the query")]}
    return watchdog(lambda: engine.compose(system_prompt="s", state=state))


def _all_text(result: Any) -> str:
    return "\n".join(str(m.content) for m in result.messages)


def test_the_untouched_tree_composes(tree: dict[str, Path]) -> None:
    engine = PolicyEngine.from_file(write_policy(tree["policy"], _layers()))
    text = _all_text(_compose(engine))
    assert "hello the query" in text
    assert "fine" in text


# ------------------------------------------------------------- refused when loading

_LOAD_ESCAPES: dict[str, Callable[[dict[str, Path]], dict[str, Any]]] = {
    "template_absolute": lambda t: _layers(template_file=str(t["secret"])),
    "template_dotdot": lambda t: _layers(template_file="../outside/secret.md"),
    "template_dotdot_inside": lambda t: _layers(template_file="docs/../../outside/secret.md"),
    "template_symlink_out": lambda t: _layers(template_file="link.j2"),
    "template_dir_symlink_out": lambda t: _layers(template_file="outlink/secret.md"),
    "template_dev_zero_symlink": lambda t: _layers(template_file="zero.j2"),
    "root_absolute": lambda t: _layers(root=str(t["outside"])),
    "root_dotdot": lambda t: _layers(root=".."),
    "root_dotdot_outside": lambda t: _layers(root="../outside"),
    "root_dotdot_inside": lambda t: _layers(root="docs/../../outside"),
    "root_symlink_out": lambda t: _layers(root="outlink"),
}


def _links(tree: dict[str, Path]) -> None:
    (tree["policy"] / "link.j2").symlink_to(tree["secret"])
    (tree["policy"] / "outlink").symlink_to(tree["outside"], target_is_directory=True)
    if Path("/dev/zero").exists():
        (tree["policy"] / "zero.j2").symlink_to("/dev/zero")


@pytest.mark.parametrize("make", _LOAD_ESCAPES.values(), ids=_LOAD_ESCAPES.keys())
def test_escape_in_policy_is_a_validation_error(
    tree: dict[str, Path],
    make: Callable[[dict[str, Path]], dict[str, Any]],
    opened_paths: list[str],
) -> None:
    _links(tree)
    path = write_policy(tree["policy"], make(tree))
    with pytest.raises(PolicyValidationError) as caught:
        watchdog(lambda: load_policy(path))
    rules = {issue.rule for issue in caught.value.issues}
    assert rules & {"path.absolute", "path.outside", "path.symlink-outside"}, rules
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero")


# ------------------------------------------- refused at run time (swapped after loading)


def _swap_template(tree: dict[str, Path], kind: str) -> None:
    target = tree["policy"] / "t.j2"
    target.unlink()
    if kind == "symlink_out":
        target.symlink_to(tree["secret"])
    elif kind == "dir_symlink_out":
        os.rename(tree["policy"] / "docs", tree["policy"] / "docs-real")
        target.symlink_to(tree["outside"] / "secret.md")
    elif kind == "dev_zero":
        target.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "missing":
        pass


_TEMPLATE_SWAPS = [
    "symlink_out",
    pytest.param("dev_zero", marks=needs_dev_zero),
    pytest.param("fifo", marks=needs_fifo),
    "folder",
    "missing",
]


@pytest.mark.parametrize("kind", _TEMPLATE_SWAPS)
def test_template_file_swapped_after_loading_fails_clearly(
    tree: dict[str, Path], kind: str, opened_paths: list[str]
) -> None:
    engine = PolicyEngine.from_file(write_policy(tree["policy"], _layers()))
    _swap_template(tree, kind)
    opened_paths.clear()  # loading read t.j2 while it was a regular file
    with pytest.raises(CollectorError) as caught:
        _compose(engine)
    assert caught.value.layer == "knowledge__context"
    assert "t.j2" in str(caught.value)
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero", tree["policy"] / "t.j2")


@pytest.mark.parametrize("kind", _TEMPLATE_SWAPS)
def test_template_file_swapped_after_loading_is_skipped_and_recorded(
    tree: dict[str, Path], kind: str, opened_paths: list[str]
) -> None:
    engine = PolicyEngine.from_file(write_policy(tree["policy"], _layers(on_error="skip")))
    _swap_template(tree, kind)
    opened_paths.clear()
    result = _compose(engine)
    skipped = {s.layer: s.error for s in result.report.skipped}
    assert "knowledge__context" in skipped
    assert "t.j2" in skipped["knowledge__context"]
    text = _all_text(result)
    assert SECRET not in text
    assert "the query" in text  # history and the other layers are still composed
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero")


def _swap_docs(tree: dict[str, Path], kind: str) -> None:
    ok = tree["docs"] / "ok.md"
    if kind == "root_symlink_out":
        os.rename(tree["docs"], tree["policy"] / "docs-real")
        (tree["policy"] / "docs").symlink_to(tree["outside"], target_is_directory=True)
        (tree["outside"] / "ok.md").write_text(f"{SECRET}\n", encoding="utf-8")
        return
    ok.unlink()
    if kind == "file_symlink_out":
        ok.symlink_to(tree["secret"])
    elif kind == "dev_zero":
        ok.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(ok)
    elif kind == "folder":
        ok.mkdir()


_DOCS_SWAPS = [
    "root_symlink_out",
    "file_symlink_out",
    pytest.param("dev_zero", marks=needs_dev_zero),
    pytest.param("fifo", marks=needs_fifo),
    "folder",
]


@pytest.mark.parametrize("kind", _DOCS_SWAPS)
def test_files_root_or_piece_swapped_after_loading_fails_clearly(
    tree: dict[str, Path], kind: str, opened_paths: list[str]
) -> None:
    engine = PolicyEngine.from_file(write_policy(tree["policy"], _layers()))
    _swap_docs(tree, kind)
    opened_paths.clear()  # the swap itself wrote outside/ok.md
    fifo_or_zero = [tree["docs"] / "ok.md"] if kind in {"fifo", "dev_zero"} else []
    with pytest.raises(CollectorError) as caught:
        _compose(engine)
    assert caught.value.layer == "experience__context"
    assert_never_opened(
        opened_paths, tree["secret"], tree["outside"] / "ok.md", "/dev/zero", *fifo_or_zero
    )


_SELECT_ESCAPES = [
    "/etc/passwd",
    "../outside/secret.md",
    "../outside/secret.md:1:2",
    "../outside/secret.md#Secret",
    "sub/../../outside/secret.md",
    "..",
    "*/../../outside/*.md",
    "../**/*.md",
    "C:\\Windows\\win.ini",
    "link.md",
    "linkdir/secret.md",
    "linkdir/*.md",
    "zero.md",
]


@pytest.mark.parametrize("entry", _SELECT_ESCAPES)
def test_files_select_escape_is_refused_at_load_or_at_compose(
    tree: dict[str, Path], entry: str, opened_paths: list[str]
) -> None:
    (tree["docs"] / "link.md").symlink_to(tree["secret"])
    (tree["docs"] / "linkdir").symlink_to(tree["outside"], target_is_directory=True)
    if Path("/dev/zero").exists():
        (tree["docs"] / "zero.md").symlink_to("/dev/zero")
    path = write_policy(tree["policy"], _layers(select=(entry,)))
    try:
        engine = PolicyEngine.from_file(path)
    except PolicyValidationError as exc:
        assert exc.issues  # refused with located issues
    else:
        with pytest.raises(CollectorError) as caught:
            _compose(engine)
        assert caught.value.layer == "experience__context"
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero", "/etc/passwd")


# ----------------------------------------------------------------------------- tools


@pytest.fixture
def tools_root(tree: dict[str, Path]) -> Path:
    docs = tree["docs"]
    (docs / "link.md").symlink_to(tree["secret"])
    (docs / "linkdir").symlink_to(tree["outside"], target_is_directory=True)
    (docs / "self").symlink_to(docs, target_is_directory=True)  # a loop inside the root
    if Path("/dev/zero").exists():
        (docs / "zero.md").symlink_to("/dev/zero")
    if hasattr(os, "mkfifo"):
        os.mkfifo(docs / "pipe.md")
    return docs


_READ_ESCAPES = [
    "/etc/passwd",
    "../outside/secret.md",
    "../../outside/secret.md",
    "./../outside/secret.md",
    "link.md",
    "linkdir/secret.md",
    "zero.md",
    "pipe.md",
    "ok.md\x00../../outside/secret.md",
    "..\\outside\\secret.md",
    "",
]


@pytest.mark.parametrize("path", _READ_ESCAPES)
def test_file_tools_refuse_reads_outside_the_root(
    tree: dict[str, Path], tools_root: Path, path: str, opened_paths: list[str]
) -> None:
    tools = FileTools(tools_root, enable_write=True)
    calls: list[Callable[[], Any]] = [
        lambda: tools.read_file(path),
        lambda: tools.read_block(path, "Secret"),
        lambda: resolve_reference(tools_root, {"path": path} if path else "x:0:0"),
        lambda: tools.write_file(path, "overwritten"),
    ]
    for call in calls:
        with pytest.raises(BlocksError) as caught:
            watchdog(call)
        assert str(caught.value)
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero", tools_root / "pipe.md")
    assert tree["secret"].read_text(encoding="utf-8").endswith(f"{SECRET}\n")  # not written


def test_file_tools_listing_and_search_never_cross_the_root(
    tree: dict[str, Path], tools_root: Path, opened_paths: list[str]
) -> None:
    tools = FileTools(tools_root)
    listing = watchdog(lambda: tools.list_files(".", "*"))
    assert "ok.md" in listing
    assert "secret.md" not in listing
    found = watchdog(lambda: tools.search(SECRET))
    assert found.startswith("[no match")
    assert "secret.md" not in found
    for outside in ("..", "../outside", "linkdir", "/etc"):
        with pytest.raises(PathEscapeError):
            tools.list_files(outside)
        with pytest.raises(PathEscapeError):
            tools.search("x", path=outside)
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero", tools_root / "pipe.md")


@pytest.mark.parametrize("path", ["../outside/secret.md", "link.md", "zero.md", "/etc/passwd"])
def test_langchain_file_tools_answer_with_an_error_not_the_file(
    tree: dict[str, Path], tools_root: Path, path: str, opened_paths: list[str]
) -> None:
    tools = {tool.name: tool for tool in create_file_tools(tools_root, enable_write=True)}
    for name, args in (
        ("read_file", {"path": path}),
        ("read_block", {"path": path, "block_id": "Secret"}),
        ("write_file", {"path": path, "content": "overwritten"}),
    ):
        try:
            answer = watchdog(lambda n=name, a=args: tools[n].invoke(a))
        except Exception as exc:
            answer = str(exc)
        assert SECRET not in str(answer)
        assert "outside" in str(answer) or "absolute" in str(answer) or "regular" in str(answer)
    assert_never_opened(opened_paths, tree["secret"], "/dev/zero")
    assert tree["secret"].read_text(encoding="utf-8").endswith(f"{SECRET}\n")  # not written
