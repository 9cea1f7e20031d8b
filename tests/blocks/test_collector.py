from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ctxpolicy.blocks import BlocksError, FileAccessError, PathEscapeError
from ctxpolicy.blocks.references import FileReference, resolve_reference
from ctxpolicy.collectors.base import Collected, CollectRequest, get_collector
from ctxpolicy.collectors.files import collect_files, expand_select, pack_pieces
from ctxpolicy.policy import Policy

from .conftest import SEED_PROFILE


def _words(text: str) -> int:
    return len(text.split())


def _request(base_dir: Path | None, select: list[str], *, root: str = "docs", cap: int = 10_000):
    policy = Policy.model_validate(
        {
            "version": 1,
            "name": "files-test",
            "layers": {
                "knowledge__context": {
                    "collector": {"type": "files", "root": root, "select": select}
                }
            },
        }
    )
    spec = policy.layer("knowledge__context").collector
    return CollectRequest(
        layer="knowledge__context",
        spec=spec,  # type: ignore[arg-type]
        policy=policy,
        process="react",
        state={},
        query=None,
        services={},
        cap_tokens=cap,
        count_tokens=_words,
        base_dir=base_dir,
    )


@pytest.fixture
def base(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "more").mkdir(parents=True)
    (docs / "profile.md").write_text(SEED_PROFILE, encoding="utf-8")
    (docs / "guide.md").write_text("".join(f"g{i}\n" for i in range(1, 21)), encoding="utf-8")
    (docs / "more" / "a.md").write_text("alpha\n", encoding="utf-8")
    (docs / "more" / "b.md").write_text("beta\n", encoding="utf-8")
    (tmp_path / "outside.md").write_text("secret\n", encoding="utf-8")
    return tmp_path


def test_registered_under_files():
    assert get_collector("files") is collect_files


def test_collects_labelled_pieces_in_select_order(base):
    text = collect_files(_request(base, ["profile.md#学习目标", "guide.md:2:3", "more/*.md"]))
    assert text == (
        "[profile.md#学习目标 (lines 11-12)]\n# 学习目标\n深入理解分布式系统原理\n\n"
        "[guide.md:2-3]\ng2\ng3\n\n"
        "[more/a.md:1-1]\nalpha\n\n"
        "[more/b.md:1-1]\nbeta"
    )


def test_packs_whole_pieces_into_the_cap(base):
    # each piece costs 2 "tokens" (label + line); the big one is skipped whole
    text = collect_files(_request(base, ["more/a.md", "guide.md:1:20", "more/b.md"], cap=5))
    assert text == "[more/a.md:1-1]\nalpha\n\n[more/b.md:1-1]\nbeta"


def test_omitted_pieces_are_named_when_the_note_fits(base):
    text = collect_files(_request(base, ["more/a.md", "guide.md:1:20", "more/b.md"], cap=16))
    assert text == (
        "[more/a.md:1-1]\nalpha\n\n[more/b.md:1-1]\nbeta\n\n"
        "[not included, over this layer's 16-token cap: guide.md:1-20]"
    )


def test_first_piece_too_big_is_left_to_the_overflow_rule(base):
    text = collect_files(_request(base, ["guide.md:1:20"], cap=3))
    assert text is not None and text.startswith("[guide.md:1-20]") and text.endswith("g20")


def test_duplicate_selects_are_collected_once(base):
    text = collect_files(_request(base, ["more/a.md", "more/a.md", "more/*.md"]))
    assert text is not None and text.count("alpha") == 1


@pytest.mark.parametrize("root", ["/tmp", "../", "docs/../.."])
def test_root_escaping_the_policy_folder_is_refused(base, root):
    with pytest.raises(PathEscapeError):
        collect_files(_request(base, ["guide.md"], root=root))


def test_root_symlink_leaving_the_policy_folder_is_refused(base, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (base / "linked").symlink_to(elsewhere)
    with pytest.raises(PathEscapeError, match="outside"):
        collect_files(_request(base, ["x.md"], root="linked"))


@pytest.mark.parametrize(
    "select", ["../outside.md", "/etc/passwd", "../*.md", "more/../../outside.md:1:1"]
)
def test_select_escaping_the_root_is_refused(base, select):
    with pytest.raises(PathEscapeError):
        collect_files(_request(base, [select]))


def test_glob_match_through_symlink_out_of_root_is_refused(base):
    (base / "docs" / "more" / "c.md").symlink_to(base / "outside.md")
    with pytest.raises(PathEscapeError):
        collect_files(_request(base, ["more/*.md"]))


def _session(base: Path, thread: str, *, root: str = "sessions/{thread_id}"):
    return dataclasses.replace(_request(base, ["profile.md"], root=root), thread_id=thread)


def test_a_session_root_without_its_folder_yet_is_an_empty_layer(base, tmp_path_factory):
    (base / "sessions").mkdir()
    collected = collect_files(_session(base, "会话-新"))
    assert isinstance(collected, Collected) and collected.text is None
    assert collected.warnings == (
        "knowledge__context: no folder 'sessions/会话-新' for this session yet; the layer is empty",
    )
    # a symlinked session folder that leaves the policy's folder is refused, not empty
    (base / "sessions" / "t-out").symlink_to(tmp_path_factory.mktemp("elsewhere"))
    with pytest.raises(PathEscapeError, match="outside"):
        collect_files(_session(base, "t-out"))


def test_a_session_root_under_a_file_is_an_error_not_an_empty_layer(base):
    (base / "sessions").write_text("a file, not a folder\n", encoding="utf-8")
    with pytest.raises(FileAccessError):
        collect_files(_session(base, "t-1"))
    (base / "sessions.md").mkdir()
    (base / "sessions.md" / "t-1").write_text("a file\n", encoding="utf-8")
    with pytest.raises(FileAccessError, match="not a folder"):
        collect_files(_session(base, "t-1", root="sessions.md/{thread_id}"))


def test_without_base_dir_is_a_clear_error(base):
    with pytest.raises(BlocksError, match="not loaded from a file"):
        collect_files(_request(None, ["guide.md"]))


def test_pack_pieces_keeps_order_and_skips_only_what_does_not_fit(base):
    root = base / "docs"
    pieces = [resolve_reference(root, FileReference(p)) for p in ["more/a.md", "more/b.md"]]
    assert pack_pieces(pieces, cap_tokens=100, count_tokens=_words) == pieces
    assert pack_pieces([], cap_tokens=1, count_tokens=_words) == []


def test_expand_select_sorted_and_deduped(base):
    refs = expand_select(base / "docs", ["more/*.md", "more/a.md"])
    assert refs == [FileReference("more/a.md"), FileReference("more/b.md")]
