"""Edit one value of a policy file in place, keeping everything else byte for byte.

`ctxpolicy set` must keep a team's comments, key order, quoting, alignment and blank
lines. Re-dumping a round-trip document does not: it realigns ``key:   {...}`` flow
mappings, rewraps long flow collections and normalizes indentation. So the edit is a
*patch of one node*: ruamel.yaml's round-trip composer gives the exact start and end of
every node, and only the characters of the node being changed are replaced (or, for a
new key, one block of lines is inserted right after its siblings). Every edit is then
checked: the edited text is parsed again and must equal the old data with exactly that
one value set, or the edit is refused and nothing is written.

TOML files are edited with tomlkit, which keeps comments, key order, quoting and blank
lines: a value is replaced in place (multi-line strings and arrays, dotted keys and
inline tables included, a trailing comment kept at its column), a new key goes after
the last key of its ``[table]``, a missing table is appended at the end. The same check
applies: the new text must hold exactly the old data with that one value set.

YAML stays a hand-written node patcher: round-trip YAML libraries (ruamel.yaml's
``typ="rt"``) re-dump the whole document and so realign flow mappings, rewrap long
lines and normalize indentation; patching the characters of one node is the only way to
keep every other byte.

Pure functions: `parse_key`, `parse_value`, `set_yaml_value`, `set_toml_value`,
`set_text_value`. The one I/O entry point is `set_policy_value` (lock, edit, validate the
candidate next to the file, atomic write).
"""

from ctxpolicy.editing.files import (
    check_candidate,
    file_format,
    set_policy_value,
    set_text_value,
)
from ctxpolicy.editing.toml_edit import set_toml_value
from ctxpolicy.editing.values import (
    EditError,
    EditResult,
    FileFormat,
    _with_value,
    parse_key,
    parse_value,
    quote_double,
)
from ctxpolicy.editing.yaml_edit import format_yaml_value, set_yaml_value

__all__ = [
    "EditError",
    "EditResult",
    "FileFormat",
    "_with_value",
    "check_candidate",
    "file_format",
    "format_yaml_value",
    "parse_key",
    "parse_value",
    "quote_double",
    "set_policy_value",
    "set_text_value",
    "set_toml_value",
    "set_yaml_value",
]
