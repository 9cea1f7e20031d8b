"""`WordLlamaEmbeddings`, kept importable from here; it lives in `ctxpolicy.recall.wordllama`
beside the other builtin model (`ctxpolicy.recall.minilm`)."""

from ctxpolicy.recall.wordllama import WordLlamaEmbeddings

__all__ = ["WordLlamaEmbeddings"]
