"""``ctxpolicy init NAME [--extends FILE] [--output PATH] [--force]``: start a team policy.

Writes a commented YAML policy that validates as written, with the
``# yaml-language-server: $schema=...`` line so editors (VS Code's YAML extension, any
yaml-language-server client) complete keys and check values while the team edits it.
The schema reference must outlive the virtualenv: the nearest
``schemas/ctxpolicy.schema.json`` in the file's folder or above (a project that keeps the
schema, e.g. from ``ctxpolicy schema > schemas/ctxpolicy.schema.json``), relative to the
file; else the schema's ``$id`` URL, never a path into the installed package
(docs/team-policy.md, 'Editor support').

``--extends FILE`` takes a path as the shell sees it; the file stores it relative to its
own folder (as the format requires). ``--extends builtin:NAME`` (a policy bundled with
the package) is stored as written. Without ``--output`` the policy is ``./NAME.yaml``.
The text is validated before it is written; an existing file is kept unless ``--force``.

Exit codes: 0 written, 2 bad name, existing file, unreadable parent or invalid result.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from ctxpolicy.atomic import write_text_atomic
from ctxpolicy.builtin import is_builtin, missing_message, resolve_ref
from ctxpolicy.cli.reporters import format_issue
from ctxpolicy.editing import check_candidate
from ctxpolicy.editing import format_yaml_value as q
from ctxpolicy.layers import TOKENIZER_NAMES
from ctxpolicy.policy import POLICY_NAME_PATTERN

HELP = "write a new, commented team policy that validates"
#: Exit codes, as ``--help``, the README and docs/cli.md give them.
EXIT_CODES = "0 written, 2 usage/not written"
EXAMPLES = """examples:
  # a team policy on the bundled Datapillar defaults (ctxpolicy list names them)
  ctxpolicy init data-platform --extends builtin:base -o teams/data-platform.yaml
  ctxpolicy validate teams/data-platform.yaml
  # a standalone policy with every Datapillar default spelled out, in ./analytics.yaml
  ctxpolicy init analytics
