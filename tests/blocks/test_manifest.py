from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ctxpolicy.blocks import BlockNotFoundError, ManifestError, PathEscapeError
from ctxpolicy.blocks.curation import CurationLog
from ctxpolicy.blocks.manifest import (
    ContextManifest,
    FormattedContext,
    ManifestSources,
    compile_manifest,
    emit_messages,
    format_messages,
    load_manifest,
    manifest_policy,
    merge_references,
    parse_manifest,
    read_sources,
    resolve_sources,
    select_blocks,
)
from ctxpolicy.blocks.references import BlockReference, LineReference
from ctxpolicy.errors import BudgetExceededError
from ctxpolicy.policy import Policy

from .conftest import SEED_PROFILE

REPO = Path(__file__).resolve().parents[2]
SEED_MANIFEST = {
    "systemPrompt": [
        {"type": "global", "file": "system-prompt.md"},
        {"type": "session", "file": "session-prompt.md"},
    ],
    "profileBlocks": ["学习目标", "基本信息/教育背景"],
    "chatHistory": {"source": "messages.json", "strategy": "full"},
    "query": "这段是什么意思 [guidance.md:2:3]",
    "references": [
        {"path": "guidance.md", "startLine": 2, "endLine": 3},
        {"path": "ground-truth.md", "block": "薛定谔方程"},
    ],
}


def _manifest(**changes) -> ContextManifest:
    return parse_manifest({**SEED_MANIFEST, **changes})


def _sources(**changes) -> ManifestSources:
    base = {
        "system_prompts": ("GLOBAL\n", "SESSION"),
        "profile": SEED_PROFILE,
        "history": json.dumps(
            [{"id": "u1", "role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        ),
        "files": {
            "guidance.md": "g1\ng2\ng3\ng4\n",
            "ground-truth.md": "# 基础\n## 薛定谔方程\niħ ∂ψ/∂t = Ĥψ\n## 测量\nx\n",
        },
    }
    base.update(changes)
    return ManifestSources(**base)  # type: ignore[arg-type]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    session = root / "s1"
    session.mkdir(parents=True)
    (root / "system-prompt.md").write_text("You are a tutor.\n", encoding="utf-8")
    (root / "profile.md").write_text(SEED_PROFILE, encoding="utf-8")
    (session / "session-prompt.md").write_text("Session: Schrödinger.\n", encoding="utf-8")
    (session / "guidance.md").write_text("g1\ng2\ng3\ng4\n", encoding="utf-8")
    (session / "ground-truth.md").write_text(
        "# 基础\n## 薛定谔方程\niħ ∂ψ/∂t = Ĥψ\n## 测量\nx\n", encoding="utf-8"
    )
    (session / "messages.json").write_text(
        json.dumps(
            [
                {"id": "u1", "role": "user", "content": "hi"},
                {"id": "a1", "role": "assistant", "content": "long useless answer"},
            ]
        ),
        encoding="utf-8",
    )
    (tmp_path / "secret.md").write_text("secret\n", encoding="utf-8")
    return root


# ---------------------------------------------------------------- the manifest itself


def test_parse_manifest_camel_case_and_references():
    manifest = _manifest()
    assert manifest.profile_blocks == ("学习目标", "基本信息/教育背景")
    assert manifest.chat_history is not None and manifest.chat_history.strategy == "full"
    assert manifest.references == (
        LineReference("guidance.md", 2, 3),
        BlockReference("ground-truth.md", "薛定谔方程"),
    )


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"query": ""}, "query"),
        ({"chatHistory": {"source": "m.json", "strategy": "some"}}, "chatHistory.strategy"),
        ({"references": [{"path": "a.md", "startLine": 3, "endLine": 1}]}, "line range"),
        ({"references": [{"nope": 1}]}, "'path'"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_manifest_is_a_clear_error(change, needle):
    with pytest.raises(ManifestError, match=needle):
        parse_manifest({**SEED_MANIFEST, **change})


def test_load_manifest_errors(tmp_path):
    (tmp_path / "c.json").write_text("{nope", encoding="utf-8")
    with pytest.raises(ManifestError, match=r"c\.json:1:2: not JSON"):
        load_manifest(tmp_path / "c.json")
    (tmp_path / "d.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ManifestError, match="JSON object"):
        load_manifest(tmp_path / "d.json")


# ---------------------------------------------------------------- the five stages


def test_stage1_resolve_sources_joins_prompts_in_order():
    assert resolve_sources(_manifest(), _sources()) == "GLOBAL\n\nSESSION"
    assert resolve_sources(_manifest(), _sources(system_prompts=())) == ""


def test_stage2_select_blocks_in_manifest_order_with_spans():
    picked = select_blocks(_manifest(), _sources())
    assert [(p.label, p.text) for p in picked] == [
        ("profile.md#学习目标 (lines 11-12)", "# 学习目标\n深入理解分布式系统原理"),
        (
            "profile.md#基本信息/教育背景 (lines 4-6)",
            "## 教育背景\n本科: 软件工程\n研究生: 计算机科学",
        ),
    ]
    with pytest.raises(BlockNotFoundError, match="没有"):
        select_blocks(_manifest(profileBlocks=["没有"]), _sources())


def test_stage3_merge_references_includes_each_piece_once():
    text = merge_references(_manifest(), _sources())
    assert text == (
        "这段是什么意思 [guidance.md:2:3]\n\n"
        "[guidance.md:2-3]\ng2\ng3\n\n"
        "[ground-truth.md#基础/薛定谔方程 (lines 2-3)]\n## 薛定谔方程\niħ ∂ψ/∂t = Ĥψ"
    )
    assert text.count("g2") == 1  # inline and listed: once


def test_stage4_format_messages_history_and_curation():
    formatted = format_messages(_manifest(), _sources(), user_message="Q")
    assert [type(m) for m in formatted.history] == [HumanMessage, AIMessage]
    assert formatted.user_message == "Q"
    log = CurationLog()
    log.dismiss("u1", summary="greeting")
    curated = format_messages(_manifest(), _sources(), user_message="Q", curation_log=log)
    assert curated.history[0].content == "[human message — dismissed: greeting]"
    none = format_messages(_manifest(chatHistory=None), _sources(history=None), user_message="Q")
    assert none.history == ()


def test_stage4_history_shapes():
    history = json.dumps(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "x"}]},
                {"role": "assistant", "content": "b", "dismissed": "off topic"},
            ]
        }
    )
    formatted = format_messages(_manifest(), _sources(history=history), user_message="Q")
    assert [m.content for m in formatted.history] == [
        "a",
        "[assistant message — dismissed: off topic]",
    ]
    bad = json.dumps([{"role": "system", "content": "x"}])
    with pytest.raises(ManifestError, match=r"messages\.json\[0\]: role"):
        format_messages(_manifest(), _sources(history=bad), user_message="Q")


