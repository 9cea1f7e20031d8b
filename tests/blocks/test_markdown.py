from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.blocks import (
    Block,
    BlockSource,
    find_block,
    flatten_blocks,
    get_block_by_id,
    parse_markdown_blocks,
)
from ctxpolicy.blocks.markdown import markdown_preamble_end, split_lines

from .conftest import SEED_PROFILE


def test_seed_worked_example_exactly():
    blocks = parse_markdown_blocks(SEED_PROFILE, "profile.md")
    edu = Block(
        id="基本信息/教育背景",
        heading="教育背景",
        level=2,
        content="本科: 软件工程\n研究生: 计算机科学",
        children=(),
        source=BlockSource("profile.md", 4, 6, 6),
    )
    work = Block(
        id="基本信息/工作经验",
        heading="工作经验",
        level=2,
        content="3年后端开发",
        children=(),
        source=BlockSource("profile.md", 8, 9, 9),
    )
    basic = Block(
        id="基本信息",
        heading="基本信息",
        level=1,
        content="25岁，计算机专业研究生",
        children=(edu, work),
        source=BlockSource("profile.md", 1, 2, 9),
    )
    goals = Block(
        id="学习目标",
        heading="学习目标",
        level=1,
        content="深入理解分布式系统原理",
        children=(),
        source=BlockSource("profile.md", 11, 12, 12),
    )
    assert blocks == [basic, goals]
    # the seed's "(L1-L2)", "(L4-L6)", "(L8-L9)", "(L11-L12)"
    spans = {b.id: (b.source.start_line, b.source.end_line) for b in flatten_blocks(blocks)}
    assert spans == {
        "基本信息": (1, 2),
        "基本信息/教育背景": (4, 6),
        "基本信息/工作经验": (8, 9),
        "学习目标": (11, 12),
    }


def test_seed_ids_and_helpers():
    blocks = parse_markdown_blocks(SEED_PROFILE, "profile.md")
    assert [b.id for b in flatten_blocks(blocks)] == [
        "基本信息",
        "基本信息/教育背景",
        "基本信息/工作经验",
        "学习目标",
    ]
    found = get_block_by_id(blocks, "基本信息/工作经验")
    assert found is not None and found.content == "3年后端开发"
    assert get_block_by_id(blocks, "工作经验") is None
    # forgiving lookup only when unambiguous
    assert find_block(blocks, "工作经验") is found
    assert find_block(blocks, "nope") is None


def test_blocks_are_frozen():
    block = parse_markdown_blocks("# A\n", "a.md")[0]
    with pytest.raises(AttributeError):
        block.id = "B"  # type: ignore[misc]


def test_headings_inside_fenced_code_are_not_headings():
    text = "\n".join(
        [
            "# Real",  # 1
            "```python",  # 2
            "# not a heading",  # 3
            "```",  # 4
            "~~~",  # 5
            "## also not",  # 6
            "~~~",  # 7
            "````md",  # 8
            "```",  # 9  a shorter run does not close a longer fence
            "# still code",  # 10
            "````",  # 11
            "## Child",  # 12
            "text",  # 13
        ]
    )
    blocks = parse_markdown_blocks(text, "f.md")
    assert [b.id for b in flatten_blocks(blocks)] == ["Real", "Real/Child"]
    assert blocks[0].source.end_line == 11
    assert "# not a heading" in blocks[0].content
    assert blocks[0].children[0].source.start_line == 12


def test_tilde_fence_not_closed_by_backticks_and_unclosed_fence_runs_to_end():
    text = "# A\n~~~\n```\n# in code\n# still\n"
    blocks = parse_markdown_blocks(text, "f.md")
    assert [b.id for b in blocks] == ["A"]
    assert blocks[0].source.end_line == 5


def test_backtick_info_string_with_backtick_is_not_a_fence():
    text = "# A\n``` a`b\n# B\n"
    assert [b.id for b in parse_markdown_blocks(text, "f.md")] == ["A", "B"]


def test_indented_four_spaces_is_not_a_heading_and_closing_hashes_are_dropped():
    text = "    # code\n# Title ##\n#NoSpace\n####### seven\n## Sub #tag\n"
    blocks = parse_markdown_blocks(text, "f.md")
    flat = flatten_blocks(blocks)
    assert [b.heading for b in flat] == ["Title", "Sub #tag"]
    assert "#NoSpace" in blocks[0].content and "####### seven" in blocks[0].content


def test_duplicate_sibling_headings_get_distinct_stable_ids():
    text = "# Notes\na\n# Notes\nb\n# Notes\nc\n## Notes\nd\n"
    blocks = parse_markdown_blocks(text, "f.md")
    ids = [b.id for b in flatten_blocks(blocks)]
    assert ids == ["Notes", "Notes~2", "Notes~3", "Notes~3/Notes"]
    assert parse_markdown_blocks(text, "f.md") == blocks  # stable
    assert get_block_by_id(blocks, "Notes~2").content == "b"  # type: ignore[union-attr]


