"""`WordLlamaEmbeddings`: a langchain-core ``Embeddings`` that needs no download.

WordLlama (https://github.com/dleemiller/WordLlama) embeds a text as the mean of static
token vectors taken from an LLM's embedding table: no neural network runs at inference,
a text costs a tokenizer pass and a table lookup. Its wheel ships the default model
(``l2_supercat``, 256 dimensions, 16 MB of weights) and its tokenizer, so this class
works offline, on CPU, with nothing fetched at run time. Name it as the ``embeddings``
service of a recall layer to fuse a dense ranking with bm25 (docs/recall.md,
"Dense retrieval")::

    from ctxpolicy import PolicyEngine
    from ctxpolicy.integrations.wordllama import WordLlamaEmbeddings

    # policy: layers.recall__context.collector: {type: recall, embeddings: embed}
    engine = PolicyEngine.from_file(path, services={"embed": WordLlamaEmbeddings()})

Needs the ``embeddings`` extra (``pip install 'ctxpolicy[embeddings]'``).

Two things this module does on purpose, because of how wordllama 0.4 behaves:

- ``WordLlama.load()`` with its defaults looks for the bundled tokenizer in the wrong
  folder (``tokenizer/`` instead of ``tokenizers/``) and then downloads it from the
  Hugging Face Hub into ``~/.cache/wordllama``. The model is therefore loaded with the
  package's own folder as its cache and downloads disabled: it reads only the two files
  inside the wheel and fails with `FileNotFoundError` rather than touch the network.
- ``import wordllama`` calls ``logging.basicConfig(level=INFO)``: in an application that
  has not configured logging, every library's INFO records would start to print. The
  import here undoes that (removes the handler it added, restores the root level).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ctxpolicy.recall.lazy_model import LazyModel

#: The model bundled in the wordllama wheel.
CONFIG = "l2_supercat"
#: Dimension of the bundled weights; smaller dimensions are its leading components
#: (the model is trained Matryoshka-style, so a prefix is itself an embedding).
BUNDLED_DIM = 256
#: Dimensions available offline.
DIMS = (64, 128, 256)
#: Most characters embedded per batch. Texts are sorted by length and padded to the
#: longest of their batch, and a batch gathers a float32 row per token: this keeps a
#: batch's scratch memory near 25 MB (a single longer text is a batch of its own).
BATCH_CHARS = 50_000

MISSING = "WordLlamaEmbeddings needs the wordllama package: pip install 'ctxpolicy[embeddings]'"


def _import_wordllama() -> Any:
    """Import ``wordllama`` and undo the root-logger setup its import does."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return importlib.import_module("wordllama")
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


class WordLlamaEmbeddings(LazyModel, Embeddings):
    """Embeddings from the WordLlama model bundled in the ``wordllama`` wheel.

    The model (a 32,000 x 256 float32 table; about 70 MB of RSS with numpy and the
    tokenizer) is loaded on first use, once per instance, and never downloaded. Vectors
    are L2-normalized, so a dot product is the cosine. An instance can be shared by
    threads (the model is read-only once loaded) and pickled (the copy loads its own
    model on first use).

    Args:
        dim: Vector size, one of `DIMS` (64, 128 or 256). 256 is the bundled model;
            64 and 128 keep its leading components (smaller, faster, a little less
            accurate). 512 and 1024 exist upstream but are not in the wheel.
        batch_size: Most texts tokenized and pooled at once.

    Raises:
        ImportError: ``wordllama`` is not installed (the message names the extra).
        ValueError: ``dim`` or ``batch_size`` is not valid.
    """

    OPTIONS = ("dim", "batch_size")

    def __init__(self, *, dim: int = BUNDLED_DIM, batch_size: int = 64) -> None:
        if dim not in DIMS:
            raise ValueError(
                f"dim must be one of {DIMS} (the dimensions of the bundled model), got {dim}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if importlib.util.find_spec("wordllama") is None:
            raise ImportError(MISSING)
        self.dim = dim
        self.batch_size = batch_size
        self._start()

    def _load(self) -> Any:
        """The WordLlama model, loaded from the wheel's own files on first use."""
        return self._loaded(self._read_model)

    def _read_model(self) -> Any:
        package = _import_wordllama()
        folder = Path(package.__file__).parent
        try:
            return package.WordLlama.load(
                config=CONFIG,
                dim=BUNDLED_DIM,
                trunc_dim=None if self.dim == BUNDLED_DIM else self.dim,
                cache_dir=folder,  # the bundled weights/ and tokenizers/ folders
                disable_download=True,
            )
        except FileNotFoundError as exc:
            raise FileNotFoundError(
                f"the WordLlama model files are missing from {folder} "
                f"(wordllama {getattr(package, '__version__', '?')}); this class "
                f"never downloads them: {exc}"
            ) from exc

    def _batches(self, texts: list[str]) -> list[list[int]]:
        """Indexes of ``texts`` grouped by similar length, within the batch limits."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches: list[list[int]] = []
        current: list[int] = []
        chars = 0
        for i in order:
            size = len(texts[i])
            if current and (len(current) >= self.batch_size or chars + size > BATCH_CHARS):
                batches.append(current)
                current, chars = [], 0
            current.append(i)
            chars += size
        if current:
            batches.append(current)
        return batches

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts; one vector of `dim` floats per text, in the order given.

        Args:
            texts: The texts to embed.

        Returns:
            One unit-length vector per text (all zeros for a text with no token).
        """
        if not texts:
            return []
        model = self._load()
        out: list[list[float]] = [[] for _ in texts]
        for batch in self._batches(list(texts)):
            array = model.embed([texts[i] for i in batch], norm=False, batch_size=len(batch))
            norms = (array * array).sum(axis=1, keepdims=True) ** 0.5
            norms[norms == 0] = 1.0  # a text with no token: a zero vector, not NaN
            for i, vector in zip(batch, (array / norms).tolist(), strict=True):
                out[i] = vector
        return out

    def embed_query(self, text: str) -> list[float]:
        """Embed one query text (the same model as the documents).

        Args:
            text: The query.

        Returns:
            A unit-length vector of `dim` floats.
        """
        return self.embed_documents([text])[0]


__all__ = ["DIMS", "WordLlamaEmbeddings"]
