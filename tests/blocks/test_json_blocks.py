from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.blocks import BlocksError, flatten_blocks, get_block_by_id, parse_json_blocks

CONFIG = """{
  "systemPrompt": [
    { "type": "global", "file": "system-prompt.md" }
  ],
  "profileBlocks": ["学习目标", "已有基础"],
  "chatHistory": {
    "source": "messages.json",
    "strategy": "full"
  },
  "query": "这段是什么意思 [guidance.md:12:30]"
}
"""


def test_json_chunks_by_key_path_with_lines():
    blocks = parse_json_blocks(CONFIG, "context-config.json")
    assert [b.id for b in flatten_blocks(blocks)] == [
        "systemPrompt",
        "profileBlocks",
        "chatHistory",
        "chatHistory/source",
        "chatHistory/strategy",
        "query",
    ]
    chat = get_block_by_id(blocks, "chatHistory")
    assert chat is not None
    assert (chat.source.start_line, chat.source.end_line, chat.source.tree_end_line) == (6, 6, 9)
    assert chat.content == ""
    strategy = get_block_by_id(blocks, "chatHistory/strategy")
    assert strategy is not None and strategy.level == 2
    assert json.loads(strategy.content) == "full"
    system = get_block_by_id(blocks, "systemPrompt")
    assert system is not None and (system.source.start_line, system.source.end_line) == (2, 4)
    assert json.loads(system.content) == [{"type": "global", "file": "system-prompt.md"}]


def test_json_duplicate_keys_and_non_object_top_level():
    blocks = parse_json_blocks('{"a": 1, "a": {"b": 2}}', "x.json")
    assert [b.id for b in flatten_blocks(blocks)] == ["a", "a~2", "a~2/b"]
    assert parse_json_blocks("[1, 2]", "x.json") == []


@pytest.mark.parametrize(
    "bad", ['{"a": }', '{"a" 1}', '{"a": 1,}', "{", '{"a": 1} x', "[[[" * 5000]
)
def test_invalid_json_is_a_clear_error_with_location(bad):
    with pytest.raises(BlocksError, match=r"x\.json:\d+:\d+: invalid JSON"):
        parse_json_blocks(bad, "x.json")


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _json, max_size=5), st.sampled_from([None, 2]))
def test_json_blocks_match_the_decoded_document(doc, indent):
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    blocks = parse_json_blocks(text, "x.json")
    flat = flatten_blocks(blocks)
    assert len({b.id for b in flat}) == len(flat)

    def check(obj, siblings):
        assert [b.heading for b in siblings] == list(obj)
        for block, (key, value) in zip(siblings, obj.items(), strict=True):
            assert block.heading == key
            if isinstance(value, dict) and value:
                check(value, block.children)
            else:
                assert block.children == ()
                assert json.loads(block.content) == value
            assert block.source.start_line <= block.source.end_line <= block.source.tree_end_line

    check(doc, blocks)
