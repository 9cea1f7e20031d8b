"""The ``retriever`` collector: documents from a LangChain retriever, packed whole.

The service may be any `BaseRetriever` or any runnable whose ``invoke``/``ainvoke``
returns Documents (objects with ``page_content``; plain strings are accepted too).
At most ``top_k`` documents are used, in the retriever's order, and only *whole*
documents are packed into the layer's cap; the engine cuts text only when not even the
first document fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.template import template_source, template_variables
from ctxpolicy.templates import render_template

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest


def _service(request: CollectRequest) -> Any:
    name: str = getattr(request.spec, "service", "")
    try:
        return request.services[name]
    except KeyError:
        known = ", ".join(sorted(request.services)) or "none"
        raise LookupError(
            f"{request.layer}: service {name!r} is not provided (services given: {known})"
        ) from None


def _text(document: Any, *, layer: str) -> str:
    if isinstance(document, str):
        return document
    content = getattr(document, "page_content", None)
    if isinstance(content, str):
        return content
    raise TypeError(
        f"{layer}: the retriever returned {type(document).__name__}, expected Documents"
    )


def _pack_greedily(
    texts: Sequence[str], count: Callable[[str], int], sep_cost: int, cap: int
) -> list[int]:
    """Indexes of the texts that fit ``cap`` together, in order, skipping any too large.

    A non-empty text counts at least one token (true of every tokenizer), so once the
    room left is smaller than a separator plus one token, no non-empty text can fit:
    the rest are skipped without being counted (only empty texts may still be packed).
    """
    packed: list[int] = []
    used = 0
    for index, text in enumerate(texts):
        sep = sep_cost if packed else 0
        if text and cap - used < sep + 1:
            continue  # provably too large: not counted
        cost = count(text) + sep
        if used + cost > cap:
            continue
        packed.append(index)
        used += cost
    return packed


def _back_off(
    packed: list[int],
    texts: Sequence[str],
    count: Callable[[str], int],
    separator: str,
    cap: int,
) -> None:
    """Drop the last packed texts (keeping one) until their join fits ``cap``.

    Token counts are not exactly additive across joins, so the whole is verified.
    """
    while len(packed) > 1 and count(separator.join(texts[i] for i in packed)) > cap:
        packed.pop()


def pack_documents(
    documents: Sequence[Any], *, request: CollectRequest
) -> tuple[list[Any], list[str]]:
    """The first ``top_k`` documents, keeping only whole ones that fit the cap together.

    Returns:
        The packed documents and their texts. When not even the first document fits,
        it is returned alone (the engine then applies the layer's overflow rule).
    """
    top_k: int = getattr(request.spec, "top_k", 5)
    separator: str = getattr(request.spec, "separator", "\n\n")
    candidates = list(documents)[:top_k]
    texts = [_text(doc, layer=request.layer) for doc in candidates]
    count = request.count_tokens
    sep_cost = count(separator) if separator else 0
    packed = _pack_greedily(texts, count, sep_cost, request.cap_tokens)
    _back_off(packed, texts, count, separator, request.cap_tokens)
    if not packed and texts:
        packed = [0]
    return [candidates[i] for i in packed], [texts[i] for i in packed]


def _render(documents: Sequence[Any], request: CollectRequest) -> str | None:
    kept, texts = pack_documents(documents, request=request)
    if not kept:
        return None
    source = template_source(request)
    if source is None:
        separator: str = getattr(request.spec, "separator", "\n\n")
        return separator.join(texts)
    return render_template(source, template_variables(request, documents=kept))


class RetrieverCollector:
    """Callable collector object: sync ``invoke`` by default, ``ainvoke`` when awaited."""

    def __call__(self, request: CollectRequest, /) -> str | None:
        """Retrieve with ``service.invoke(query)`` and pack whole documents."""
        if not request.query:
            return None
        documents = _service(request).invoke(request.query)
        return _render(documents, request)

    async def acollect(self, request: CollectRequest, /) -> str | None:
        """Retrieve with ``service.ainvoke(query)`` (or ``invoke``) and pack."""
        if not request.query:
            return None
        service = _service(request)
        if hasattr(service, "ainvoke"):
            documents = await service.ainvoke(request.query)
        else:
            documents = service.invoke(request.query)
        return _render(documents, request)


#: The registered ``retriever`` collector.
collect_retriever = RetrieverCollector()

__all__ = ["RetrieverCollector", "collect_retriever", "pack_documents"]
