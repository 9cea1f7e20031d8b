"""The JSON preview: ``{"format_version": 1, "plan", "messages", "report", "persist"}``.

A stable public shape (``ctxpolicy preview --format json``, ``ctxpolicy compile --format
json``): ``plan`` is `LayerPlan.to_dict`, ``report`` is `ComposeReport.to_dict`, each
message is langchain-core's ``message_to_dict`` form with the ``layer`` that produced it
first, and ``persist`` maps each persisted layer to its new text.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import message_to_dict

from ctxpolicy.render import FORMAT_VERSION
from ctxpolicy.render.view import Preview

__all__ = ["preview_data", "render_json"]


def preview_data(preview: Preview) -> dict[str, Any]:
    """The plain data of the JSON preview."""
    result = preview.result
    return {
        "format_version": FORMAT_VERSION,
        "plan": preview.plan.to_dict(),
        "messages": [
            {"layer": layer, **message_to_dict(message)}
            for message, layer in zip(result.messages, preview.message_layers, strict=True)
        ],
        "report": result.report.to_dict(),
        "persist": result.persist,
    }


def render_json(preview: Preview, *, color: bool = False) -> str:
    """The machine-readable preview (``color`` is ignored: JSON has none)."""
    del color
    return json.dumps(preview_data(preview), ensure_ascii=False, indent=2, default=str)
