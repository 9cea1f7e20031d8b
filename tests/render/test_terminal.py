"""Terminal bars: colour only on a terminal without NO_COLOR; plain text otherwise."""

from __future__ import annotations

import dataclasses
import io
import re

from hypothesis import given
from hypothesis import strategies as st

from ctxpolicy.render.terminal import (
    allocate_cells,
    color_enabled,
    format_layer_bars,
    format_preview_layers,
    format_stacked_bar,
    paint,
)
from tests.render.sample import sample_view

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_color_only_on_a_tty_without_no_color() -> None:
    assert color_enabled(Tty(), environ={}) is True
    assert color_enabled(io.StringIO(), environ={}) is False
    assert color_enabled(Tty(), environ={"NO_COLOR": "1"}) is False
    assert color_enabled(Tty(), environ={"NO_COLOR": ""}) is True  # empty means unset
    assert color_enabled(Tty(), environ={"TERM": "dumb"}) is False
    assert color_enabled(io.StringIO(), environ={"FORCE_COLOR": "1"}) is True
    assert color_enabled(Tty(), environ={"NO_COLOR": "1", "FORCE_COLOR": "1"}) is False


def test_plain_output_has_no_escape_codes_and_reads_alone() -> None:
    text = format_preview_layers(sample_view(), color=False)
    assert not ANSI.search(text)
    assert "1,210 / 2,000 tokens (60.5%)" in text
    assert "# system_prompt" in text  # legend maps symbols to layers
    assert "excluded: process react: in exclude" in text
    assert "truncated 310 tokens to fit cap 200 (truncate_tail)" in text


def test_colour_output_has_escape_codes_and_same_text() -> None:
    plain = format_preview_layers(sample_view(), color=False)
    coloured = format_preview_layers(sample_view(), color=True)
    assert ANSI.search(coloured)
    stripped = ANSI.sub("", coloured)
    assert "1,210 / 2,000 tokens" in stripped
    assert [line.split()[0] for line in plain.splitlines()[3:]] == [
        line.split()[0] for line in stripped.splitlines()[3:]
    ]


def test_stacked_bar_width_and_proportions() -> None:
    bar, legend = format_stacked_bar(sample_view(), width=50, color=False)
    inner = bar[1 : bar.index("]")]
    assert len(inner) == 50
    assert inner.count("#") == 3  # system_prompt 120/2000 of 50 cells
    assert inner.count(".") == 50 - round(1210 / 2000 * 50)
    assert "free" in legend


def test_layer_bar_lines_one_per_layer() -> None:
    lines = format_layer_bars(sample_view(), width=10, color=False)
    assert len(lines) == 8
    knowledge = next(line for line in lines if "knowledge__context" in line)
    assert "##########" in knowledge  # full: 200 of 200
    assert "    200 /     200 tok" in knowledge


def test_paint_is_identity_when_disabled() -> None:
    assert paint("x", "bold", enabled=False) == "x"
    assert paint("x", "bold", "red", enabled=True) == "\x1b[1;31mx\x1b[0m"


@given(
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    st.integers(min_value=1, max_value=50_000),
    st.integers(min_value=0, max_value=120),
)
def test_allocate_cells_never_exceeds_width(values, total, width) -> None:
    cells = allocate_cells(values, total=total, width=width)
    assert len(cells) == len(values)
    assert sum(cells) <= width
    assert all(c >= 0 for c in cells)
    if sum(values) <= total and width > 0:
        for value, count in zip(values, cells):
            assert count <= value * width / total + 1 + 1e-9 or count == 1


def test_the_cap_column_is_the_cap_the_layer_got() -> None:
    """A history whose cap redistribution raised above its ratio's: the bar, the cap
    column and the ratio cap beside it, as the text and HTML previews show them."""
    from ctxpolicy.render.view import build_view
    from tests.render.sample import sample_layers, sample_preview

    layers = [
        dataclasses.replace(layer, cap=1_720, base_cap=500, tokens=1_600)
        if layer.name == "checkpoint_messages"
        else layer
        for layer in sample_layers()
    ]
    view = build_view(sample_preview(layers=layers))
    [line] = [x for x in format_layer_bars(view, width=10, color=False) if "checkpoint" in x]
    assert "  1,600 /   1,720 tok" in line
    assert "ratio cap 500" in line
    assert "#########." in line  # 1,600 of 1,720, not over the ratio's 500
