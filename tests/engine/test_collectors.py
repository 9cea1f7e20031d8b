"""Collectors: template, state, retriever, callable; on_error, timeout_s, sandbox."""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.collectors.retriever import pack_documents
from ctxpolicy.collectors.template import readonly_view, resolve_template_file
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import CollectorError
from ctxpolicy.policy import Policy, RetrieverCollectorSpec
from ctxpolicy.testing import ListRetriever
from ctxpolicy.tokens import get_tokenizer
from tests.engine.conftest import design_data, make_policy

STATE = {"messages": [HumanMessage("what is in t1?")]}


def policy_with(collector: dict[str, Any], *, layer: str = "experience__context") -> Policy:
    data = design_data()
    data["layers"][layer] = {"collector": collector}
    return make_policy(data)


def compose_layer(
    collector: dict[str, Any],
    *,
    layer: str = "experience__context",
    state: dict[str, Any] | None = None,
    services: dict[str, Any] | None = None,
) -> Any:
    engine = PolicyEngine(policy_with(collector, layer=layer), services=services)
    return engine.compose(system_prompt="s", state=state or STATE)


def layer_text(result: Any, layer: str = "experience__context") -> str | None:
    report = result.report
    index = 0
    for entry in report.layers:
        if entry.name == layer:
            return result.messages[index].content if entry.messages else None
        index += entry.messages
    raise AssertionError(layer)


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    """A throwaway importable module for ``callable`` targets."""
    name = "ctxpolicy_test_targets"
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    yield mod
    del sys.modules[name]


# ----------------------------------------------------------------------------- template


def test_template_sees_state_query_and_vars() -> None:
    result = compose_layer(
        {
            "type": "template",
            "template": "{{ vars.product }}|{{ query }}|{{ state.messages | length }}",
        }
    )
    assert layer_text(result) == "Datapillar|what is in t1?|1"


def test_template_file_resolves_against_the_policy_folder(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "exp.j2").write_text("exp for {{ query }}", encoding="utf-8")
    (tmp_path / "p.yaml").write_text(
        "version: 1\nname: t\nlayers:\n  experience__context:\n"
        "    collector: {type: template, template_file: templates/exp.j2}\n",
        encoding="utf-8",
    )
    engine = PolicyEngine.from_file(tmp_path / "p.yaml")
    result = engine.compose(system_prompt="s", state=STATE)
    assert layer_text(result) == "exp for what is in t1?"


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../outside.j2", "sub/../../outside.j2", "link.j2"]
)
def test_template_file_escapes_are_refused(tmp_path: Path, path: str) -> None:
    root = tmp_path / "policy"
    root.mkdir()
    (tmp_path / "outside.j2").write_text("secret", encoding="utf-8")
    (root / "link.j2").symlink_to(tmp_path / "outside.j2")
    with pytest.raises(ValueError, match="template_file"):
        resolve_template_file(path, root, layer="experience__context")


def test_template_file_escape_fails_the_collector(tmp_path: Path) -> None:
    policy = policy_with({"type": "template", "template_file": "../x.j2"})
    policy._source = tmp_path / "p.yaml"  # as if loaded from tmp_path
    with pytest.raises(CollectorError, match="outside the policy folder"):
        PolicyEngine(policy).compose(system_prompt="s", state=STATE)


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ state.__class__ }}",
        "{{ vars.__class__.__init__.__globals__ }}",
        "{% for i in range(10**9) %}x{% endfor %}",
        "{{ undefined_name }}",
    ],
)
def test_template_sandbox_escapes_are_refused(source: str) -> None:
    with pytest.raises(CollectorError, match="experience__context"):
        compose_layer({"type": "template", "template": source})


def test_templates_cannot_modify_state() -> None:
    state = {"messages": [HumanMessage("q")], "todo": [1, 2]}
    with pytest.raises(CollectorError):
        compose_layer({"type": "template", "template": "{{ state.todo.append(3) }}"}, state=state)
    assert state["todo"] == [1, 2]
    view = readonly_view({"a": [{"b": 1}]})
    with pytest.raises(TypeError):
        view["a"][0]["b"] = 2  # type: ignore[index]