"""

SCHEMA_FILE = "ctxpolicy.schema.json"
#: What the ``$schema`` line names when no project copy of the schema is found: the
#: schema's own ``$id`` (stable across installs and virtualenvs).
SCHEMA_ID = "https://ctxpolicy.dev/schemas/ctxpolicy.schema.json"


def _err(message: str) -> None:
    sys.stderr.write(message + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``init``."""
    parser.description = HELP
    parser.add_argument("name", metavar="NAME", help="policy name, e.g. data-platform")
    parser.add_argument(
        "--extends",
        metavar="FILE",
        default=None,
        help="parent policy to inherit from: a path as seen from here, or builtin:NAME",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        default=None,
        help="where to write the policy (default: ./NAME.yaml)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def find_schema(folder: Path) -> Path | None:
    """The project's schema file for a policy written in ``folder``: the nearest
    ``schemas/ctxpolicy.schema.json`` in ``folder`` or one of its parents, else None."""
    for parent in (folder, *folder.parents):
        candidate = parent / "schemas" / SCHEMA_FILE
        if candidate.is_file():
            return candidate
    return None


def schema_reference(folder: Path) -> str:
    """The ``$schema`` of a policy written in ``folder``: the project's schema relative
    to it, else `SCHEMA_ID` (never a path into the installed package: a rebuilt or
    moved virtualenv would break it)."""
    found = find_schema(folder.resolve())
    return SCHEMA_ID if found is None else relative_posix(found, folder)


def relative_posix(target: Path, start: Path) -> str:
    """``target`` relative to folder ``start``, with forward slashes.

    Falls back to the absolute path where no relative path exists (another drive).
    """
    try:
        return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()
    except ValueError:
        return target.resolve().as_posix()


def render_team_policy(name: str, *, extends: str | None, schema: str) -> str:
    """The text of a new team policy (pure; always a valid policy for a valid parent).

    Args:
        name: The policy name (must match the policy name pattern).
        extends: Parent path relative to the new file's folder, or None for a standalone
            policy with the Datapillar defaults spelled out.
        schema: Path or URL of the JSON Schema, for the editor comment line.
    """
    head = f"""# yaml-language-server: $schema={schema}
#
# Context policy of team {name}: what goes into the input messages of each LLM call.
#   check it:          ctxpolicy validate <this file>
#   see the result:    ctxpolicy show <this file>
#   see a real call:   ctxpolicy preview <this file> --process mapreduce_worker --query "..."
#                      ctxpolicy preview <this file> --process react --state state.json
#   change one value:  ctxpolicy set <this file> budget.ratios.query 0.1
#     (`set` keeps these comments, validates first and writes atomically)
"""
    if extends is not None:
        return head + _INHERITING.format(
            name=q(name), extends=q(extends), team=q(name), parent=extends
        )
    return head + _STANDALONE.format(
        name=q(name), team=q(name), tokenizers=" | ".join(TOKENIZER_NAMES)
    )


_INHERITING = """#
# Everything left out here is inherited from {parent}: mappings merge key by key (the
# values here win), lists such as `order` and `include` replace the parent's list.

version: 1
name: {name}
description: Team policy inheriting the shared defaults.
extends: {extends}

# The central switch. false: shared __context layers reach a process only when the
# process lists them in `include`. The environment variable
# CTXPOLICY_ENABLE_SHARE_CONTEXT and the load-time argument override this file.
# enable_share_context: true

# Free values for templates, e.g. {{{{ vars.team }}}}.
vars:
  team: {team}

# Token budget: shares of context_window x (1 - output_reserve); they may sum to 1.0
# at most. Uncomment to give a layer more or less room than the parent does.
# budget:
#   ratios:
#     knowledge__context: 0.10
#     query: 0.12

# Per-process rules. Example: MapReduce workers also get the todo list.
# processes:
#   mapreduce_worker:
#     checkpoint_messages: false     # a mapreduce_* process never sees the history
#     share_context: false
#     query: runtime
#     include: [framework__context, knowledge__context, todo__context]
"""

_STANDALONE = """
version: 1
name: {name}
description: Team policy with the Datapillar defaults spelled out.

# The central switch. false: shared __context layers reach a process only when the
# process lists them in `include`. The environment variable
# CTXPOLICY_ENABLE_SHARE_CONTEXT and the load-time argument override this file.
enable_share_context: true

model:
  context_window: 128000          # tokens of the target model's window
  tokenizer: cl100k_base          # {tokenizers}

budget:
  output_reserve: 0.10            # share kept free for the answer
  ratios:                         # shares of context_window x (1 - output_reserve)
    system_prompt: 0.12
    framework__context: 0.05
    experience__context: 0.06
    knowledge__context: 0.10
    todo__context: 0.05
    compression__context: 0.08
    checkpoint_messages: 0.36
    query: 0.12
  redistribute: true              # share a layer leaves unused goes to layers that need it

order:                            # system_prompt first, query last
  - system_prompt
  - framework__context
  - experience__context
  - knowledge__context
  - todo__context
  - compression__context
  - checkpoint_messages
  - query

vars:
  team: {team}

layers:
  framework__context:
    persist: false                # framework constraints are never persisted
    collector:
      type: template
      template: "You work for team {{{{ vars.team }}}}. Follow the output contract."
  knowledge__context:
    collector: {{type: retriever, service: knowledge, top_k: 5, on_error: skip}}
    cache: volatile-ok            # per-query text before the history on purpose (docs/design.md)
  todo__context:                  # state["todo"] as a checklist: "- [ ] step", "- [x] step — notes"
    collector: {{type: state, field: todo, template: "Current plan:\\n{{{{ value | checklist }}}}"}}
  compression__context:
    persist: true                 # the history summary survives a checkpoint restore
    collector: {{type: state, field: compression__context}}
  checkpoint_messages:
    overflow: drop_oldest         # drop_oldest | summarize | error
  query:
    overflow: error               # error | truncate_tail

processes:                        # which layers each kind of call gets
  react:             {{checkpoint_messages: true,  share_context: true,  query: checkpoint}}
  sequential:        {{checkpoint_messages: true,  share_context: true,  query: checkpoint}}
  dynamic:           {{checkpoint_messages: true,  share_context: true,  query: checkpoint}}
  hierarchical:      {{checkpoint_messages: true,  share_context: true,  query: checkpoint}}
  mapreduce_planner: {{checkpoint_messages: false, share_context: false, query: runtime,
                      include: [framework__context, experience__context, knowledge__context]}}
  mapreduce_worker:  {{checkpoint_messages: false, share_context: false, query: runtime,
                      include: [framework__context, knowledge__context]}}
  mapreduce_reducer: {{checkpoint_messages: false, share_context: false, query: runtime,
                      include: [framework__context, experience__context, knowledge__context]}}
default_process: react
"""


def _check_arguments(args: argparse.Namespace) -> str | None:
    """The usage error of these arguments, or None when they are fine."""
    name: str = args.name
    output = _output_path(args)
    if not re.match(POLICY_NAME_PATTERN, name) or len(name) > 128:
        return (
            f"NAME {name!r}: a policy name is lower-case letters, digits, '-' and '_', "
            f"starting with a letter or digit ({POLICY_NAME_PATTERN}), at most 128 long"
        )
    if output.suffix.lower() not in (".yaml", ".yml"):
        return f"--output {output}: init writes YAML; use a .yaml or .yml file name"
    if output.exists() and not args.force:
        return f"{output}: file exists; not overwritten (use --force to replace it)"
    if args.extends is not None and not resolve_ref(args.extends).is_file():
        return f"--extends {args.extends}: {missing_message(args.extends)}"
    return None


def _extends_reference(extends: str | None, folder: Path) -> str | None:
    """``--extends`` as the new file stores it: ``builtin:NAME`` as given, a path relative
    to the file's folder."""
    if extends is None or is_builtin(extends):
        return extends
    return relative_posix(Path(extends), folder)


def _output_path(args: argparse.Namespace) -> Path:
    return Path(args.output) if args.output else Path(f"{args.name}.yaml")


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, innermost first."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove those of ``folders`` (innermost first) that exist and are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty (or not ours to remove): leave it and its parents
            return


def _policy_text(args: argparse.Namespace, output: Path) -> str | None:
    """The new policy's text, validated where it will be written; None (issues printed)
    when it would not validate."""
    folder = output.parent if str(output.parent) else Path()
    extends = _extends_reference(args.extends, folder)
    schema = schema_reference(folder)
    text = render_team_policy(args.name, extends=extends, schema=schema)
    issues = [i for i in check_candidate(output, text) if i.severity == "error"]
    for issue in issues:
        _err(format_issue(issue))
    return None if issues else text


def run(args: argparse.Namespace) -> int:
    """Write the policy. Returns the exit code."""
    problem = _check_arguments(args)
    if problem is not None:
        _err(problem)
        return 2
    output = _output_path(args)
    # the candidate is validated in its own folder (extends and templates resolve from
    # there): the folders made for it are removed again when nothing is written
    folder = output.parent if str(output.parent) else Path()
    made = _missing_folders(folder)
    written = False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        text = _policy_text(args, output)
        if text is None:
            _err(f"{output}: not written: the new policy would not validate (see above)")
            return 2
        write_text_atomic(output, text, overwrite=bool(args.force))
        written = True
    except FileExistsError:
        _err(f"{output}: file exists; not overwritten (use --force to replace it)")
        return 2
    except OSError as exc:
        _err(f"{output}: cannot write: {exc.strerror or exc}")
        return 2
    finally:
        if not written:
            _remove_empty(made)
    sys.stdout.write(f"wrote {output}\n")
    return 0
