"""`WordLlamaEmbeddings` (the ``embeddings`` extra) as the dense ranking of a recall layer.

These tests run the real bundled model. They skip only when ``wordllama`` is not
installed (``pip install 'ctxpolicy[embeddings]'``); with ``CTXPOLICY_REQUIRE_EMBEDDINGS``
set, as ``make test`` should, a missing package fails instead.
"""

from __future__ import annotations

import importlib.util
import math
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy import PolicyEngine
from ctxpolicy.recall import wordllama as integration
from ctxpolicy.recall.wordllama import WordLlamaEmbeddings

ROOT = Path(__file__).resolve().parents[2]
HAS_WORDLLAMA = importlib.util.find_spec("wordllama") is not None
if not HAS_WORDLLAMA and os.environ.get("CTXPOLICY_REQUIRE_EMBEDDINGS"):
    pytest.fail(
        "wordllama is required (CTXPOLICY_REQUIRE_EMBEDDINGS) but not installed",
        pytrace=False,
    )
needs_wordllama = pytest.mark.skipif(
    not HAS_WORDLLAMA, reason="wordllama (the embeddings extra) is not installed"
)

TOPICS = (
    "the nightly export to the warehouse",
    "the frontend build",
    "the kafka consumer lag",
    "the billing invoices for March",
    "the on-call rotation",
    "the flaky integration test",
    "the terraform plan for the vpc",
    "the grafana alert on disk usage",
    "the redis cache eviction",
    "the python 3.12 upgrade",
)


def session(turns: int) -> list:
    """``turns`` user/assistant turns about everyday topics (none about the facts)."""
    out = []
    for i in range(turns):
        topic = TOPICS[(i * 7) % len(TOPICS)]
        ask = f"Can you give me an update on {topic}? It came up in standup."
        answer = f"I checked {topic}: run {i} took {i % 50} minutes, nothing unusual was logged."
        out += [HumanMessage(ask, id=f"h{i}"), AIMessage(answer, id=f"a{i}")]
    return out


# (fact, paraphrased question sharing no word with it, the value the prompt must hold)
FACTS = (
    (
        "Our SMTP relay password was rotated, the new one is in vault under mail/relay-7.",
        "Where are the email server credentials kept?",
        "mail/relay-7",
    ),
    (
        "The payments team lead is Ingrid Solberg, she approves every schema change.",
        "Who is in charge of the money people?",
        "Ingrid Solberg",
    ),
)


def prompt_text(result) -> str:
    return "\n".join(str(m.content) for m in result.messages)


@needs_wordllama
@pytest.mark.parametrize(("fact", "question", "value"), FACTS, ids=["credentials", "owner"])
def test_wordllama_finds_a_paraphrased_fact_bm25_misses(
    long_session, fact: str, question: str, value: str
) -> None:
    history = [
        HumanMessage(f"Something to remember: {fact}", id="fact"),
        AIMessage("Noted.", id="ok"),
        *session(300),
        HumanMessage(question, id="q"),
    ]
    state = {"messages": history}
    plain = PolicyEngine.from_file(long_session(window=3000, name="bm25"))
    result = plain.compose(process="react", system_prompt="s", state=state)
    assert value not in prompt_text(result)  # bm25 alone: the fact is out of the window

    path = long_session(window=3000, recall="backend: memory\nembeddings: embed", name="dense")
    dense = PolicyEngine.from_file(path, services={"embed": WordLlamaEmbeddings()})
    result = dense.compose(process="react", system_prompt="s", state=state)
    assert value in prompt_text(result)
    recalled = result.report.layer("recall__context").recalled
    assert any(u.message_id == "fact" for u in recalled)
    # and the history the engine kept is only the newest turns: the fact came from recall
    assert all(m.id != "fact" for m in result.messages)


@needs_wordllama
@pytest.mark.parametrize("dim", [64, 128, 256])
def test_embed_query_returns_the_declared_dimension(dim: int) -> None:
    embeddings = WordLlamaEmbeddings(dim=dim)
    vector = embeddings.embed_query("Where are the email server credentials kept?")
    assert len(vector) == dim
    assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-4)
    assert all(isinstance(x, float) for x in vector)


