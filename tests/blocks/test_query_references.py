"""``layers.query.references``: inline ``[file:s:e]`` / ``[file#a/b]`` resolved by compose."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import ValidationError

from ctxpolicy import PolicyEngine
from ctxpolicy.errors import BudgetExceededError, CollectorError, CtxPolicyError
from ctxpolicy.loading import validate_paths
from ctxpolicy.policy import Policy

GUIDE = "# Guide\nline two\nline three\n\n## Sub\nsub text\n"


def _policy(tmp_path: Path, *, references: str = "{root: docs}", window: int = 8000) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "guide.md").write_text(GUIDE, encoding="utf-8")
    (tmp_path / "secret.md").write_text("TOP SECRET\n", encoding="utf-8")
    path = tmp_path / "policy.yaml"
    path.write_text(
        "version: 1\n"
        "name: refs\n"
        f"model: {{context_window: {window}, tokenizer: approximate}}\n"
        "order: [system_prompt, checkpoint_messages, query]\n"
        "layers:\n"
        "  query:\n"
        f"    references: {references}\n"
        "processes:\n"
        "  chat: {query: checkpoint}\n"
        "  run: {query: runtime, checkpoint_messages: false}\n"
        "default_process: chat\n",
        encoding="utf-8",
    )
    return path


def _engine(tmp_path: Path, **kwargs: object) -> PolicyEngine:
    return PolicyEngine.from_file(_policy(tmp_path, **kwargs))  # type: ignore[arg-type]


def test_runtime_query_gets_each_referenced_piece_once_with_its_label(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    query = "explain [guide.md:2:3] and [guide.md#Sub], again [guide.md:2:3]"
    result = engine.compose(process="run", system_prompt="sys", query=query)
    text = result.messages[-1].content
    assert isinstance(text, str)
    assert text.startswith(query + "\n\n[guide.md:2-3]\nline two\nline three")
    assert text.count("line two") == 1  # the repeated reference is included once
    assert "[guide.md#Guide/Sub (lines 5-6)]\n## Sub\nsub text" in text
    refs = result.report.layer("query").references
    assert [(r.ref, r.file, r.lines) for r in refs] == [
        ("[guide.md:2:3]", "guide.md", (2, 3)),
        ("[guide.md#Sub]", "guide.md", (5, 6)),
    ]
    assert all(r.tokens > 0 and r.error is None for r in refs)
    data = result.report.to_dict()
    (query_layer,) = [x for x in data["layers"] if x["name"] == "query"]
    assert query_layer["references"][0] == {
        "ref": "[guide.md:2:3]",
        "file": "guide.md",
        "lines": [2, 3],
        "tokens": refs[0].tokens,
        "error": None,
    }


def test_the_pieces_count_in_the_query_budget(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    plain = engine.compose(process="run", system_prompt="s", query="explain [nothing here]")
    with_ref = engine.compose(process="run", system_prompt="s", query="explain [guide.md:1:6]")
    grown = with_ref.report.layer("query").tokens - plain.report.layer("query").tokens
    assert grown >= with_ref.report.layer("query").references[0].tokens > 0
    assert with_ref.report.total_tokens == plain.report.total_tokens + grown

    (tmp_path / "docs" / "big.md").write_text("word " * 5000 + "\n", encoding="utf-8")
    small = _engine(tmp_path, window=2000)
    with pytest.raises(BudgetExceededError):
        small.compose(process="run", system_prompt="s", query="explain [big.md:1:1]")


def test_checkpoint_input_is_expanded_in_the_prompt_only(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    first = HumanMessage("hi", id="h0")
    answer = AIMessage("hello", id="a0")
    asked = HumanMessage("what is [guide.md#Sub]?", id="h1")
    state = {"messages": [first, answer, asked]}
    result = engine.compose(system_prompt="sys", state=state)
    last = result.messages[-1]
    assert last.id == "h1" and isinstance(last.content, str)
    assert last.content.startswith("what is [guide.md#Sub]?\n\n[guide.md#Guide/Sub (lines 5-6)]")
    # the state is untouched: same objects, same content
    assert state["messages"][2] is asked and asked.content == "what is [guide.md#Sub]?"
    assert [m.content for m in result.messages[1:3]] == ["hi", "hello"]
    assert result.report.layer("query").references[0].lines == (5, 6)
    assert result.compacted_history is None and result.persist == {}


def test_acompose_resolves_too(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    result = asyncio.run(
        engine.acompose(process="run", system_prompt="s", query="see [guide.md:2]")
    )
    assert "[guide.md:2-2]\nline two" in str(result.messages[-1].content)


@pytest.mark.parametrize(
    "ref",
    ["[../secret.md:1:1]", "[/etc/passwd:1:1]", "[link.md:1:1]", "[missing.md:1:1]"],
    ids=["dotdot", "absolute", "symlink-out", "missing"],
)
def test_escapes_and_missing_files_fail_naming_the_reference(tmp_path: Path, ref: str) -> None:
    engine = _engine(tmp_path)
    os.symlink(tmp_path / "secret.md", tmp_path / "docs" / "link.md")
    with pytest.raises(CollectorError) as caught:
        engine.compose(process="run", system_prompt="s", query=f"read {ref}")
    assert ref in str(caught.value)
    assert "TOP SECRET" not in str(caught.value)
    with pytest.raises(CollectorError):  # on the checkpoint path too
        engine.compose(system_prompt="s", state={"messages": [HumanMessage(f"read {ref}")]})


def test_skip_mode_leaves_the_reference_and_reports_it(tmp_path: Path) -> None:
    engine = _engine(tmp_path, references="{root: docs, on_error: skip}")
    query = "read [../secret.md:1:1] and [guide.md:2]"
    result = engine.compose(process="run", system_prompt="s", query=query)
    text = str(result.messages[-1].content)
    assert text.startswith(query) and "TOP SECRET" not in text
    assert "[guide.md:2-2]\nline two" in text
    layer = result.report.layer("query")
    skipped, kept = layer.references
    assert skipped.ref == "[../secret.md:1:1]" and skipped.lines is None
    assert skipped.error is not None and "refused path" in skipped.error
    assert kept.error is None
    assert any("[../secret.md:1:1] skipped" in note for note in layer.notes)


def test_a_query_without_references_is_unchanged(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    result = engine.compose(process="run", system_prompt="s", query="plain [see above]")
    assert result.messages[-1].content == "plain [see above]"
    assert result.report.layer("query").references == ()


def test_without_the_key_references_stay_text(tmp_path: Path) -> None:
    policy = Policy.model_validate(
        {
            "version": 1,
            "name": "p",
            "processes": {"run": {"query": "runtime"}},
            "default_process": "run",
        }
    )
    result = PolicyEngine(policy).compose(system_prompt="s", query="x [guide.md:1:2]")
    assert result.messages[-1].content == "x [guide.md:1:2]"


@pytest.mark.parametrize(
    ("root", "rule"),
    [("../outside", "path.outside"), ("/etc", "path.absolute")],
)
def test_a_root_that_leaves_the_policy_folder_is_a_located_error(
    tmp_path: Path, root: str, rule: str
) -> None:
    path = _policy(tmp_path, references=f"{{root: {root}}}")
    issues = [i for i in validate_paths([path]) if i.severity == "error"]
    assert [i.rule for i in issues] == [rule]
    assert issues[0].path == "$.layers.query.references.root"
    assert (issues[0].line, issues[0].column) == (7, 18)
    with pytest.raises(CtxPolicyError):
        PolicyEngine.from_file(path)


def test_references_belong_to_the_query_layer_only() -> None:
    with pytest.raises(ValidationError, match="only the query layer"):
        Policy.model_validate(
            {
                "version": 1,
                "name": "p",
                "layers": {"checkpoint_messages": {"references": {"root": "docs"}}},
            }
        )
