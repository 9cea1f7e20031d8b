"""A self-contained HTML page of a preview: messages, stacked token bar, why per layer.

`render_preview_html` takes the JSON shape of a preview (documented in
`ctxpolicy.render.view`) and returns one HTML document with inline CSS and nothing
else: no scripts, no fonts, no images, no links to fetch. A Content-Security-Policy
``default-src 'none'`` meta tag makes a browser refuse any external asset should one
ever slip in, so the page opens the same offline, from a CI artifact or an e-mail.

Every value is HTML-escaped: message contents come from users and retrievers.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ctxpolicy.render.view import LayerView, MessageView, PreviewView, build_view

__all__ = ["layer_hue", "render_preview_html"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"

_CSS = """
:root { --fg:#1d232a; --muted:#5b6570; --line:#d8dde3; --bg:#f7f8fa; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
       color:var(--fg); background:var(--bg); }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 10px; text-transform: uppercase; letter-spacing: .04em;
     color: var(--muted); }
.meta { color: var(--muted); margin: 0; }
.meta b { color: var(--fg); font-weight: 600; }
.stack { display:flex; height: 34px; border-radius: 6px; overflow:hidden;
         border:1px solid var(--line); background:#eceff3; }
.seg { height:100%; min-width: 3px; border-right: 1px solid rgba(255,255,255,.7); }
.seg.free { border-right: 0; min-width: 0;
            background: repeating-linear-gradient(45deg,#eceff3 0 6px,#e2e6eb 6px 12px); }
.total { margin: 8px 0 0; color: var(--muted); }
.legend { list-style:none; padding:0; margin: 10px 0 0; display:flex; flex-wrap:wrap;
          gap: 6px 18px; }
.legend li { display:flex; align-items:center; gap:6px; font-size: 13px; }
.swatch { width: 12px; height: 12px; border-radius: 3px; display:inline-block; }
table { width:100%; border-collapse: collapse; background: var(--card);
        border:1px solid var(--line); border-radius: 6px; overflow: hidden; font-size: 14px; }
th, td { text-align:left; padding: 7px 10px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background:#eef1f4; font-weight:600; font-size: 13px; }
td.num { text-align:right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.excluded td { color: var(--muted); }
.badge { display:inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
         font-weight:600; }
.badge.in { background:#dff3e4; color:#17602b; }
.badge.out { background:#eceff3; color:#5b6570; }
.mini { width: 120px; height: 10px; background:#eceff3; border-radius: 5px; overflow:hidden; }
.mini > div { height:100%; }
.why { margin:0; }
.cut { margin: 4px 0 0; color:#8a5300; }
.err { margin: 4px 0 0; color:#a11d1d; }
.msg { background: var(--card); border:1px solid var(--line); border-left-width: 6px;
       border-radius: 6px; margin: 0 0 10px; }
.msg header { display:flex; gap: 12px; align-items: baseline; padding: 6px 12px;
              border-bottom: 1px solid var(--line); font-size: 13px; }
.role { font-weight: 700; text-transform: uppercase; letter-spacing: .05em; }
.tok { margin-left:auto; color: var(--muted); }
.msg pre:empty { display: none; }
.msg pre { margin:0; padding: 10px 12px; white-space: pre-wrap; word-break: break-word;
           font: 13px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
.warnings li { color:#8a5300; }
.call { margin: 0; padding: 6px 12px 0; font: 12px/1.4 ui-monospace,Menlo,Consolas,monospace;
        color: #3d5a80; }
footer { margin-top: 30px; color: var(--muted); font-size: 12px; }
"""


def layer_hue(index: int) -> int:
    """A hue (0-359) for the ``index``-th coloured layer, well spread (golden angle)."""
    return (210 + index * 137) % 360


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else 100.0 * part / whole


def _colors(view: PreviewView) -> dict[str, str]:
    coloured = [layer.name for layer in view.layers if layer.included]
    return {name: f"hsl({layer_hue(i)} 62% 52%)" for i, name in enumerate(coloured)}


def _stack(view: PreviewView, colors: Mapping[str, str]) -> str:
    shown = [layer for layer in view.included if layer.tokens > 0]
    whole = max(view.available_tokens, sum(layer.tokens for layer in shown), 1)
    segments = []
    used = 0.0
    for layer in shown:
        width = _pct(layer.tokens, whole)
        used += width
        title = f"{layer.name}: {layer.tokens:,} tokens ({_pct(layer.tokens, whole):.1f}%)"
        segments.append(
            f'<div class="seg" data-layer="{_e(layer.name)}" data-tokens="{layer.tokens}" '
            f'title="{_e(title)}" style="width:{width:.4f}%;background:{colors[layer.name]}">'
            "</div>"
        )
    free = max(0.0, 100.0 - used)
    segments.append(f'<div class="seg free" title="free" style="width:{free:.4f}%"></div>')
    share = _pct(view.total_tokens, view.available_tokens)
    label = f"{view.total_tokens:,} of {view.available_tokens:,} available tokens ({share:.1f}%)"
    legend = "".join(
        f'<li><span class="swatch" style="background:{colors[layer.name]}"></span>'
        f'{_e(layer.name)} <span class="meta">{layer.tokens:,}</span></li>'
        for layer in shown
    )
    return (
        f'<div class="stack" id="stack" role="img" aria-label="{_e(label)}">'
        f"{''.join(segments)}</div>"
        f'<p class="total" id="total">{_e(label)}</p><ul class="legend">{legend}</ul>'
    )


def _layer_row(layer: LayerView, colors: Mapping[str, str]) -> str:
    state = "included" if layer.included else "excluded"
    badge = (
        '<span class="badge in">in</span>'
        if layer.included
        else ('<span class="badge out">out</span>')
    )
    share_cap = layer.share_cap
    cap = "—" if share_cap is None else f"{share_cap:,}"
    fill = min(100.0, _pct(layer.tokens, share_cap or 0)) if share_cap else 0.0
    color = colors.get(layer.name, "#aab2bd")
    mini = (
        f'<div class="mini" title="{fill:.1f}% of cap"><div style="width:{fill:.2f}%;'
        f'background:{color}"></div></div>'
        if layer.included
        else ""
    )
    why = f'<p class="why">{_e(layer.reason)}</p>'
    if layer.included and layer.cap is not None and share_cap is not None and layer.cap > share_cap:
        why += f'<p class="why meta">cap raised to {layer.cap:,} by redistribution</p>'
    why += "".join(f'<p class="cut">{_e(cut)}</p>' for cut in layer.cuts)
    why += "".join(f'<p class="why meta">{_e(note)}</p>' for note in layer.notes)
    if layer.recalled:
        items = "".join(f"<li>{_e(unit)}</li>" for unit in layer.recalled)
        why += f'<details class="recalled"><summary>recalled {len(layer.recalled)} unit(s)</summary><ul>{items}</ul></details>'  # noqa: E501
    if layer.error:
        why += f'<p class="err">collector error: {_e(layer.error)}</p>'
    tokens = f"{layer.tokens:,}" if layer.included else "—"
    return (
        f'<tr class="layer {state}" data-layer="{_e(layer.name)}">'
        f"<td><code>{_e(layer.name)}</code></td><td>{badge}</td>"
        f'<td class="num">{tokens}</td><td class="num">{cap}</td><td>{mini}</td>'
        f"<td>{why}</td></tr>"
    )


def _calls(message: MessageView) -> str:
    lines = [f"tool call: {call}" for call in message.tool_calls]
    if message.tool_call_id:
        lines.append(f"answers tool call [{message.tool_call_id}]")
    return "".join(f'<p class="call">{_e(line)}</p>' for line in lines)


def _message(message: MessageView, colors: Mapping[str, str], index: int) -> str:
    color = colors.get(message.layer or "", "#aab2bd")
    layer = f'<span class="layer"><code>{_e(message.layer)}</code></span>' if message.layer else ""
    name = f'<span class="meta">{_e(message.name)}</span>' if message.name else ""
    tokens = "" if message.tokens is None else f'<span class="tok">{message.tokens:,} tokens</span>'
    return (
        f'<article class="msg role-{_e(message.role)}" id="m{index}" '
        f'data-layer="{_e(message.layer or "")}" style="border-left-color:{color}">'
        f'<header><span class="role">{_e(message.role)}</span>{layer}{name}{tokens}</header>'
        f"{_calls(message)}<pre>{_e(message.content)}</pre></article>"
    )


def render_preview_html(
    preview: PreviewView | Mapping[str, Any], *, title: str | None = None
) -> str:
    """Render a preview as one self-contained HTML document.

    Args:
        preview: Preview data (the JSON shape in `ctxpolicy.render.view`) or a
            `PreviewView`.
        title: Page title; defaults to ``ctxpolicy preview: POLICY / PROCESS``.

    Returns:
        The complete HTML text (UTF-8; write it with ``encoding="utf-8"``).
    """
    view = preview if isinstance(preview, PreviewView) else build_view(preview)
    colors = _colors(view)
    policy = view.policy or view.source or "policy"
    page_title = title or f"ctxpolicy preview: {policy} / {view.process}"
    facts = [f"process <b>{_e(view.process)}</b>"]
    if view.policy:
        facts.insert(0, f"policy <b>{_e(view.policy)}</b>")
    if view.source:
        facts.append(f"file <code>{_e(view.source)}</code>")
    if view.query_path:
        facts.append(f"query path <b>{_e(view.query_path)}</b>")
    if view.tokenizer:
        facts.append(f"tokenizer <b>{_e(view.tokenizer)}</b>")
    rows = "".join(_layer_row(layer, colors) for layer in view.layers)
    messages = "".join(_message(m, colors, i) for i, m in enumerate(view.messages))
    warnings = ""
    if view.warnings:
        items = "".join(f"<li>{_e(w)}</li>" for w in view.warnings)
        warnings = (
            f'<section id="warnings"><h2>Warnings</h2><ul class="warnings">{items}</ul></section>'
        )
    included = len(view.included)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="ctxpolicy">
<title>{_e(page_title)}</title>
<style>{_CSS}</style>
</head>
<body>
<main>
<h1>{_e(page_title)}</h1>
<p class="meta">{" · ".join(facts)}</p>
<section id="budget"><h2>Token budget</h2>{_stack(view, colors)}</section>
<section id="layers"><h2>Layers ({included} of {len(view.layers)} included)</h2>
<table><thead><tr><th>layer</th><th></th><th>tokens</th><th>ratio cap</th><th>of cap</th>
<th>why</th></tr></thead>
<tbody>{rows}</tbody></table></section>
<section id="messages"><h2>Messages ({len(view.messages)})</h2>{messages}</section>
{warnings}
<footer>Generated by ctxpolicy. Self-contained page: no scripts, no external assets.</footer>
</main>
</body>
</html>
"""
