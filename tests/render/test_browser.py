"""The HTML preview in a real headless browser (Debian chromium): DOM, layout, screenshot."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest

from ctxpolicy.render.html import render_html
from tests.render.browser import dump_dom, screenshot
from tests.render.sample import sample_preview

pytestmark = pytest.mark.browser

MEASURE = """<script>
document.body.dataset.widths = JSON.stringify(
  Array.from(document.querySelectorAll('.seg')).map(
    s => [s.dataset.layer || 'free', s.getBoundingClientRect().width]));
document.body.dataset.bar = document.getElementById('stack').getBoundingClientRect().width;
</script></body>"""


@pytest.fixture
def page(tmp_path: Path) -> Path:
    target = tmp_path / "preview.html"
    target.write_text(render_html(sample_preview()), encoding="utf-8")
    return target


def test_dom_in_chromium(page: Path) -> None:
    dom = dump_dom(page)
    assert "<title>ctxpolicy preview: datapillar-base / react</title>" in dom
    assert len(re.findall(r'<article class="msg', dom)) == 7
    assert len(re.findall(r'<tr class="layer', dom)) == 8
    assert re.search(r'<tr class="layer excluded" data-layer="todo__context">', dom)
    assert "process react: in exclude" in dom
    # user text stays text: the browser built no <b> element from a message
    assert "&lt;b&gt;by region&lt;/b&gt;" in dom
    assert "Write the query &amp; explain it." in dom


def test_layout_in_chromium(tmp_path: Path) -> None:
    """Segment widths on screen are proportional to the layers' token shares."""
    page = render_html(sample_preview())
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    target = tmp_path / "measure.html"
    target.write_text(page.replace("</body>", MEASURE), encoding="utf-8")
    dom = dump_dom(target)
    raw = re.search(r'data-widths="([^"]*)"', dom)
    bar = re.search(r'data-bar="([\d.]+)"', dom)
    assert raw and bar, dom[:2000]
    import html
    import json

    widths = dict(json.loads(html.unescape(raw.group(1))))
    total = float(bar.group(1))
    assert total > 500
    # 700 of 2000 tokens: 35% of the bar (within a couple of pixels of borders)
    assert widths["checkpoint_messages"] == pytest.approx(0.35 * total, abs=3)
    assert widths["system_prompt"] == pytest.approx(0.06 * total, abs=3)
    assert sum(widths.values()) == pytest.approx(total, abs=3)


def test_csp_blocks_any_script(tmp_path: Path) -> None:
    """The page's own Content-Security-Policy stops injected scripts from running."""
    page = render_html(sample_preview())
    target = tmp_path / "inject.html"
    target.write_text(
        page.replace("</body>", "<script>document.body.dataset.ran='yes'</script></body>"),
        encoding="utf-8",
    )
    dom = dump_dom(target)
    assert "<article" in dom
    assert 'data-ran="yes"' not in dom


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            chunks.append(data[pos + 8 : pos + 8 + length])
        pos += 12 + length
    return width, height, zlib.decompress(b"".join(chunks))


def test_screenshot_in_chromium(page: Path, tmp_path: Path) -> None:
    png = tmp_path / "preview.png"
    screenshot(page, png, width=1000, height=900)
    data = png.read_bytes()
    assert len(data) > 10_000
    width, height, pixels = png_pixels(data)
    assert (width, height) == (1000, 900)
    assert len(set(pixels[: width * height])) > 50  # a real page, not a blank canvas