def test_stage5_emit_goes_through_the_composer():
    profile = select_blocks(_manifest(), _sources())
    formatted = FormattedContext(history=(HumanMessage("hi"), AIMessage("yo")), user_message="Q")
    messages = emit_messages(system_prompt="SYS", profile=profile, formatted=formatted)
    assert [type(m) for m in messages] == [
        SystemMessage,
        SystemMessage,
        HumanMessage,
        AIMessage,
        HumanMessage,
    ]
    assert messages[0].content == "SYS"
    assert messages[1].content.startswith("[profile.md#学习目标 (lines 11-12)]")
    assert messages[-1].content == "Q"


def test_stage5_budget_rules_apply():
    tiny = manifest_policy(context_window=300)
    big = FormattedContext(history=(), user_message="word " * 400)
    with pytest.raises(BudgetExceededError, match="query"):
        emit_messages(system_prompt="S", profile=(), formatted=big, policy=tiny)
    # the history is trimmed by whole units, oldest first, like any other call
    history = tuple(
        m for i in range(60) for m in (HumanMessage(f"question {i} " * 5), AIMessage(f"a {i}"))
    )
    out = emit_messages(
        system_prompt="S",
        profile=(),
        formatted=FormattedContext(history=history, user_message="Q"),
        policy=tiny,
    )
    assert isinstance(out[1], HumanMessage) and len(out) < len(history) + 2
    assert out[-2].content == "a 59" and out[-1].content == "Q"


