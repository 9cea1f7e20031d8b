"""The Jinja2 sandbox every policy template runs in.

One place decides what a template may do: `ImmutableSandboxedEnvironment` (no
attribute escapes such as ``__class__``/``__subclasses__``, no mutation of lists or
dicts), `StrictUndefined` (a missing variable is an error, not an empty string), and
resource bounds so that no template can hang or exhaust memory:

- ``range()`` builds at most `MAX_RANGE` items;
- one render runs at most `MAX_TEMPLATE_STEPS` loop iterations and calls (nested loops,
  exponential ``{% macro %}`` recursion);
- no single value (a string, a list, a number's digits) may exceed
  `MAX_RENDERED_CHARS`, checked *before* it is built where an operation amplifies its
  input (``*``, ``**``, ``~``, ``center``, ``join``, ``replace``, format widths, ...);
- one render builds at most `MAX_ALLOCATED_CHARS` characters of values in total, and
  its output is at most `MAX_RENDERED_CHARS` characters.

Validation compiles templates with the same environment that renders them, so "it
validated" means "it will compile".
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jinja2 import StrictUndefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError, TemplateSyntaxError
from jinja2.runtime import Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ctxpolicy.errors import CtxPolicyError

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

#: Largest ``range()`` a template may build.
MAX_RANGE = 10_000
#: Largest rendered output (and largest single value), in characters.
MAX_RENDERED_CHARS = 1_000_000
#: Loop iterations plus calls (functions, macros, filters) one render may run.
MAX_TEMPLATE_STEPS = 300_000
#: ``{% macro %}`` calls one render may run (Jinja macro calls are the costly kind).
MAX_MACRO_CALLS = 10_000
#: Characters of values (strings, containers) one render may build in total.
MAX_ALLOCATED_CHARS = 50 * MAX_RENDERED_CHARS
#: Largest integer a template may build, in bits.
MAX_INT_BITS = 100_000
#: Largest ``tojson`` indent.
MAX_JSON_INDENT = 16
#: Largest ``lipsum(n)``.
MAX_LIPSUM_PARAGRAPHS = 100


class TemplateOutputTooLargeError(CtxPolicyError, ValueError):
    """A template rendered (or tried to build) more than `MAX_RENDERED_CHARS` characters."""


class _Budget:
    """What one render has spent so far."""

    __slots__ = ("chars", "macros", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self.macros = 0
        self.chars = 0


_BUDGET: ContextVar[_Budget | None] = ContextVar("ctxpolicy_template_budget", default=None)
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")
#: Filters whose numeric options size their result (a width, a count of rows or columns).
_WIDTH_FILTERS = frozenset({"center", "indent", "batch", "slice", "wordwrap", "truncate"})


def _security_error(message: str) -> Exception:
    return SecurityError(message)


def _too_large(what: str, size: int) -> TemplateOutputTooLargeError:
    return TemplateOutputTooLargeError(
        f"template {what} would build about {size} characters; the limit is {MAX_RENDERED_CHARS}"
    )


def _step(*, macro: bool = False) -> None:
    budget = _BUDGET.get()
    if budget is None:
        return
    if macro:
        budget.macros += 1
        if budget.macros > MAX_MACRO_CALLS:
            raise _security_error(
                f"template made more than {MAX_MACRO_CALLS} macro calls (runaway recursion?)"
            )
    budget.steps += 1
    if budget.steps > MAX_TEMPLATE_STEPS:
        raise _security_error(
            f"template ran more than {MAX_TEMPLATE_STEPS} loop iterations and calls "
            "(nested loops or runaway macro recursion?)"
        )


def estimate_chars(value: Any, limit: int = MAX_RENDERED_CHARS) -> int:
    """About how many characters ``str(value)`` has; stops counting past ``limit``.

    Walks containers iteratively and gives up as soon as the total exceeds ``limit``,
    so the cost is bounded by ``limit`` whatever the value (cycles included).
    """
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 1
        elif isinstance(item, bytes | bytearray):
            total += 4 * len(item)
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            _push_entries(item, stack)
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend(item)
        else:
            total += 1
    return total


def _push_entries(mapping: Mapping[Any, Any], stack: list[Any]) -> None:
    """Push the keys and values of ``mapping`` (a view that refuses a key: its value skipped)."""
    for key in mapping:
        stack.append(key)
        try:
            stack.append(mapping[key])
        except Exception:  # noqa: BLE001, S112 - a view that refuses a key: skip it
            continue


def _charge(value: Any, what: str) -> Any:
    """Refuse ``value`` when it is too large; count it against the render's budget."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_BITS:
            raise _security_error(f"template {what} built an integer over {MAX_INT_BITS} bits")
        return value
    if not isinstance(value, str | list | tuple | set | frozenset | dict):
        return value
    size = estimate_chars(value)
    if size > MAX_RENDERED_CHARS:
        raise _too_large(what, size)
    budget = _BUDGET.get()
    if budget is not None:
        budget.chars += size
        if budget.chars > MAX_ALLOCATED_CHARS:
            raise TemplateOutputTooLargeError(
                f"template built more than {MAX_ALLOCATED_CHARS} characters of values in one render"
            )
    return value