# ----------------------------------------------------------------------------- state


def test_state_field_plain_structured_and_missing() -> None:
    collector = {"type": "state", "field": "notes"}
    assert layer_text(compose_layer(collector, state={**STATE, "notes": "n1"})) == "n1"
    structured = layer_text(compose_layer(collector, state={**STATE, "notes": {"k": [1]}}))
    assert structured is not None and '"k"' in structured
    missing = compose_layer(collector)
    assert layer_text(missing) is None
    assert missing.report.layer("experience__context").error is None
    assert layer_text(compose_layer(collector, state={**STATE, "notes": []})) is None


def test_state_field_through_a_template() -> None:
    collector = {"type": "state", "field": "tasks", "template": "{{ value | length }} tasks"}
    assert layer_text(compose_layer(collector, state={**STATE, "tasks": [1, 2, 3]})) == "3 tasks"


# ----------------------------------------------------------------------------- retriever


def test_retriever_uses_top_k_and_the_input_as_query() -> None:
    retriever = ListRetriever([f"doc {i}" for i in range(10)])
    result = compose_layer(
        {"type": "retriever", "service": "kb", "top_k": 3}, services={"kb": retriever}
    )
    assert layer_text(result) == "doc 0\n\ndoc 1\n\ndoc 2"
    assert retriever.queries == ["what is in t1?"]  # checkpoint path: the last HumanMessage


def test_retriever_accepts_any_runnable_returning_documents() -> None:
    runnable = RunnableLambda(lambda q: [Document(page_content=f"about {q}")])
    result = compose_layer({"type": "retriever", "service": "kb"}, services={"kb": runnable})
    assert layer_text(result) == "about what is in t1?"


def test_retriever_packs_whole_documents_into_the_cap() -> None:
    tok = get_tokenizer("cl100k_base")
    docs = [Document(page_content=("alpha " * 50).strip()), Document(page_content="beta gamma")]
    docs.append(Document(page_content="delta"))
    request = CollectRequest(
        layer="knowledge__context",
        spec=RetrieverCollectorSpec(type="retriever", service="kb"),
        policy=make_policy(),
        process="react",
        state={},
        query="q",
        services={},
        cap_tokens=10,
        count_tokens=tok.count,
    )
    _, texts = pack_documents(docs, request=request)
    assert texts == ["beta gamma", "delta"]  # the big one is skipped whole, never cut
    assert tok.count("\n\n".join(texts)) <= 10
    lone, _ = pack_documents(docs[:1], request=request)
    assert lone == docs[:1]  # not even one fits: the engine's overflow rule will cut it


def test_missing_retriever_service_is_skipped_and_reported() -> None:
    result = PolicyEngine(make_policy()).compose(system_prompt="s", state=STATE)
    layer = result.report.layer("knowledge__context")
    assert layer.error is not None and "service 'knowledge' is not provided" in layer.error
    assert result.report.skipped[0].layer == "knowledge__context"
    assert any("collector skipped" in n for n in layer.notes)


# ----------------------------------------------------------------------------- callable


def test_callable_sync_and_async(module: types.ModuleType) -> None:
    def sync_target(request: CollectRequest) -> str:
        return f"sync {request.layer} {request.process} cap={request.cap_tokens > 0}"

    async def async_target(request: CollectRequest) -> str:
        await asyncio.sleep(0)
        return f"async {request.query}"

    module.sync_target = sync_target  # type: ignore[attr-defined]
    module.async_target = async_target  # type: ignore[attr-defined]
    sync = compose_layer({"type": "callable", "target": f"{module.__name__}:sync_target"})
    assert layer_text(sync) == "sync experience__context react cap=True"
    result = compose_layer({"type": "callable", "target": f"{module.__name__}:async_target"})
    assert layer_text(result) == "async what is in t1?"
    engine = PolicyEngine(
        policy_with({"type": "callable", "target": f"{module.__name__}:async_target"})
    )
    awaited = asyncio.run(engine.acompose(system_prompt="s", state=STATE))
    assert layer_text(awaited) == "async what is in t1?"


