"""Preview glitches of issue 33 (finding 8): one entry per problem, the cap a layer got,
a merged layer shown as sent, no internal recall thread key."""

from __future__ import annotations

import html
import json

from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy import PolicyEngine
from ctxpolicy.cli.preview import tolerant_policy
from ctxpolicy.loading import load_policy
from ctxpolicy.render.formats import render_preview
from ctxpolicy.render.view import Preview


def _preview(name: str, process: str, **compose: object) -> Preview:
    policy = load_policy(name)
    engine = PolicyEngine(tolerant_policy(policy))
    result = engine.compose(process=process, system_prompt="S 系统", **compose)  # type: ignore[arg-type]
    return Preview.of(result, engine.plan(process), policy=policy, source=name)


def test_a_skipped_collector_is_one_entry_in_html_and_text() -> None:
    preview = _preview("builtin:base", "mapreduce_worker", query="Count rows 数一数")
    error = preview.result.report.layer("knowledge__context").error
    assert error is not None
    page = render_preview(preview, fmt="html")
    assert html.unescape(page).count(error) == 1
    text = render_preview(preview, fmt="text")
    assert text.count(error) == 1


def test_the_cap_column_is_the_cap_the_layer_got() -> None:
    history = []
    for turn in range(40):  # a history that takes more than its ratio's cap
        history += [HumanMessage(f"question {turn} " + "数据 " * 40), AIMessage(f"answer {turn}")]
    policy_text = "version: 1\nname: t\nextends: builtin:base\nmodel: {context_window: 4000}\n"
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        team = Path(folder) / "t.yaml"
        team.write_text(policy_text, encoding="utf-8")
        preview = _preview(str(team), "react", state={"messages": history})
    layer = preview.result.report.layer("checkpoint_messages")
    assert layer.cap is not None and layer.base_cap is not None
    assert layer.cap > layer.base_cap >= 0 and layer.tokens > layer.base_cap  # redistributed
    page = render_preview(preview, fmt="html")
    row = page.split('<tr class="layer included" data-layer="checkpoint_messages"', 1)[1]
    row = row.split("</tr>", 1)[0]
    cells = [c.split(">", 1)[1].split("<", 1)[0] for c in row.split('<td class="num')[1:4]]
    assert cells[1] == f"{layer.cap:,}" and cells[2] == f"{layer.base_cap:,}", cells
    line = next(
        row
        for row in render_preview(preview, fmt="text").splitlines()
        if row.strip().startswith("checkpoint_messages ")
    )
    assert line.split()[1:3] == [str(layer.tokens), str(layer.cap)]
    assert f"ratio cap {layer.base_cap}" in line


def test_no_internal_recall_thread_key_and_merged_layers_show_as_sent() -> None:
    state = json.loads(
        (load_policy("builtin:base").source.parent / "samples" / "state.json").read_text()  # type: ignore[union-attr]
    )
    from langchain_core.messages import convert_to_messages

    state["messages"] = convert_to_messages(state["messages"])
    preview = _preview("builtin:long-session", "react", state=state)
    for fmt in ("text", "html", "json"):
        out = render_preview(preview, fmt=fmt)
        assert "~first" not in out, fmt
    assert any(
        "this conversation (no thread_id" in n
        for n in preview.result.report.layer("recall__context").notes
    )
    host = PolicyEngine(tolerant_policy(load_policy("builtin:long-session"))).for_model_host()
    merged = host.compose(process="react", system_prompt="S", state=state)
    view = Preview.of(merged, host.plan("react"), policy=host.policy, source="builtin:long-session")
    text = render_preview(view, fmt="text")
    framework = next(r for r in text.splitlines() if r.strip().startswith("framework__context"))
    assert "sent in the system message of system_prompt" in framework
    assert "empty this call" not in framework
    assert "sent in the system message of <code>system_prompt</code>" in render_preview(
        view, fmt="html"
    )


def test_a_recall_fallback_and_a_block_cut_are_each_one_entry(monkeypatch) -> None:
    """A recall layer whose builtin model is missing falls back to lexical search: the
    warning is in the report's warnings, and each preview shows it once (as it shows a
    block's cut once, on the layer's row)."""
    from ctxpolicy.errors import EmbeddingsUnavailableError
    from ctxpolicy.recall import minilm

    def unavailable(name: str) -> object:
        raise EmbeddingsUnavailableError("needs numpy: pip install 'ctxpolicy[embeddings]' 数据")

    monkeypatch.setattr(minilm, "load_builtin_embeddings", unavailable)
    policy = tolerant_policy(load_policy("builtin:long-session"))
    layer = policy.layers["recall__context"]
    collector = layer.collector.model_copy(update={"embeddings": "minilm"})
    policy = policy.model_copy(
        update={
            "layers": {
                **policy.layers,
                "recall__context": layer.model_copy(update={"collector": collector}),
            },
            "model": policy.model.model_copy(update={"context_window": 3000}),
        }
    )
    history = []
    for turn in range(300):
        said = f"第{turn}天 the pottery vase {turn} 陶艺花瓶 " * 12 if turn % 10 == 0 else "fine"
        history += [
            HumanMessage(f"(day {turn}) Elise: Hey Kate, how was day {turn}?", id=f"h{turn}"),
            AIMessage(f"(day {turn}) Kate: {said}", id=f"a{turn}"),
        ]
    history.append(HumanMessage("What did Kate make in pottery? 陶艺", id="q"))
    engine = PolicyEngine(policy)
    framework = "框架 framework notes. " * 200  # over its cap: cut
    result = engine.compose(
        process="react",
        system_prompt="S",
        state={"messages": history},
        contexts={"framework__context": framework},
    )
    preview = Preview.of(result, engine.plan("react"), policy=policy, source="t.yaml")
    report = result.report
    [fallback] = [w for w in report.warnings if "lexical search only" in w]
    [cut] = report.layer("framework__context").cuts
    cut_text = f"framework__context: {cut.describe()}"
    assert cut_text in report.warnings  # every event is in the report's warnings
    for fmt in ("text", "html"):
        out = html.unescape(render_preview(preview, fmt=fmt))
        assert out.count(fallback) == 1, fmt
        assert out.count(cut.describe()) == 1, fmt