def test_literal_tilde_heading_does_not_collide_with_a_duplicate():
    text = "# Notes\n# Notes\n# Notes~2\n"
    ids = [b.id for b in parse_markdown_blocks(text, "f.md")]
    assert len(set(ids)) == 3


def test_slash_in_heading_is_escaped_in_the_id():
    blocks = parse_markdown_blocks("# A/B\n## C\n", "f.md")
    assert blocks[0].heading == "A/B"
    assert blocks[0].children[0].id == "A%2FB/C"


def test_cjk_headings_and_skipped_levels():
    text = "# 第一章 概述\n内容\n### 小节：细节\n更多\n## 第二节\n结束\n"
    blocks = parse_markdown_blocks(text, "书.md")
    assert [b.id for b in flatten_blocks(blocks)] == [
        "第一章 概述",
        "第一章 概述/小节：细节",
        "第一章 概述/第二节",
    ]
    assert blocks[0].children[0].level == 3
    assert blocks[0].source.file == "书.md"


def test_preamble_belongs_to_no_block_and_crlf_lines():
    text = "intro\r\n\r\n# A\r\nbody\r\n"
    blocks = parse_markdown_blocks(text, "f.md")
    assert blocks[0].source.start_line == 3
    assert blocks[0].content == "body"
    assert markdown_preamble_end(text) == 2


def test_heading_without_content_spans_one_line():
    blocks = parse_markdown_blocks("# A\n\n\n## B\n", "f.md")
    assert blocks[0].source.end_line == 1
    assert blocks[0].content == ""
    assert blocks[0].source.tree_end_line == 4


def test_no_headings_no_blocks():
    assert parse_markdown_blocks("just text\n", "f.md") == []
    assert parse_markdown_blocks("", "f.md") == []


# ---------------------------------------------------------------- property tests

_line = st.one_of(
    st.builds(
        lambda n, t: "#" * n + " " + t,
        st.integers(1, 6),
        st.sampled_from(["A", "B", "Notes", "目标", "x/y", "A~2", ""]),
    ),
    st.sampled_from(["", "text", "  ", "```", "~~~", "````", "    # indented", "#tag", "- item"]),
    st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=40))
def test_every_line_in_exactly_one_span_or_the_preamble(lines):
    text = "\n".join(lines)
    blocks = parse_markdown_blocks(text, "f.md")
    flat = flatten_blocks(blocks)
    n_lines = len(split_lines(text))
    preamble_end = markdown_preamble_end(text)

    # ids are unique
    assert len({b.id for b in flat}) == len(flat)

    owners: dict[int, int] = {}
    for block in flat:
        src = block.source
        assert 1 <= src.start_line <= src.end_line <= src.tree_end_line <= n_lines
        for line in range(src.start_line, src.end_line + 1):
            owners[line] = owners.get(line, 0) + 1
    all_lines = split_lines(text)
    for number in range(1, n_lines + 1):
        count = owners.get(number, 0)
        assert count <= 1, f"line {number} in {count} spans"
        if number > preamble_end and all_lines[number - 1].strip():
            assert count == 1, f"non-blank line {number} in no block"
        if number <= preamble_end:
            assert count == 0

    def check_nesting(siblings, lo, hi):
        previous_end = lo - 1
        for block in siblings:
            src = block.source
            assert src.start_line > previous_end
            assert lo <= src.start_line and src.tree_end_line <= hi
            for child in block.children:
                assert child.level > block.level
                assert child.id.startswith(block.id + "/")
            check_nesting(block.children, src.end_line + 1, src.tree_end_line)
            previous_end = src.tree_end_line

    check_nesting(blocks, preamble_end + 1, n_lines)


@settings(max_examples=100, deadline=None)
@given(st.lists(_line, max_size=30))
def test_content_is_the_span_minus_heading(lines):
    text = "\n".join(lines)
    all_lines = split_lines(text)
    for block in flatten_blocks(parse_markdown_blocks(text, "f.md")):
        body = all_lines[block.source.start_line : block.source.end_line]
        while body and not body[0].strip():
            body.pop(0)
        assert block.content == "\n".join(body)
        assert not body or body[-1].strip()  # the span ends on a non-blank line


@settings(max_examples=100, deadline=None)
@given(st.lists(_line, max_size=30))
def test_every_block_id_resolves_to_its_own_span(lines):
    from ctxpolicy.blocks.references import BlockReference, slice_reference

    text = "\n".join(lines)
    all_lines = split_lines(text)
    for block in flatten_blocks(parse_markdown_blocks(text, "f.md")):
        assert get_block_by_id(parse_markdown_blocks(text, "f.md"), block.id) == block
        got = slice_reference(BlockReference("f.md", block.id), text)
        src = block.source
        assert (got.start_line, got.end_line) == (src.start_line, src.tree_end_line)
        assert got.text.split("\n")[0] == all_lines[block.source.start_line - 1]