@needs_wordllama
def test_embed_documents_keeps_the_order_and_matches_embed_query() -> None:
    embeddings = WordLlamaEmbeddings(batch_size=3)  # several batches, sorted by length
    texts = [f"status of batch job {i} " + "with a longer tail " * (i % 4) for i in range(10)]
    texts.append("")
    vectors = embeddings.embed_documents(texts)
    assert len(vectors) == len(texts)
    for text, vector in zip(texts[:10], vectors, strict=False):
        assert vector == pytest.approx(embeddings.embed_query(text), abs=1e-5)
    assert vectors[-1] == [0.0] * 256  # an empty text has no token: zeros, not NaN
    assert embeddings.embed_documents([]) == []


@needs_wordllama
def test_an_instance_pickles_without_its_model() -> None:
    embeddings = WordLlamaEmbeddings(dim=128, batch_size=8)
    vector = embeddings.embed_query("where is the backup bucket?")
    copy = pickle.loads(pickle.dumps(embeddings))
    assert (copy.dim, copy.batch_size, copy._model) == (128, 8, None)
    assert copy.embed_query("where is the backup bucket?") == pytest.approx(vector, abs=1e-6)


@needs_wordllama
def test_the_model_is_loaded_once_even_by_racing_threads(monkeypatch) -> None:
    package = integration._import_wordllama()
    real_load = package.WordLlama.load
    calls: list[int] = []

    def counting_load(*args, **kwargs):
        calls.append(1)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(package.WordLlama, "load", counting_load)
    embeddings = WordLlamaEmbeddings()
    assert embeddings._model is None  # lazy: nothing loaded by the constructor
    texts = [f"line {i} of the nightly export log" for i in range(200)]
    results: dict[int, list[list[float]]] = {}
    start = threading.Barrier(8)

    def work(k: int) -> None:
        start.wait()
        results[k] = embeddings.embed_documents(texts[k * 10 : k * 10 + 100])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1]
    for k in range(8):
        serial = embeddings.embed_documents(texts[k * 10 : k * 10 + 100])
        for got, want in zip(results[k], serial, strict=True):
            assert got == pytest.approx(want, abs=1e-5)


@needs_wordllama
def test_loads_offline_from_the_wheel_and_leaves_logging_alone(tmp_path: Path) -> None:
    # a fresh process: no socket may connect, HOME is empty (wordllama's download cache
    # would be ~/.cache/wordllama), and the root logger must stay unconfigured
    script = textwrap.dedent(
        """
        import logging, os, socket, sys

        def refuse(*args, **kwargs):
            raise OSError(f"network access: {args}")

        socket.socket.connect = refuse
        socket.getaddrinfo = refuse
        socket.create_connection = refuse
        from ctxpolicy.recall.wordllama import WordLlamaEmbeddings

        vector = WordLlamaEmbeddings().embed_query("where is the backup bucket?")
        assert len(vector) == 256, len(vector)
        assert logging.getLogger().handlers == [], logging.getLogger().handlers
        assert logging.getLogger().level == logging.WARNING
        assert not os.path.exists(os.path.expanduser("~/.cache/wordllama"))
        print("ok")
        """
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if "proxy" not in key.lower() and not key.startswith("HF_")
    }
    env["HOME"] = str(tmp_path)
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert not (tmp_path / ".cache").exists()


def test_a_missing_wordllama_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # what an absent package looks like
    with pytest.raises(ImportError, match=r"pip install 'ctxpolicy\[embeddings\]'"):
        WordLlamaEmbeddings()


@pytest.mark.parametrize("dim", [0, 32, 512, 1024])
def test_only_the_bundled_dimensions_are_accepted(dim: int) -> None:
    with pytest.raises(ValueError, match="dim must be one of"):
        WordLlamaEmbeddings(dim=dim)