def test_callable_bad_target_and_bad_return(module: types.ModuleType) -> None:
    module.number = lambda request: 42  # type: ignore[attr-defined]
    with pytest.raises(CollectorError, match="returned int"):
        compose_layer({"type": "callable", "target": f"{module.__name__}:number"})
    with pytest.raises(CollectorError, match="AttributeError"):
        compose_layer({"type": "callable", "target": f"{module.__name__}:nothing"})


# ----------------------------------------------------------------------------- on_error / timeout


def test_failing_collector_skip_is_reported_and_fail_raises(module: types.ModuleType) -> None:
    def boom(request: CollectRequest) -> str:
        raise RuntimeError("database is down")

    module.boom = boom  # type: ignore[attr-defined]
    target = f"{module.__name__}:boom"
    skipped = compose_layer({"type": "callable", "target": target, "on_error": "skip"})
    layer = skipped.report.layer("experience__context")
    assert layer.error == "RuntimeError: database is down"
    assert skipped.report.skipped[0].collector == "callable"
    assert layer_text(skipped) is None
    with pytest.raises(CollectorError, match="database is down") as info:
        compose_layer({"type": "callable", "target": target, "on_error": "fail"})
    assert info.value.layer == "experience__context"
    with pytest.raises(CollectorError, match="database is down"):
        engine = PolicyEngine(policy_with({"type": "callable", "target": target}))
        asyncio.run(engine.acompose(system_prompt="s", state=STATE))


def test_slow_sync_collector_times_out(module: types.ModuleType) -> None:
    release = threading.Event()

    def slow(request: CollectRequest) -> str:
        release.wait(30)
        return "late"

    module.slow = slow  # type: ignore[attr-defined]
    spec = {"type": "callable", "target": f"{module.__name__}:slow", "timeout_s": 0.05}
    try:
        skipped = compose_layer({**spec, "on_error": "skip"})
        assert skipped.report.layer("experience__context").error == "timed out after 0.05s"
        with pytest.raises(CollectorError, match=r"timed out after 0\.05s"):
            compose_layer(spec)
    finally:
        release.set()


def test_slow_async_collector_times_out(module: types.ModuleType) -> None:
    async def slow(request: CollectRequest) -> str:
        await asyncio.Event().wait()  # never set
        return "late"

    module.aslow = slow  # type: ignore[attr-defined]
    spec = {"type": "callable", "target": f"{module.__name__}:aslow", "timeout_s": 0.05}
    engine = PolicyEngine(policy_with({**spec, "on_error": "skip"}))
    result = asyncio.run(engine.acompose(system_prompt="s", state=STATE))
    assert result.report.layer("experience__context").error == "timed out after 0.05s"
    sync = compose_layer({**spec, "on_error": "skip"})  # sync compose honours it too
    assert sync.report.layer("experience__context").error == "timed out after 0.05s"
    with pytest.raises(CollectorError, match="timed out"):
        asyncio.run(PolicyEngine(policy_with(spec)).acompose(system_prompt="s", state=STATE))


def test_a_collector_may_return_warnings_for_the_report(module: types.ModuleType) -> None:
    # issue 32: what a collector resolved another way is reported, never silent
    from ctxpolicy.collectors.base import Collected

    def warns(request: CollectRequest) -> Collected:
        return Collected("知识 text", (f"{request.layer}: resolved another way",))

    module.warns = warns  # type: ignore[attr-defined]
    engine = PolicyEngine(policy_with({"type": "callable", "target": f"{module.__name__}:warns"}))
    for result in (
        engine.compose(system_prompt="s", state=STATE),
        asyncio.run(engine.acompose(system_prompt="s", state=STATE)),
    ):
        assert layer_text(result) == "知识 text"
        assert "experience__context: resolved another way" in result.report.warnings

    module.bad = lambda request: Collected(3, ())  # type: ignore[attr-defined,arg-type]
    with pytest.raises(CollectorError, match="expected str, Collected or None"):
        compose_layer({"type": "callable", "target": f"{module.__name__}:bad"})
