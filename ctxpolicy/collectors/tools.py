"""The ``tools`` collector: compact definitions of LangChain tools.

The tool source of docs/design.md, 'Context sources'.

Policy::

    tools__context:
      collector: {type: tools, service: tools}

The service is a sequence of LangChain tools (``BaseTool``; OpenAI-style tool dicts are
accepted too) or a zero-argument callable returning one. Each tool renders as one line::

    - search(query: string, k?: integer = 3): Search the web.

Whole definitions are packed into the layer's cap in the given order (a definition that
does not fit is left out, later smaller ones may still fit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxpolicy.memory.packing import pack_pieces

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest

_SPACES = re.compile(r"\s+")
MAX_DESCRIPTION_CHARS = 500


def _compact(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def render_type(schema: Mapping[str, Any]) -> str:
    """A compact type expression of a JSON schema (``string``, ``array[integer]``, ``"a"|"b"``)."""
    options = schema.get("anyOf", schema.get("oneOf"))
    if "enum" in schema:
        rendered = "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    elif "const" in schema:
        rendered = json.dumps(schema["const"], ensure_ascii=False)
    elif isinstance(options, list):
        rendered = "|".join(render_type(option) for option in options)
    elif "$ref" in schema:
        rendered = str(schema["$ref"]).rsplit("/", 1)[-1]
    else:
        rendered = _render_kind(schema)
    return rendered


def _render_kind(schema: Mapping[str, Any]) -> str:
    """The type expression of a schema by its ``type`` (a union, an array, or a name)."""
    kind = schema.get("type")
    items = schema.get("items")
    if isinstance(kind, list):
        return "|".join(render_type({**schema, "type": k}) for k in kind)
    if kind == "array" and isinstance(items, Mapping):
        return f"array[{render_type(items)}]"
    return kind if isinstance(kind, str) else "any"


def render_tool(tool: Any) -> str:
    """One tool as a line: ``- name(arg: type, opt?: type = default): description``.

    Raises:
        TypeError: ``tool`` is not something langchain-core can convert to a tool schema.
    """
    try:
        function = convert_to_openai_tool(tool)["function"]
    except (TypeError, ValueError, KeyError) as exc:
        raise TypeError(f"cannot render tool {tool!r}: {exc}") from exc
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required", ()))
    args: list[str] = []
    for name, schema in (parameters.get("properties") or {}).items():
        optional = "" if name in required else "?"
        arg = f"{name}{optional}: {render_type(schema)}"
        if "default" in schema:
            arg += f" = {json.dumps(schema['default'], ensure_ascii=False)}"
        if schema.get("description"):
            arg += f" ({_compact(str(schema['description']), 120)})"
        args.append(arg)
    description = _compact(str(function.get("description") or ""))
    line = f"- {function['name']}({', '.join(args)})"
    return f"{line}: {description}" if description else line


def resolve_tools(request: CollectRequest, name: str) -> list[Any]:
    """The tools of service ``name``.

    Raises:
        LookupError: no such service.
        TypeError: the service is not a sequence of tools or a callable returning one.
    """
    service = request.services.get(name)
    if service is None:
        raise LookupError(
            f"tools collector of layer {request.layer!r}: no service {name!r} "
            "(pass services={'" + name + "': [tool, ...]})"
        )
    tools = service() if callable(service) and not isinstance(service, Sequence) else service
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise TypeError(
            f"tools collector of layer {request.layer!r}: service {name!r} must be a sequence "
            f"of LangChain tools or a callable returning one, got {type(tools).__name__}"
        )
    return list(tools)


def collect_tools(request: CollectRequest) -> str | None:
    """Render the service's tool definitions, whole definitions packed into the cap.

    Returns:
        One line per tool, or None when there are no tools or none fits.
    """
    spec: Any = request.spec
    tools = resolve_tools(request, spec.service)
    if not tools or request.cap_tokens <= 0:
        return None
    lines = [render_tool(tool) for tool in tools]
    kept = pack_pieces(lines, cap_tokens=request.cap_tokens, count_tokens=request.count_tokens)
    return "\n".join(lines[i] for i in kept) or None