def test_stage5_checkpoint_process_appends_the_user_message_to_history():
    policy = Policy.model_validate(
        {
            "version": 1,
            "name": "cp",
            "order": ["system_prompt", "profile__context", "checkpoint_messages", "query"],
            "processes": {"chat": {"query": "checkpoint"}},
            "default_process": "chat",
        }
    )
    formatted = FormattedContext(history=(HumanMessage("hi"), AIMessage("yo")), user_message="Q")
    out = emit_messages(system_prompt="S", profile=(), formatted=formatted, policy=policy)
    assert [m.content for m in out] == ["S", "hi", "yo", "Q"]


# ---------------------------------------------------------------- end to end


def test_compile_manifest_end_to_end(data_dir):
    compiled = compile_manifest(SEED_MANIFEST, root=data_dir, session_dir="s1")
    assert compiled.system_prompt == "You are a tutor.\n\nSession: Schrödinger."
    contents = [m.content for m in compiled.messages]
    assert contents[0] == compiled.system_prompt
    assert "深入理解分布式系统原理" in contents[1] and "本科: 软件工程" in contents[1]
    assert contents[2:4] == ["hi", "long useless answer"]
    assert contents[-1] == compiled.user_message
    assert "[guidance.md:2-3]\ng2\ng3" in contents[-1]
    assert "iħ ∂ψ/∂t = Ĥψ" in contents[-1]
    assert sum(c.count("g2\ng3") for c in contents) == 1


def test_compile_manifest_with_curation(data_dir):
    log = CurationLog()
    log.dismiss("a1", summary="not relevant")
    compiled = compile_manifest(SEED_MANIFEST, root=data_dir, session_dir="s1", curation_log=log)
    assert "[ai message — dismissed: not relevant]" in [m.content for m in compiled.messages]


@pytest.mark.parametrize(
    "change",
    [
        {"query": "看这个 [../../secret.md:1:1]"},  # inline reference in the query
        {"query": "看这个 [/etc/passwd:1:1]"},
        {"references": [{"path": "../../secret.md", "startLine": 1, "endLine": 1}]},
        {"references": [{"path": "/etc/hostname"}]},
        {"systemPrompt": [{"type": "global", "file": "../secret.md"}]},
        {"chatHistory": {"source": "../../secret.md"}},
        {"profileFile": "/etc/passwd"},
    ],
)
def test_compile_refuses_every_escape(data_dir, change, monkeypatch):
    import os

    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(
        os, "open", lambda p, f, *a, **k: opened.append(os.fspath(p)) or real_open(p, f, *a, **k)
    )
    with pytest.raises(PathEscapeError):
        compile_manifest({**SEED_MANIFEST, **change}, root=data_dir, session_dir="s1")
    assert not any("secret" in p or p.startswith("/etc") for p in opened)


def test_session_dir_must_stay_inside_root(data_dir):
    with pytest.raises(PathEscapeError):
        compile_manifest(SEED_MANIFEST, root=data_dir, session_dir="..")


def test_symlinked_reference_out_of_root_is_refused(data_dir):
    (data_dir / "s1" / "leak.md").symlink_to(data_dir.parent / "secret.md")
    with pytest.raises(PathEscapeError, match="outside"):
        compile_manifest(
            {**SEED_MANIFEST, "query": "x [leak.md:1:1]"}, root=data_dir, session_dir="s1"
        )


def test_read_sources_reads_only_what_is_needed(data_dir):
    manifest = _manifest(profileBlocks=[], chatHistory={"source": "x.json", "strategy": "none"})
    sources = read_sources(manifest, root=data_dir, session_dir="s1")
    assert sources.profile is None and sources.history is None
    assert set(sources.files) == {"guidance.md", "ground-truth.md"}


def test_bundled_example_compiles(tmp_path):
    manifest = load_manifest(REPO / "examples" / "context-config.json")
    compiled = compile_manifest(manifest, root=REPO / "examples" / "docs")
    last = compiled.messages[-1].content
    assert isinstance(last, str)
    assert last.startswith("这段是什么意思 [guidance.md:12:30]")
    assert "[guidance.md:12-30]" in last
    assert "[ground-truth.md#量子力学基础/薛定谔方程 (lines 8-18)]" in last
    assert any("dismissed" in str(m.content) for m in compiled.messages)
    shutil.copytree(REPO / "examples" / "docs", tmp_path / "copy")  # still a plain folder
