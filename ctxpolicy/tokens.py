"""Token counting: exact (offline tiktoken encodings) or approximate, cached by content.

The BPE rank files of ``cl100k_base`` and ``o200k_base`` ship inside the package
(``ctxpolicy/tokenizers/``). They are read from package data, checked against the
SHA-256 that tiktoken itself pins for them, parsed, and turned into a
``tiktoken.Encoding`` with tiktoken's own ``pat_str`` and special tokens. No network,
no process-wide environment variables, no files written: tiktoken's
``load_tiktoken_bpe`` would copy every file it reads into a cache folder
(``TIKTOKEN_CACHE_DIR`` or the temp folder) and can only be told not to through a
process-wide environment variable, so the (one line) file format is parsed here.

One `Tokenizer` per name per process (`get_tokenizer`, thread-safe). Counts are cached
by content: the next turn of a conversation only counts the new messages.

``import ctxpolicy`` and the validate path never import this module (it imports tiktoken).
"""

from __future__ import annotations

import binascii
import hashlib
import json
import threading
from collections.abc import Hashable, Iterable, Mapping
from importlib import resources
from itertools import islice, repeat
from operator import is_
from typing import TYPE_CHECKING, Any, Literal

import tiktoken

from ctxpolicy.errors import CtxPolicyError
from ctxpolicy.layers import TOKENIZER_NAMES, TokenizerName

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = [
    "MEDIA_BLOCK_TOKENS",
    "MESSAGE_OVERHEAD",
    "Tokenizer",
    "TokenizerIntegrityError",
    "TokenizerName",
    "format_cut_marker",
    "get_tokenizer",
    "text_cap",
]


MESSAGE_OVERHEAD = 3
"""Tokens a chat message costs on top of its content (role and separators).

OpenAI's published accounting for its chat models: 3 tokens per message, plus the
tokens of the ``name`` field when set (counted here as content). The 3 tokens that prime
the reply are per request, not per message, and are left to the output reserve.
"""


def text_cap(cap: int) -> int:
    """Tokens the text of a one-message layer may use within the layer's ``cap``.

    A message costs `MESSAGE_OVERHEAD` on top of its text (an unnamed message: what
    ``count_message`` counts for an empty one, with every tokenizer).
    """
    return max(0, cap - MESSAGE_OVERHEAD)


MEDIA_BLOCK_TOKENS = 765
"""Tokens charged for one non-text content block (image, audio, file).

Their real cost depends on the provider and the media's size; 765 is OpenAI's cost of a
1024x1024 image at high detail. Counting the base64 payload as text would overstate it
by two orders of magnitude.
"""

_MEDIA_BLOCK_TYPES = frozenset(
    {"image", "image_url", "input_image", "audio", "input_audio", "file", "video"}
)

# tiktoken_ext/openai_public.py (tiktoken 0.7 - 0.14): the same patterns, special tokens
# and pinned SHA-256 of the rank files. tests/tokens checks they still agree.
_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

_CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_ENCODING_SPECS: dict[str, tuple[str, str, dict[str, int]]] = {
    # name: (pinned sha256 of the rank file, pat_str, special tokens)
    "cl100k_base": (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT_STR,
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT_STR,
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

_DEFAULT_CACHE_SIZE = 32_768
"""Entries per cache (texts, messages). A cache keeps its keys' strings alive, so its
memory is about entries x average text size; the oldest entry is evicted first."""


class TokenizerIntegrityError(CtxPolicyError):
    """A bundled BPE rank file is missing, corrupted or does not match its pinned SHA-256."""


def format_cut_marker(cut_tokens: int) -> str:
    """The visible marker left where ``cut_tokens`` tokens were cut out of a text."""
    return f"[… {cut_tokens} tokens cut …]"


def read_bpe_file(name: str) -> bytes:
    """Read the bundled rank file of encoding ``name`` and check its pinned SHA-256.

    Raises:
        TokenizerIntegrityError: When the file is missing or its hash differs.
    """
    expected = _ENCODING_SPECS[name][0]
    resource = resources.files("ctxpolicy") / "tokenizers" / f"{name}.tiktoken"
    try:
        data = resource.read_bytes()
    except OSError as exc:
        raise TokenizerIntegrityError(
            f"bundled tokenizer file {name}.tiktoken cannot be read: {exc}"
        ) from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise TokenizerIntegrityError(
            f"bundled tokenizer file {name}.tiktoken has SHA-256 {actual}, "
            f"expected {expected} (the hash tiktoken pins); the installation is corrupted"
        )
    return data


def parse_bpe_ranks(data: bytes, *, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse a ``.tiktoken`` rank file: one ``base64(token) rank`` pair per line.

    Same format and result as ``tiktoken.load.load_tiktoken_bpe``, without its cache copy.

    Raises:
        TokenizerIntegrityError: When a line is malformed (naming ``source`` and the line).
    """
    parts = data.split()
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if data and len(parts) == 2 * n_lines:  # fast path: every line is exactly two fields
        tokens = map(binascii.a2b_base64, parts[0::2])
        try:
            return dict(zip(tokens, map(int, parts[1::2]), strict=True))
        except (ValueError, binascii.Error):
            pass  # fall through to the line-by-line parse, which names the bad line
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[binascii.a2b_base64(token)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise TokenizerIntegrityError(
                f"{source}:{lineno}: malformed rank line {line[:60]!r}"
            ) from exc
    return ranks


def _build_encoding(name: str) -> Any:
    _, pat_str, special_tokens = _ENCODING_SPECS[name]
    ranks = parse_bpe_ranks(read_bpe_file(name), source=f"{name}.tiktoken")
    return tiktoken.Encoding(
        name=name,
        pat_str=pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(special_tokens),
    )


def _approximate_count(text: str) -> int:
    """Deterministic estimate: ~4 characters per token, ~1 token per CJK character.

    ASCII text counts one token per 4 characters, rounded up. Beyond ASCII, every two
    extra UTF-8 bytes make one character count as a token of its own: a CJK character
    (3 bytes) is one token, a Latin-1 letter (2 bytes) half of one. Monotone in the text
    (a longer prefix or suffix never counts less), which truncation relies on.
    """
    n_chars = len(text)
    if text.isascii():
        return (n_chars + 3) // 4
    wide = (len(text.encode("utf-8")) - n_chars) // 2
    return (n_chars - wide + 3) // 4 + wide


class _BoundedCache:
    """A dict with a size bound (oldest entries evicted first). Reads are lock-free.

    A full cache evicts its oldest `_evict` entries at once (a sixteenth of it), not one
    per new entry: a dict that deletes its first entry again and again makes each
    ``next(iter(data))`` step over every entry deleted since it last resized, thousands
    once a long-running process has filled the cache. (An `OrderedDict` pops its oldest
    entry directly, but every insertion then runs its own bookkeeping, on every count.)
    """

    __slots__ = ("_data", "_evict", "_lock", "_maxsize")

    def __init__(self, maxsize: int) -> None:
        self._data: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self._maxsize = maxsize
        self._evict = max(1, maxsize // 16)

    def get(self, key: Hashable) -> int | None:
        return self._data.get(key)

    def put(self, key: Hashable, value: int) -> None:
        with self._lock:
            data = self._data
            if len(data) >= self._maxsize and key not in data:
                for oldest in list(islice(data, self._evict)):
                    del data[oldest]
            data[key] = value

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


#: History walks a tokenizer remembers: the conversations composed in turn by one process
#: (each holds the messages of its kept window).
MAX_WALKS = 8
#: Composition frames a tokenizer remembers: the other layers of the last call of as many
#: plans (`ctxpolicy.compose`; one per plan).
MAX_FRAMES = 8


class Tokenizer:
    """Counts, encodes and truncates text with one encoding; counts are cached by content.

    Get instances with `get_tokenizer` (one per name per process). Text is always
    encoded as ordinary text: ``<|endoftext|>`` in user content is counted as the
    characters it is, never as a control token.

    Attributes:
        name: The encoding name (``cl100k_base``, ``o200k_base`` or ``approximate``).
        exact: ``True`` for tiktoken encodings, ``False`` for the approximate estimate.
    """

    __slots__ = (
        "_encoding",
        "_frames",
        "_message_counts",
        "_text_counts",
        "_walks",
        "exact",
        "name",
    )

    def __init__(
        self, name: str, *, encoding: Any = None, cache_size: int = _DEFAULT_CACHE_SIZE
    ) -> None:
        """Wrap ``encoding`` (a ``tiktoken.Encoding``) or, when ``None``, the approximate estimate.

        Prefer `get_tokenizer`; build one directly only to get private (e.g. cold) caches.
        """
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        self.name = name
        self.exact = encoding is not None
        self._encoding = encoding
        self._text_counts = _BoundedCache(cache_size)
        self._message_counts = _BoundedCache(cache_size)
        self._walks: tuple[object, ...] = ()
        self._frames: tuple[object, ...] = ()

    def __repr__(self) -> str:
        return f"Tokenizer(name={self.name!r}, exact={self.exact})"

    def fresh(self) -> Tokenizer:
        """A tokenizer sharing this one's encoding, with empty caches."""
        return Tokenizer(self.name, encoding=self._encoding, cache_size=self._text_counts._maxsize)

    def clear_cache(self) -> None:
        """Forget every cached count (and every remembered history walk and frame)."""
        self._text_counts.clear()
        self._message_counts.clear()
        self._walks = ()
        self._frames = ()

    @property
    def walks(self) -> tuple[object, ...]:
        """The history walks counted with this tokenizer, newest first (at most `MAX_WALKS`).

        `ctxpolicy.history.HistoryWalk` objects: the composer looks up the one that a
        history grown at its end can reuse (`ctxpolicy.history.latest_walk`).
        """
        return self._walks

    def remember_walk(self, walk: object, *, replacing: object = None) -> None:
        """Keep ``walk`` as the newest of `walks` (the oldest beyond `MAX_WALKS` is dropped).

        Args:
            walk: The walk to remember.
            replacing: The walk ``walk`` continues (the previous turn of the same
                conversation), forgotten with it: one conversation holds one place, so an
                agent's long run of calls does not push the other conversations out.
        """
        walks = self._walks
        # the next turn of the newest conversation (``walk`` not held yet, by identity: a
        # `ctxpolicy.history.TurnWalk` is a tuple, whose equality compares messages)
        if walks and walks[0] is replacing and not any(map(is_, walks, repeat(walk))):
            self._walks = (walk, *walks[1:])  # one assignment: safe across threads
            return
        others = tuple(w for w in walks if w is not walk and w is not replacing)
        self._walks = (walk, *others[: MAX_WALKS - 1])  # one assignment: safe across threads

    @property
    def frames(self) -> tuple[object, ...]:
        """The composition frames counted with this tokenizer, newest first (at most
        `MAX_FRAMES`): what a call made of its layers but the history, which the next call
        with the same ones takes as it is (`ctxpolicy.compose.compose_call`)."""
        return self._frames

    def remember_frame(self, frame: object, *, replacing: object = None) -> None:
        """Keep ``frame`` as the newest of `frames` (the oldest beyond `MAX_FRAMES` is
        dropped), and forget ``replacing`` (the frame of the same plan it supersedes)."""
        others = tuple(f for f in self._frames if f is not frame and f is not replacing)
        self._frames = (frame, *others[: MAX_FRAMES - 1])  # one assignment: thread-safe

    # -- text ---------------------------------------------------------------------------

    def _count_uncached(self, text: str) -> int:
        if self._encoding is None:
            return _approximate_count(text)
        return len(self._encoding.encode_ordinary(text))

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (cached by content).

        Raises:
            TypeError: When ``text`` is not a ``str``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        n = self._text_counts.get(text)
        if n is not None:
            return n
        n = self._count_uncached(text)
        self._text_counts.put(text, n)
        return n

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (ordinary text; special-token strings are not special).

        Raises:
            TypeError: When ``text`` is not a ``str``, or this is the approximate tokenizer
                (it has no token ids; use `count` and `truncate`).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if self._encoding is None:
            raise TypeError(
                "the 'approximate' tokenizer has no token ids; use count() and truncate(), "
                "or an exact tokenizer (cl100k_base, o200k_base)"
            )
        ids: list[int] = self._encoding.encode_ordinary(text)
        return ids

    def truncate(self, text: str, max_tokens: int, *, keep: Literal["head", "tail"]) -> str:
        """Cut ``text`` to at most ``max_tokens`` tokens, marker included.

        The cut falls on a token boundary (never inside a character) and leaves a visible
        marker, e.g. ``[… 1234 tokens cut …]``, on its own line where the text was cut.

        Args:
            text: The text to cut.
            max_tokens: The token budget of the result, marker included.
            keep: ``"head"`` keeps the beginning (overflow ``truncate_tail``), ``"tail"``
                keeps the end (overflow ``truncate_head``).

        Returns:
            ``text`` unchanged when it fits; otherwise a prefix (``keep="head"``) or suffix
            (``keep="tail"``) of it with the marker; ``""`` when even the marker does not fit.

        Raises:
            ValueError: When ``max_tokens`` is negative or ``keep`` is unknown.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        if keep not in ("head", "tail"):
            raise ValueError(f"keep must be 'head' or 'tail', got {keep!r}")
        if self._encoding is None:
            return self._truncate_approximate(text, max_tokens, keep=keep)
        return self._truncate_exact(text, max_tokens, keep=keep)

    def _join(self, piece: str, cut: int, keep: str) -> str:
        marker = format_cut_marker(cut)
        if not piece:
            return marker
        return f"{piece}\n{marker}" if keep == "head" else f"{marker}\n{piece}"

    def _truncate_exact(self, text: str, max_tokens: int, *, keep: str) -> str:
        enc = self._encoding
        tokens: list[int] = enc.encode_ordinary(text)
        total = len(tokens)
        if total <= max_tokens:
            return text
        marker_cost = len(enc.encode_ordinary("\n" + format_cut_marker(total)))
        k = min(total - 1, max_tokens - marker_cost)
        while k > 0:
            part = tokens[:k] if keep == "head" else tokens[total - k :]
            try:
                piece = enc.decode_bytes(part).decode("utf-8")
            except UnicodeDecodeError:
                k -= 1  # the cut fell inside a multi-token character: move it out
                continue
            result = self._join(piece, total - k, keep)
            over = len(enc.encode_ordinary(result)) - max_tokens
            if over <= 0:
                return result
            k -= over
        result = format_cut_marker(total)
        return result if len(enc.encode_ordinary(result)) <= max_tokens else ""

    def _truncate_approximate(self, text: str, max_tokens: int, *, keep: str) -> str:
        total = _approximate_count(text)
        if total <= max_tokens:
            return text

        def build(n_chars: int) -> str:
            piece = text[:n_chars] if keep == "head" else text[len(text) - n_chars :]
            return self._join(piece, total - _approximate_count(piece), keep)

        lo, hi = 0, len(text) - 1  # largest n_chars whose result fits, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _approximate_count(build(mid)) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        result = build(lo)
        return result if _approximate_count(result) <= max_tokens else ""

    # -- messages -----------------------------------------------------------------------

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one chat message: content, tool calls, name and `MESSAGE_OVERHEAD`.

        Cached by what is counted (type, content, tool calls, name), never by identity:
        messages are mutable, and equal messages built apart share one cache entry.
        """
        try:
            content = message.content
            name = message.name
            # a field of AIMessage only; getattr() on other messages takes pydantic's slow path
            tool_calls = message.__dict__.get("tool_calls")
        except AttributeError:
            raise TypeError(
                f"message must be a langchain-core BaseMessage, got {type(message).__name__}"
            ) from None
        key: Hashable
        cached = self._message_counts._data  # lock-free read
        try:
            if tool_calls:
                key = (message.type, content, name, _tool_calls_key(tool_calls))
            else:
                key = (message.type, content, name)
            n = cached.get(key)
        except TypeError:  # list content (content blocks) is unhashable
            key = (message.type, _freeze(content), name, _tool_calls_key(tool_calls or ()))
            n = cached.get(key)
        if n is not None:
            return n
        if isinstance(content, str):  # not via count(): the message cache holds it already
            n = MESSAGE_OVERHEAD + self._count_uncached(content)
        else:
            n = MESSAGE_OVERHEAD + self._count_content(content)
        if name:
            n += self.count(name)
        for call in tool_calls or ():
            n += self.count(call["name"])
            n += self.count(_dump_args(call["args"]))
        self._message_counts.put(key, n)
        return n

    def count_messages(self, messages: Iterable[BaseMessage]) -> int:
        """Tokens of a list of messages: ``sum(count_message(m) for m in messages)``."""
        count_message = self.count_message
        return sum(count_message(m) for m in messages)

    def _count_content(self, content: str | list[str | dict[Any, Any]]) -> int:
        if isinstance(content, str):
            return self.count(content)
        n = 0
        for block in content:
            if isinstance(block, str):
                n += self.count(block)
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                n += self.count(block["text"])
            elif block.get("type") in _MEDIA_BLOCK_TYPES:
                n += MEDIA_BLOCK_TOKENS
            else:
                n += self.count(json.dumps(block, ensure_ascii=False, default=str))
        return n


def _dump_args(args: Mapping[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False, default=str)


_FLAT_TYPES = frozenset({str, int, bool, type(None)})


def _args_key(args: Mapping[str, Any]) -> Hashable:
    """A cache key equal exactly when ``_dump_args(args)`` is equal, cheaper for flat args."""
    # order-sensitive like the JSON text; the type tells 1 from True
    key: list[tuple[Any, type, Any]] = []
    for k, v in args.items():  # one plain loop: this runs on every cache hit
        kind = type(v)
        if kind not in _FLAT_TYPES:
            return _dump_args(args)
        key.append((k, kind, v))
    return tuple(key)


def _tool_calls_key(tool_calls: Iterable[Mapping[str, Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple([(c.get("id"), c["name"], _args_key(c["args"])) for c in tool_calls])


def _freeze(content: Any) -> str:
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


_TOKENIZERS: dict[str, Tokenizer] = {}
_TOKENIZERS_LOCK = threading.Lock()
_NAMES: tuple[str, ...] = TOKENIZER_NAMES


def get_tokenizer(name: TokenizerName) -> Tokenizer:
    """The process-wide `Tokenizer` of ``name``, built on first use (thread-safe).

    Exact encodings are built offline from the bundled rank files, SHA-256 checked.

    Raises:
        ValueError: When ``name`` is not a known tokenizer.
        TokenizerIntegrityError: When a bundled rank file is missing or corrupted.
    """
    tokenizer = _TOKENIZERS.get(name)
    if tokenizer is not None:
        return tokenizer
    if name not in _NAMES:
        raise ValueError(f"name must be one of {', '.join(_NAMES)}; got {name!r}")
    with _TOKENIZERS_LOCK:
        tokenizer = _TOKENIZERS.get(name)
        if tokenizer is None:
            encoding = None if name == "approximate" else _build_encoding(name)
            tokenizer = Tokenizer(name, encoding=encoding)
            _TOKENIZERS[name] = tokenizer
    return tokenizer
