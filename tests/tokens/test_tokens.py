"""Offline tiktoken encodings, cached counting, message counting and truncation."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import ctxpolicy.tokens as tokens_module
from ctxpolicy.errors import CtxPolicyError
from ctxpolicy.tokens import (
    MEDIA_BLOCK_TOKENS,
    MESSAGE_OVERHEAD,
    Tokenizer,
    TokenizerIntegrityError,
    format_cut_marker,
    get_tokenizer,
    parse_bpe_ranks,
    read_bpe_file,
)

TOKENIZER_DIR = Path(tokens_module.__file__).parent / "tokenizers"
EXACT = ("cl100k_base", "o200k_base")
MARKER_RE = re.compile(r"\[… (\d+) tokens cut …\]")

SAMPLES = [
    "",
    "hello world",
    "tiktoken is great!",
    "你好\uff0c世界。今天的天气很好\uff0c我们去公园散步吧。",
    "def f(x: int) -> int:\n    return x ** 2  # square\n\n\n",
    "  leading and trailing spaces   \n\t",
    "<|endoftext|> is plain text here, not a control token",
    "Ünïcödé — emoji 🚀🎉 and combining e\u0301",
    "1234567890 3.14159 -42 0xFF",
]


# -- the encodings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "ids"),
    [
        # tiktoken's own documented examples
        ("cl100k_base", "hello world", [15339, 1917]),
        ("cl100k_base", "tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
        ("o200k_base", "hello world", [24912, 2375]),
        ("o200k_base", "tiktoken is great!", [83, 8251, 2488, 382, 2212, 0]),
    ],
)
def test_known_token_ids(name, text, ids):
    tokenizer = get_tokenizer(name)
    assert tokenizer.exact
    assert tokenizer.encode(text) == ids
    assert tokenizer.count(text) == len(ids)


@pytest.fixture(scope="module")
def reference_encodings():
    """Encodings built the way tiktoken builds them (tiktoken_ext.openai_public), offline.

    ``openai_public`` would download the rank files; its loader is pointed at the bundled
    files instead, with tiktoken's file cache disabled for this fixture only.
    """
    import tiktoken
    from tiktoken import load
    from tiktoken_ext import openai_public

    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's own switch: do not copy into a cache

    def local_loader(url, expected_hash=None):
        return load.load_tiktoken_bpe(
            str(TOKENIZER_DIR / url.rsplit("/", 1)[1]), expected_hash=expected_hash
        )

    mp.setattr(openai_public, "load_tiktoken_bpe", local_loader)
    try:
        specs = {name: getattr(openai_public, name)() for name in EXACT}
    finally:
        mp.undo()
    return {name: (spec, tiktoken.Encoding(**spec)) for name, spec in specs.items()}


@pytest.mark.parametrize("name", EXACT)
def test_encoding_matches_tiktoken_reference(name, reference_encodings):
    spec, reference = reference_encodings[name]
    ours = get_tokenizer(name)._encoding
    assert ours.name == spec["name"]
    assert ours._pat_str == spec["pat_str"]
    assert ours._special_tokens == spec["special_tokens"]
    assert ours._mergeable_ranks == spec["mergeable_ranks"]
    for text in SAMPLES:
        assert get_tokenizer(name).encode(text) == reference.encode_ordinary(text)


@pytest.mark.parametrize("name", EXACT)
def test_pinned_hashes_match_tiktoken_and_sha256sums(name):
    from tiktoken_ext import openai_public

    source = Path(openai_public.__file__).read_text()
    pinned = tokens_module._ENCODING_SPECS[name][0]
    assert pinned in source
    sums = dict(
        reversed(line.split()) for line in (TOKENIZER_DIR / "SHA256SUMS").read_text().splitlines()
    )
    assert sums[f"{name}.tiktoken"] == pinned
    assert hashlib.sha256((TOKENIZER_DIR / f"{name}.tiktoken").read_bytes()).hexdigest() == pinned


def test_tampered_rank_file_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "tokenizers"
    folder.mkdir()
    data = bytearray((TOKENIZER_DIR / "cl100k_base.tiktoken").read_bytes())
    data[100] ^= 1
    (folder / "cl100k_base.tiktoken").write_bytes(bytes(data))
    import importlib.resources

    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    with pytest.raises(
        TokenizerIntegrityError, match=r"cl100k_base\.tiktoken has SHA-256 .* expected"
    ):
        read_bpe_file("cl100k_base")
    assert issubclass(TokenizerIntegrityError, CtxPolicyError)


def test_missing_rank_file_is_a_clear_error(tmp_path, monkeypatch):
    import importlib.resources

    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    with pytest.raises(TokenizerIntegrityError, match=r"o200k_base\.tiktoken cannot be read"):
        read_bpe_file("o200k_base")


def test_parse_bpe_ranks_matches_tiktoken_loader_and_names_bad_lines(tmp_path, monkeypatch):
    from tiktoken.load import load_tiktoken_bpe

    data = b"IQ== 0\nIg== 1\nIw== 2\n"
    path = tmp_path / "tiny.tiktoken"
    path.write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert parse_bpe_ranks(data) == load_tiktoken_bpe(str(path)) == {b"!": 0, b'"': 1, b"#": 2}
    with pytest.raises(TokenizerIntegrityError, match=r"tiny:2: malformed rank line"):
        parse_bpe_ranks(b"IQ== 0\nIg== one\n", source="tiny")
    with pytest.raises(TokenizerIntegrityError, match=r"tiny:2: malformed"):
        parse_bpe_ranks(b"IQ== 0\nIg== 1 extra\nIw== 2\n", source="tiny")


def test_loading_is_offline_and_leaves_environment_and_disk_alone(tmp_path):
    """In a fresh process: sockets raise, the environment and the temp folder stay as they were."""
    script = textwrap.dedent(
        """
        import os, socket, sys
        def refuse(*args, **kwargs):
            raise AssertionError("network access attempted")
        socket.socket = refuse
        socket.create_connection = refuse
        before = dict(os.environ)
        import ctxpolicy.tokens as t
        assert "langchain_core" not in sys.modules, "importing ctxpolicy.tokens imported langchain"
        for name in ("cl100k_base", "o200k_base"):
            assert t.get_tokenizer(name).count("hello world") == 2
        assert dict(os.environ) == before, "environment changed"
        print("ok")
        """
    )
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert list(tmp_path.iterdir()) == [], "files written into the temp folder"


def test_one_tokenizer_per_name_built_once_under_concurrency(monkeypatch):
    monkeypatch.setattr(tokens_module, "_TOKENIZERS", {})
    builds = []
    real_build = tokens_module._build_encoding

    def slow_build(name):
        builds.append(name)
        time.sleep(0.05)  # widen the race window
        return real_build(name)

    monkeypatch.setattr(tokens_module, "_build_encoding", slow_build)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(get_tokenizer("cl100k_base")))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builds == ["cl100k_base"]
    assert len({id(r) for r in results}) == 1
    assert get_tokenizer("cl100k_base") is results[0]


def test_unknown_tokenizer_name_is_a_clear_error():
    with pytest.raises(
        ValueError, match=r"name must be one of cl100k_base, o200k_base, approximate; got 'gpt2'"
    ):
        get_tokenizer("gpt2")  # type: ignore[arg-type]


# -- counting and caching ---------------------------------------------------------------


class CountingEncoding:
    """Stands in for a tiktoken.Encoding: one token per character, calls recorded."""

    def __init__(self):
        self.calls = []

    def encode_ordinary(self, text):
        self.calls.append(text)
        return [ord(c) for c in text]


def test_count_is_cached_by_content():
    encoding = CountingEncoding()
    tokenizer = Tokenizer("fake", encoding=encoding)
    text = "a" * 50
    assert tokenizer.count(text) == 50
    assert tokenizer.count("".join(["a"] * 50)) == 50  # equal content, different object
    assert encoding.calls == [text]


def test_count_cache_is_bounded():
    encoding = CountingEncoding()
    tokenizer = Tokenizer("fake", encoding=encoding, cache_size=2)
    for text in ("a", "b", "c"):
        tokenizer.count(text)
    assert len(tokenizer._text_counts) == 2
    tokenizer.count("a")  # evicted first: counted again
    assert encoding.calls == ["a", "b", "c", "a"]


def test_a_full_count_cache_evicts_oldest_first_entry_after_entry():
    """Once full, every new text evicts the oldest one left, however many evictions ran."""
    encoding = CountingEncoding()
    tokenizer = Tokenizer("fake", encoding=encoding, cache_size=3)
    texts = [f"t{i}" for i in range(10)]
    for text in texts:
        tokenizer.count(text)
    assert len(tokenizer._text_counts) == 3
    encoding.calls.clear()
    for text in texts[-3:]:  # the 3 newest are cached
        tokenizer.count(text)
    assert encoding.calls == []
    tokenizer.count("t0")  # evicts t7, the oldest of the 3
    tokenizer.count("t7")
    assert encoding.calls == ["t0", "t7"]


def test_a_full_count_cache_evicts_its_oldest_sixteenth_at_once():
    """A full cache drops its oldest sixteenth in one go (not one entry per new text: a
    dict deleting its first entry again and again slows every later eviction)."""
    encoding = CountingEncoding()
    tokenizer = Tokenizer("fake", encoding=encoding, cache_size=32)
    texts = [f"t{i}" for i in range(33)]
    for text in texts:
        tokenizer.count(text)
    assert len(tokenizer._text_counts) == 31  # 32, then t0 and t1 out, t32 in
    encoding.calls.clear()
    for text in texts[2:]:
        tokenizer.count(text)
    assert encoding.calls == []
    tokenizer.count("t1")
    assert encoding.calls == ["t1"]


def test_count_rejects_non_text():
    with pytest.raises(TypeError, match="text must be a str, got int"):
        get_tokenizer("cl100k_base").count(3)  # type: ignore[arg-type]


def test_count_message_adds_overhead_name_and_tool_calls():
    tok = get_tokenizer("cl100k_base")
    plain = HumanMessage("hello world")
    assert tok.count_message(plain) == MESSAGE_OVERHEAD + 2
    named = HumanMessage("hello world", name="alice")
    assert tok.count_message(named) == MESSAGE_OVERHEAD + 2 + tok.count("alice")
    args = {"city": "Paris", "days": 3}
    call = AIMessage("", tool_calls=[{"name": "get_weather", "args": args, "id": "c1"}])
    expected = (
        MESSAGE_OVERHEAD
        + tok.count("get_weather")
        + tok.count(json.dumps(args, ensure_ascii=False))
    )
    assert tok.count_message(call) == expected
    answer = ToolMessage("sunny", tool_call_id="c1")
    assert tok.count_message(answer) == MESSAGE_OVERHEAD + tok.count("sunny")
    messages = [plain, named, call, answer]
    assert tok.count_messages(messages) == sum(tok.count_message(m) for m in messages)
    assert tok.count_messages(iter(messages)) == tok.count_messages(messages)


def test_count_message_rejects_non_messages():
    with pytest.raises(TypeError, match="message must be a langchain-core BaseMessage, got dict"):
        get_tokenizer("cl100k_base").count_message({"role": "user", "content": "hi"})


def test_count_message_content_blocks():
    tok = get_tokenizer("cl100k_base")
    message = HumanMessage(
        [
            {"type": "text", "text": "hello world"},
            "tiktoken is great!",
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}},
            {"type": "tool_use", "id": "x", "name": "f", "input": {}},
        ]
    )
    other = json.dumps({"type": "tool_use", "id": "x", "name": "f", "input": {}})
    assert tok.count_message(message) == (
        MESSAGE_OVERHEAD + 2 + 6 + MEDIA_BLOCK_TOKENS + tok.count(other)
    )


def test_count_message_cache_follows_content_not_identity():
    encoding = CountingEncoding()
    tok = Tokenizer("fake", encoding=encoding)
    first = HumanMessage("abc")
    twin = HumanMessage("abc")
    assert tok.count_message(first) == MESSAGE_OVERHEAD + 3
    calls = len(encoding.calls)
    assert tok.count_message(twin) == MESSAGE_OVERHEAD + 3
    assert len(encoding.calls) == calls  # equal message: served from the cache
    first.content = "abcdef"  # messages are mutable: the count must follow
    assert tok.count_message(first) == MESSAGE_OVERHEAD + 6
    # same content, different type or name: separate entries
    assert tok.count_message(AIMessage("abc", name="bo")) == MESSAGE_OVERHEAD + 3 + 2

    call = AIMessage("", tool_calls=[{"name": "f", "args": {"q": "x"}, "id": "1"}])
    before = tok.count_message(call)
    call.tool_calls[0]["args"]["q"] = "x" * 20  # mutated in place
    assert tok.count_message(call) == before + 19


def test_count_message_list_content_is_cached_and_mutation_safe():
    tok = Tokenizer("fake", encoding=CountingEncoding())
    message = HumanMessage([{"type": "text", "text": "abc"}])
    assert tok.count_message(message) == MESSAGE_OVERHEAD + 3
    message.content[0]["text"] = "abcd"  # type: ignore[index]
    assert tok.count_message(message) == MESSAGE_OVERHEAD + 4


def test_fresh_tokenizer_shares_encoding_with_empty_caches():
    tok = get_tokenizer("cl100k_base")
    tok.count("warm")
    fresh = tok.fresh()
    assert fresh._encoding is tok._encoding
    assert len(fresh._text_counts) == 0
    assert fresh.count("warm") == tok.count("warm")


# -- approximate ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("hello world", 3), ("你好", 2), ("你好 world", 2 + 2)],
)
def test_approximate_counts(text, expected):
    tok = get_tokenizer("approximate")
    assert not tok.exact
    assert tok.count(text) == expected


@given(st.text(max_size=200), st.text(max_size=50))
@settings(deadline=None)
def test_approximate_count_is_monotone(text, more):
    tok = get_tokenizer("approximate")
    assert tok.count(text + more) >= tok.count(text)
    assert tok.count(more + text) >= tok.count(text)


def test_approximate_has_no_token_ids():
    with pytest.raises(TypeError, match="'approximate' tokenizer has no token ids"):
        get_tokenizer("approximate").encode("hello")


# -- truncation -------------------------------------------------------------------------


def check_truncation(tok, text, max_tokens, keep):
    result = tok.truncate(text, max_tokens, keep=keep)
    assert tok.count(result) <= max_tokens
    total = tok.count(text)
    if total <= max_tokens:
        assert result == text
        return result
    found = MARKER_RE.findall(result)
    if result:
        assert found, result
        cut = int(found[-1] if keep == "head" else found[0])
        assert 0 < cut <= total
        marker = format_cut_marker(cut)
        if keep == "head":
            piece = result.removesuffix(marker).removesuffix("\n")
            assert text.startswith(piece)
        else:
            piece = result.removeprefix(marker).removeprefix("\n")
            assert text.endswith(piece)
    return result


@pytest.mark.parametrize("name", [*EXACT, "approximate"])
@given(
    text=st.text(max_size=400)
    | st.text(alphabet="ab 你好\n🚀é", max_size=400)
    | st.sampled_from(SAMPLES),
    max_tokens=st.integers(min_value=0, max_value=120),
    keep=st.sampled_from(["head", "tail"]),
)
@settings(max_examples=150, deadline=None)
def test_truncate_never_exceeds_budget(name, text, max_tokens, keep):
    check_truncation(get_tokenizer(name), text, max_tokens, keep)


@pytest.mark.parametrize("name", [*EXACT, "approximate"])
def test_truncate_keeps_head_or_tail_with_a_marker_saying_how_much(name):
    tok = get_tokenizer(name)
    text = " ".join(f"word{i}" for i in range(400))
    total = tok.count(text)
    head = check_truncation(tok, text, 50, "head")
    assert head.startswith("word0 word1")
    assert head.endswith(" tokens cut …]")
    tail = check_truncation(tok, text, 50, "tail")
    assert tail.startswith("[… ")
    assert tail.endswith("word399")
    if tok.exact:  # the marker counts the original tokens that were cut
        piece = tail.split("\n", 1)[1]
        assert int(MARKER_RE.findall(tail)[0]) == total - tok.count(piece)
    assert tok.count(head) >= 40  # close to the budget, not far under it


def test_truncate_exact_respects_multitoken_characters():
    tok = get_tokenizer("cl100k_base")
    text = "🚀" * 200  # each rocket spans several tokens
    for budget in range(10, 30):
        for keep in ("head", "tail"):
            result = check_truncation(tok, text, budget, keep)
            assert "\ufffd" not in result


def test_truncate_returns_empty_when_the_marker_does_not_fit():
    tok = get_tokenizer("cl100k_base")
    text = "word " * 1000
    assert tok.truncate(text, 3, keep="head") == ""
    assert tok.truncate(text, 0, keep="tail") == ""
    assert tok.truncate("", 0, keep="head") == ""
    assert tok.truncate("hello world", 2, keep="head") == "hello world"


def test_truncate_argument_errors():
    tok = get_tokenizer("cl100k_base")
    with pytest.raises(ValueError, match="max_tokens must be >= 0, got -1"):
        tok.truncate("x", -1, keep="head")
    with pytest.raises(ValueError, match="keep must be 'head' or 'tail', got 'middle'"):
        tok.truncate("x", 5, keep="middle")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be a str"):
        tok.truncate(None, 5, keep="head")  # type: ignore[arg-type]


def test_tool_call_cache_key_tells_apart_what_json_tells_apart():
    from ctxpolicy.tokens import _args_key

    assert _args_key({"a": 1}) != _args_key({"a": True})
    assert _args_key({"a": 1, "b": 2}) != _args_key({"b": 2, "a": 1})  # order shows in JSON
    assert _args_key({"a": "x"}) == _args_key({"a": "x"})
    assert _args_key({"a": [1, 2]}) == '{"a": [1, 2]}'  # nested: the JSON text itself
    assert _args_key({"a": 1.0}) == '{"a": 1.0}'
    tok = Tokenizer("fake", encoding=CountingEncoding())
    flat = AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "1"}])
    boolean = AIMessage("", tool_calls=[{"name": "f", "args": {"a": True}, "id": "1"}])
    assert tok.count_message(flat) != tok.count_message(boolean)  # '{"a": 1}' vs '{"a": true}'
