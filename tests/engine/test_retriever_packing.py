"""Retriever packing stops counting candidates once the cap is provably full (issue 16)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.collectors.retriever import pack_documents
from ctxpolicy.policy import RetrieverCollectorSpec
from ctxpolicy.tokens import get_tokenizer
from tests.engine.conftest import make_policy

POLICY = make_policy()
TOK = get_tokenizer("cl100k_base")


def _request(
    count: Callable[[str], int], cap: int, *, top_k: int = 1000, separator: str = "\n\n"
) -> CollectRequest:
    return CollectRequest(
        layer="knowledge__context",
        spec=RetrieverCollectorSpec(
            type="retriever", service="kb", top_k=top_k, separator=separator
        ),
        policy=POLICY,
        process="react",
        state={},
        query="q",
        services={},
        cap_tokens=cap,
        count_tokens=count,
    )


def _old_greedy(
    texts: list[str], count: Callable[[str], int], sep_cost: int, cap: int
) -> list[int]:
    packed: list[int] = []
    used = 0
    for index, text in enumerate(texts):
        cost = count(text) + (sep_cost if packed else 0)
        if used + cost > cap:
            continue
        packed.append(index)
        used += cost
    return packed


def _texts(candidates: list[Any]) -> list[str]:
    return [d if isinstance(d, str) else d.page_content for d in candidates]


def _old_pack(documents: Sequence[Any], request: CollectRequest) -> tuple[list[Any], list[str]]:
    """`pack_documents` as it was before the early stop: every candidate counted."""
    spec = request.spec
    assert isinstance(spec, RetrieverCollectorSpec)
    candidates = list(documents)[: spec.top_k]
    texts = _texts(candidates)
    count, cap, separator = request.count_tokens, request.cap_tokens, spec.separator
    packed = _old_greedy(texts, count, count(separator) if separator else 0, cap)
    while len(packed) > 1 and count(separator.join(texts[i] for i in packed)) > cap:
        packed.pop()
    if not packed and texts:
        packed = [0]
    return [candidates[i] for i in packed], [texts[i] for i in packed]


class _CountingTokenizer:
    """``count`` of cl100k_base that records every text it is asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return TOK.count(text)


def _exact_fill() -> tuple[list[Document], int]:
    """1,000 candidates and a cap the first 10 documents and 9 separators fill exactly."""
    docs = [Document(page_content=f"document {i}:" + " lorem ipsum" * (i % 7)) for i in range(1000)]
    texts = _texts(docs)
    cap = sum(TOK.count(t) for t in texts[:10]) + 9 * TOK.count("\n\n")
    assert TOK.count("\n\n".join(texts[:10])) <= cap  # the join fits: no back-off
    return docs, cap


def test_top_k_1000_stops_counting_candidates_once_the_cap_is_full() -> None:
    docs, cap = _exact_fill()
    texts = _texts(docs)
    counting = _CountingTokenizer()
    kept, packed = pack_documents(docs, request=_request(counting.count, cap))
    assert packed == texts[:10]
    candidates = set(texts)
    assert [t for t in counting.texts if t in candidates] == texts[:10]  # 990 never counted
    assert len(counting.texts) == 12  # + the separator, + the verified join
    assert (kept, packed) == _old_pack(docs, _request(TOK.count, cap))


def test_empty_documents_still_fit_once_the_cap_is_full() -> None:
    docs = ["alpha beta", "gamma", "", "delta", ""]
    cap = TOK.count("alpha beta") + TOK.count("\n\n")  # full after one, room for one separator
    counting = _CountingTokenizer()
    kept, texts = pack_documents(docs, request=_request(counting.count, cap))
    assert texts == ["alpha beta", ""]
    assert "gamma" not in counting.texts and "delta" not in counting.texts
    assert (kept, texts) == _old_pack(docs, _request(TOK.count, cap))


_TEXT = st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "é", "中", "😀", "1", "."]))


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(_TEXT, max_size=30),
    cap=st.integers(0, 60),
    top_k=st.integers(1, 40),
    separator=st.sampled_from(["\n\n", "", " ", "\n---\n"]),
    tokenizer=st.sampled_from(["cl100k_base", "o200k_base", "approximate"]),
    as_documents=st.booleans(),
)
def test_packing_is_identical_to_counting_every_candidate(
    texts: list[str], cap: int, top_k: int, separator: str, tokenizer: str, as_documents: bool
) -> None:
    tok = get_tokenizer(tokenizer)  # type: ignore[arg-type]
    docs: list[Any] = [Document(page_content=t) for t in texts] if as_documents else texts
    request = _request(tok.count, cap, top_k=top_k, separator=separator)
    assert pack_documents(docs, request=request) == _old_pack(docs, request)