def _check_width(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_RENDERED_CHARS:
        raise _too_large(what, abs(value))


def _check_format_string(text: str, what: str) -> None:
    """Refuse ``{:>999999999}`` style widths (and ``%999999999s``) before formatting."""
    for field in _FORMAT_FIELD.findall(text):
        _, colon, spec = field.partition(":")
        if colon:
            for digits in _DIGITS.findall(spec):
                _check_spec_number(digits, what)
    for match in _PERCENT_SPEC.finditer(text):
        for group in match.groups():
            if group == "*":
                raise _security_error(f"template {what}: '*' widths are not allowed")
            if group is not None:
                _check_spec_number(group, what)


def _check_spec_number(digits: str, what: str) -> None:
    """Refuse a width or precision of a format spec over `MAX_RENDERED_CHARS`."""
    if len(digits) > 7 or int(digits) > MAX_RENDERED_CHARS:
        raise _too_large(what, int(digits))


def _sized_items(items: Any) -> tuple[list[Any], int]:
    listed = list(items)
    return listed, sum(estimate_chars(item) for item in listed)


def _check_size(what: str, size: int) -> None:
    """Refuse a value of about ``size`` characters when it is over `MAX_RENDERED_CHARS`."""
    if size > MAX_RENDERED_CHARS:
        raise _too_large(what, size)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_StrPrecheck = Callable[[str, str, tuple[Any, ...], Mapping[str, Any]], tuple[Any, ...]]


def _str_width(
    _text: str, what: str, args: tuple[Any, ...], _kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    if args:
        _check_width(args[0], what)
    return args


def _str_expandtabs(
    text: str, what: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    tab = args[0] if args else kwargs.get("tabsize", 8)
    if isinstance(tab, int):
        _check_size(what, len(text) * max(tab, 1))
    return args


def _str_join(
    text: str, what: str, args: tuple[Any, ...], _kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    if not args:
        return args
    items, size = _sized_items(args[0])
    _check_size(what, size + len(text) * max(len(items) - 1, 0))
    return (items, *args[1:])


def _str_replace(
    text: str, what: str, args: tuple[Any, ...], _kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    if len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        old, new = args[0], args[1]
        hits = text.count(old) if old else len(text) + 1
        _check_size(what, len(text) + hits * len(new))
    return args


def _str_format(
    text: str, what: str, args: tuple[Any, ...], _kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    _check_format_string(text, what)
    return args


#: The ``str`` methods whose result can amplify their input, and their pre-checks.
_STR_PRECHECKS: Mapping[str, _StrPrecheck] = {
    "center": _str_width,
    "ljust": _str_width,
    "rjust": _str_width,
    "zfill": _str_width,
    "expandtabs": _str_expandtabs,
    "join": _str_join,
    "replace": _str_replace,
    "format": _str_format,
    "format_map": _str_format,
}


def _precheck_str_method(
    text: str, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None
) -> tuple[Any, ...]:
    """Refuse a ``str`` method call whose result would exceed the value limit."""
    check = _STR_PRECHECKS.get(name)
    if check is None:
        return args
    return check(text, f"str.{name}()", args, kwargs or {})


def _precheck_power(what: str, left: Any, right: Any) -> None:
    if (
        _is_int(left)
        and _is_int(right)
        and right > 0
        and abs(left) > 1
        and right * left.bit_length() > MAX_INT_BITS
    ):
        raise _security_error(f"template {what}: integer over {MAX_INT_BITS} bits")


def _precheck_repeat(what: str, left: Any, right: Any) -> None:
    ints = _is_int(left) and _is_int(right)
    if ints and left.bit_length() + right.bit_length() > MAX_INT_BITS:
        raise _security_error(f"template {what}: integer over {MAX_INT_BITS} bits")
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(count, int) and count > 0:
            _check_size(what, estimate_chars(seq) * count)


def _precheck_add(what: str, left: Any, right: Any) -> None:
    if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        _check_size(what, estimate_chars(left) + estimate_chars(right))


def _precheck_percent(what: str, left: Any, _right: Any) -> None:
    if isinstance(left, str):
        _check_format_string(left, what)  # refuses '*' widths, so arguments never size it


#: The binary operators the sandbox intercepts, and their pre-checks.
_BINOP_PRECHECKS: Mapping[str, Callable[[str, Any, Any], None]] = {
    "**": _precheck_power,
    "*": _precheck_repeat,
    "+": _precheck_add,
    "%": _precheck_percent,
}


def _precheck_binop(operator: str, left: Any, right: Any) -> None:
    check = _BINOP_PRECHECKS.get(operator)
    if check is not None:
        check(f"operator {operator!r}", left, right)


_FilterPrecheck = Callable[[str, Any, tuple[Any, ...], Mapping[str, Any]], "tuple[Any, ...] | None"]


def _filter_join(
    what: str, value: Any, options: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    items, size = _sized_items(value)
    separator = options[0] if options else kwargs.get("d", "")
    _check_size(what, size + estimate_chars(separator) * max(len(items) - 1, 0))
    return (items, *options)


def _filter_replace(
    _what: str, value: Any, options: tuple[Any, ...], _kwargs: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    if isinstance(value, str) and len(options) >= 2:
        _precheck_str_method(value, "replace", (str(options[0]), str(options[1])))
    return None


def _filter_format(
    what: str, value: Any, _options: tuple[Any, ...], _kwargs: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    if isinstance(value, str):
        _check_format_string(value, what)
    return None


def _filter_indent(
    what: str, value: Any, options: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    if not isinstance(value, str):
        return None
    width = options[0] if options else kwargs.get("width", 4)
    width = len(width) if isinstance(width, str) else width
    if isinstance(width, int):
        _check_size(what, len(value) + (value.count("\n") + 1) * max(width, 0))
    return None


def _filter_json_indent(
    what: str, _value: Any, options: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    indent = options[0] if options else kwargs.get("indent")
    if isinstance(indent, int) and indent > MAX_JSON_INDENT:
        raise _security_error(f"{what}: indent over {MAX_JSON_INDENT}")
    return None


#: Filters whose arguments can amplify their input, and their pre-checks (which may
#: return the value and options to call the filter with, e.g. a materialised iterable).
_FILTER_PRECHECKS: Mapping[str, _FilterPrecheck] = {
    "join": _filter_join,
    "replace": _filter_replace,
    "format": _filter_format,
    "indent": _filter_indent,
    "tojson": _filter_json_indent,
    "pprint": _filter_json_indent,
}


def _guard_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a built-in filter: count a step, pre-check amplifying arguments, charge the result."""
    pass_arg = getattr(function, "jinja_pass_arg", None)
    skip = 0 if pass_arg is None else 1  # context / eval context / environment first
    what = f"filter {name!r}"
    widths = name in _WIDTH_FILTERS
    check = _FILTER_PRECHECKS.get(name)

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _step()
        options = args[skip + 1 :]
        if widths:
            for option in (*options, *kwargs.values()):
                _check_width(option, what)
        if check is not None and len(args) > skip:
            checked = check(what, args[skip], options, kwargs)
            if checked is not None:
                args = (*args[:skip], *checked)
        return _charge(function(*args, **kwargs), what)

    return guarded


def _guarded_iter(iterable: Any) -> Iterator[Any]:
    for item in iterable:
        _step()
        yield item


def _guarded_concat(pieces: Iterable[Any]) -> str:
    texts = [
        str(piece) if estimate_chars(piece) <= MAX_RENDERED_CHARS else _oversize(piece)
        for piece in pieces
    ]
    size = sum(len(text) for text in texts)
    if size > MAX_RENDERED_CHARS:
        raise _too_large("operator '~'", size)
    return _charge("".join(texts), "operator '~'")  # type: ignore[no-any-return]


def _oversize(value: Any) -> str:
    raise _too_large("value", estimate_chars(value))


def _guarded_buffer(pieces: Iterable[str]) -> str:
    """``environment.concat``: joins macro bodies and ``{% set %}`` blocks."""
    texts = list(pieces)
    size = sum(len(text) for text in texts)
    if size > MAX_RENDERED_CHARS:
        raise _too_large("macro or block", size)
    return "".join(texts)


def _finalize(value: Any) -> Any:
    """Every printed value: refuse one whose text would exceed the output limit."""
    if not isinstance(value, str):
        size = estimate_chars(value)
        if size > MAX_RENDERED_CHARS:
            raise _too_large("output", size)
    return value


def _lipsum(lipsum: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(lipsum)
    def bounded(n: int = 5, *args: Any, **kwargs: Any) -> str:
        if isinstance(n, int) and n > MAX_LIPSUM_PARAGRAPHS:
            raise _security_error(f"lipsum() of more than {MAX_LIPSUM_PARAGRAPHS} paragraphs")
        return lipsum(n, *args, **kwargs)

    return bounded


def plain_data(value: Any) -> Any:
    """``value`` as plain JSON-able data: read-only views unwrapped (for ``tojson``)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


#: Statuses that tick a checklist item (compared lower-case, ``_``/``-`` read as spaces).
DONE_STATUSES = frozenset({"done", "completed", "complete", "finished", "closed", "resolved"})
#: Statuses that say nothing beyond an empty box, so the line does not repeat them.
_OPEN_STATUSES = frozenset({"", "pending", "todo", "to do", "open", "not started", "none"})
#: Keys that name a todo item, in order of preference (``content`` is LangChain's).
TODO_TITLE_KEYS = ("title", "content", "task", "name", "text", "description")
#: Keys that hold a todo item's notes.
TODO_NOTE_KEYS = ("notes", "note", "details")


def _status_words(status: Any) -> str:
    return " ".join(str(status).replace("_", " ").replace("-", " ").split())


def _is_done(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _status_words(value).lower() in DONE_STATUSES
    return False


def _first(item: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = item.get(key)
        if value is not None and value != "":
            return value
    return None


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=plain_data)


def checklist_line(item: Any, title: Any = None) -> str:
    """One todo item as a checklist line: ``- [ ] title``, ``- [x] title — notes``.

    ``item`` is a mapping (title from `TODO_TITLE_KEYS`, else ``title``; ticked by a
    true ``done`` or a ``status`` in `DONE_STATUSES`; an unfinished status other than
    "pending" follows in parentheses; notes from `TODO_NOTE_KEYS` after a dash), a
    status (a string or a bool, when ``title`` names the item), or anything else,
    written as ``- item`` (``- title: item`` under a title).
    """
    if isinstance(item, Mapping):
        return _mapping_checklist_line(item, title)
    if title is None:
        return f"- {item if isinstance(item, str) else _json_text(item)}"
    if isinstance(item, bool):
        return checklist_line({"done": item}, title)
    if item is None or isinstance(item, str):
        return checklist_line({"status": item}, title)
    return f"- {title}: {_json_text(item)}"


def _mapping_checklist_line(item: Mapping[str, Any], title: Any) -> str:
    """`checklist_line` of an item mapping: title, tick, open status, notes."""
    name = _item_title(item, title)
    status = _first(item, ("status", "state"))
    done = _is_done(item["done"]) if "done" in item else _is_done(status)
    line = f"- [{'x' if done else ' '}] {name}"
    words = "" if status is None else _status_words(status)
    if not done and words.lower() not in _OPEN_STATUSES and not _is_done(words):
        line += f" ({words})"
    return line + _notes_suffix(item)


def _item_title(item: Mapping[str, Any], title: Any) -> Any:
    """The item's own title (`TODO_TITLE_KEYS`), else ``title``, else the item as JSON."""
    name = _first(item, TODO_TITLE_KEYS)
    if name is None:
        name = title if title is not None else _json_text(item)
    return name


def _notes_suffix(item: Mapping[str, Any]) -> str:
    """`` — notes`` from `TODO_NOTE_KEYS`, or an empty text when the item has none."""
    notes = _first(item, TODO_NOTE_KEYS)
    if notes is None:
        return ""
    return f" — {notes if isinstance(notes, str) else _json_text(notes)}"


def checklist(value: Any) -> str:
    """A todo snapshot as checklist lines (the ``checklist`` filter of policy templates).

    A list gives one line per item (see `checklist_line`), a mapping one line per key
    (the key is the title, the value a status, a bool or an item mapping); a string is
    returned as it is and None gives an empty text.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        lines = [checklist_line(item, key) for key, item in value.items()]
    elif isinstance(value, list | tuple):
        lines = [checklist_line(item) for item in value]
    else:
        lines = [checklist_line(value)]
    return "\n".join(lines)


@lru_cache(maxsize=1)
def sandbox() -> SandboxedEnvironment:
    """The shared sandboxed environment (created once per process)."""

    class _GuardedCodeGenerator(CodeGenerator):
        """Routes loop iteration and ``~`` through the render budget."""

        def visit_For(self, node: nodes.For, frame: Frame) -> None:  # noqa: N802 - Jinja's name
            guard = nodes.EnvironmentAttribute("ctxpolicy_iterate", lineno=node.lineno)
            wrapped = nodes.Call(guard, [node.iter], [], None, None, lineno=node.lineno)
            node = nodes.For(
                node.target,
                wrapped,
                node.body,
                node.else_,
                node.test,
                node.recursive,
                lineno=node.lineno,
            )
            node.set_environment(self.environment)
            super().visit_For(node, frame)

        def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:  # noqa: N802
            self.write("environment.ctxpolicy_concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class _PolicySandbox(ImmutableSandboxedEnvironment):
        code_generator_class = _GuardedCodeGenerator
        intercepted_binops = frozenset({"*", "**", "+", "%"})
        ctxpolicy_iterate = staticmethod(_guarded_iter)
        ctxpolicy_concat = staticmethod(_guarded_concat)
        concat = staticmethod(_guarded_buffer)

        def call(
            __self,  # noqa: N805 - Jinja's own signature
            __context: Any,
            __obj: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            _step(macro=isinstance(__obj, Macro))
            if __obj is range and len(range(*args)) > MAX_RANGE:
                raise _security_error(f"range() larger than {MAX_RANGE} items is not allowed")
            owner = getattr(__obj, "__self__", None)
            if isinstance(owner, str) and not isinstance(__obj, type):
                args = _precheck_str_method(owner, getattr(__obj, "__name__", ""), args, kwargs)
            if __obj is _guarded_iter:
                return _guarded_iter(*args)
            result = super().call(__context, __obj, *args, **kwargs)
            return _charge(result, f"call of {getattr(__obj, '__name__', 'a function')}")

        def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
            wrapped = super().wrap_str_format(value)
            if wrapped is None:
                return None
            text: str = value.__self__
            name: str = value.__name__
            checked = wrapped

            @functools.wraps(value)
            def bounded(*args: Any, **kwargs: Any) -> str:
                _check_format_string(text, f"str.{name}()")
                if _NESTED_FIELD.search(text):  # '{:>{w}}': arguments size the result
                    values = [*args, *kwargs.values()]
                    if name == "format_map" and args and isinstance(args[0], Mapping):
                        values = list(args[0].values())
                    for item in values:
                        _check_width(item, f"str.{name}()")
                return checked(*args, **kwargs)

            return bounded

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _precheck_binop(operator, left, right)
            return _charge(super().call_binop(context, operator, left, right), operator)

    env = _PolicySandbox(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        finalize=_finalize,
    )
    env.globals["range"] = range
    lipsum: Callable[..., str] = env.globals["lipsum"]  # type: ignore[assignment]
    env.globals["lipsum"] = _lipsum(lipsum)
    env.filters["checklist"] = checklist
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": plain_data}
    env.filters.update({name: _guard_filter(name, f) for name, f in env.filters.items()})
    return env


@lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    """Compile ``source`` in the sandbox (cached by source text).

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse, or it uses a tag that
            loads another template (``include``, ``import``, ``from``, ``extends``):
            policy templates have no loader (``lineno`` is set).
    """

    env = sandbox()
    tree = env.parse(source)
    loading = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
    for node in tree.find_all(loading):
        tag = {"FromImport": "from", "Include": "include", "Import": "import"}.get(
            type(node).__name__, "extends"
        )
        raise TemplateSyntaxError(
            f"{{% {tag} %}} is not supported: policy templates cannot load other templates "
            "(put the text inline, or in this layer's template_file)",
            node.lineno,
        )
    return env.from_string(tree)


def render_template(source: str, variables: Mapping[str, Any]) -> str:
    """Render ``source`` with ``variables`` in the sandbox, within the render budget.

    Raises:
        jinja2.TemplateError: syntax error, undefined variable, a sandbox violation or
            a resource limit (`MAX_RANGE`, `MAX_TEMPLATE_STEPS`, `MAX_INT_BITS`).
        TemplateOutputTooLargeError: the output, or a value built on the way, exceeds
            `MAX_RENDERED_CHARS` (or `MAX_ALLOCATED_CHARS` in total).
    """
    template = compile_template(source)
    token = _BUDGET.set(_Budget())
    try:
        pieces: list[str] = []
        size = 0
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > MAX_RENDERED_CHARS:
                raise TemplateOutputTooLargeError(
                    f"template output exceeds {MAX_RENDERED_CHARS} characters"
                )
            pieces.append(chunk)
        return "".join(pieces)
    except RecursionError:
        raise SecurityError("template recursion is too deep (a macro calling itself?)") from None
    finally:
        _BUDGET.reset(token)


__all__ = [
    "MAX_ALLOCATED_CHARS",
    "MAX_INT_BITS",
    "MAX_MACRO_CALLS",
    "MAX_RANGE",
    "MAX_RENDERED_CHARS",
    "MAX_TEMPLATE_STEPS",
    "TemplateOutputTooLargeError",
    "checklist",
    "checklist_line",
    "compile_template",
    "estimate_chars",
    "plain_data",
    "render_template",
    "sandbox",
]
