"""``ctxpolicy completion bash|zsh``: scripts generated from the argument parser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ctxpolicy.cli import VERBS, build_parser

BASH = shutil.which("bash")


@pytest.fixture
def bash_script(run_cli) -> str:
    code, out, err = run_cli({}, "completion", "bash")
    assert code == 0, err
    return out


def complete(script: str, words: list[str], cwd: Path) -> list[str]:
    """What bash offers for ``words`` (the last one is being completed)."""
    if BASH is None:
        pytest.skip("bash is not installed")
    (cwd / "_completion.bash").write_text(script, encoding="utf-8")
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (
        "source ./_completion.bash\n"
        f"COMP_WORDS=({quoted})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        'COMP_LINE="${COMP_WORDS[*]}"\nCOMP_POINT=${#COMP_LINE}\n'
        '_ctxpolicy ctxpolicy "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        "printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", program],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert done.stderr == "", done.stderr
    return sorted(line for line in done.stdout.splitlines() if line)


def test_bash_completes_verbs_and_top_level_options(bash_script, tmp_path) -> None:
    assert complete(bash_script, ["ctxpolicy", ""], tmp_path) == sorted(
        [*VERBS, "--help", "-h", "--version"]
    )
    assert complete(bash_script, ["ctxpolicy", "pr"], tmp_path) == ["preview"]
    assert complete(bash_script, ["ctxpolicy", "--v"], tmp_path) == ["--version"]


def test_bash_completes_options_and_their_choices(bash_script, tmp_path) -> None:
    assert complete(bash_script, ["ctxpolicy", "validate", "--f"], tmp_path) == ["--format"]
    assert complete(bash_script, ["ctxpolicy", "validate", "--format", ""], tmp_path) == [
        "github",
        "json",
        "text",
    ]
    assert complete(bash_script, ["ctxpolicy", "preview", "x.yaml", "--format", "h"], tmp_path) == [
        "html"
    ]
    options = complete(bash_script, ["ctxpolicy", "preview", "-"], tmp_path)
    assert {
        "--process",
        "-p",
        "--state",
        "--query",
        "--system-prompt",
        "--format",
        "--output",
        "-o",
        "--share-context",
        "--help",
    } <= set(options)
    assert complete(bash_script, ["ctxpolicy", "completion", ""], tmp_path) == ["bash", "zsh"]
    # bash splits --format=json into three words: "--format", "=", "json"
    assert complete(bash_script, ["ctxpolicy", "validate", "--format", "=", ""], tmp_path) == [
        "github",
        "json",
        "text",
    ]
    assert complete(bash_script, ["ctxpolicy", "show", "--format", "=", "j"], tmp_path) == ["json"]


def test_bash_completes_policy_files_for_path_arguments(bash_script, tmp_path) -> None:
    for name in ("policies/base.yaml", "policies/teams/t.toml", "notes.txt", "p.yml", "q.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    for verb in ("validate", "show", "preview"):
        assert complete(bash_script, ["ctxpolicy", verb, ""], tmp_path) == [
            "p.yml",
            "policies",
            "q.yaml",
        ], verb
    assert complete(bash_script, ["ctxpolicy", "show", "policies/"], tmp_path) == [
        "policies/base.yaml",
        "policies/teams",
    ]
    assert complete(bash_script, ["ctxpolicy", "diff", "q.yaml", "p"], tmp_path) == [
        "p.yml",
        "policies",
    ]
    assert complete(bash_script, ["ctxpolicy", "validate", "--format", "json", "q"], tmp_path) == [
        "q.yaml"
    ]
    # --state takes any file; a free-text value (--query) gets nothing offered
    assert "notes.txt" in complete(
        bash_script, ["ctxpolicy", "preview", "q.yaml", "--state", ""], tmp_path
    )
    assert complete(bash_script, ["ctxpolicy", "preview", "q.yaml", "--query", ""], tmp_path) == []
    # an option's value is not a positional: diff's second file is still completed
    argv = ["ctxpolicy", "diff", "--format", "=", "json", "q.yaml", "p"]
    assert complete(bash_script, argv, tmp_path) == ["p.yml", "policies"]
    argv = ["ctxpolicy", "set", "--help", "q.yaml", "budget.ratios.query", "p"]
    assert complete(bash_script, argv, tmp_path) == []
    # set POLICY KEY VALUE: only POLICY is a file
    assert complete(bash_script, ["ctxpolicy", "set", "q.yaml", ""], tmp_path) == []


def test_bash_registers_the_function(bash_script, tmp_path) -> None:
    if BASH is None:
        pytest.skip("bash is not installed")
    (tmp_path / "c.bash").write_text(bash_script, encoding="utf-8")
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", "source c.bash; complete -p ctxpolicy"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "_ctxpolicy" in done.stdout and "ctxpolicy" in done.stdout


def test_zsh_script_names_every_verb_and_option(run_cli) -> None:
    code, out, _ = run_cli({}, "completion", "zsh")
    assert code == 0
    assert out.startswith("#compdef ctxpolicy\n")
    parser = build_parser()
    for verb in VERBS:
        assert f"'{verb}:" in out, verb
    for option in ("--format", "--explain", "--process", "--state", "--extends", "--force"):
        assert option in out
    assert "(text json github)" in out and "(bash zsh)" in out
    assert "*.(yaml|yml|toml)" in out
    assert parser.prog == "ctxpolicy"
    zsh = shutil.which("zsh")
    if zsh is not None:  # a syntax check where zsh is installed
        subprocess.run([zsh, "-n", "-c", out], check=True, capture_output=True)


_ZSH_DRIVER = r"""
# zsh -f driver.zsh HARNESS LINE...: TAB after each LINE in an interactive zsh (zpty)
zmodload zsh/zpty
h=$1; shift
zpty z zsh -f -i
rm -f $h/done.txt
zpty -w z "source $h/setup.zsh; print -r ready > $h/done.txt"
for i in {1..300}; do [[ -e $h/done.txt ]] && break; sleep 0.05; done
for q in "$@"; do
  rm -f $h/out.txt $h/done.txt
  zpty -w -n z "$q"$'\t'
  zpty -w z $'\x15'"print -r done > $h/done.txt"   # ^U, then a marker: input runs in order
  for i in {1..300}; do [[ -e $h/done.txt ]] && break; sleep 0.05; done
  [[ -e $h/done.txt ]] || { print -r "timeout: $q"; exit 1 }
  print -r -- "=== $q"
  [[ -e $h/out.txt ]] && sort -u $h/out.txt
done
zpty -d z
"""

_ZSH_SETUP = r"""
PROMPT='> '
fpath=(${0:a:h}/functions $fpath)
autoload -U compinit
compinit -u -D
compadd () {  # record what completion offers, then offer it
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
  typeset -a hits
  builtin compadd -A hits "$@"
  local h
  for h in $hits; do print -r -- "$h" >> HARNESS/out.txt; done
  builtin compadd "$@"
}
zstyle ':completion:*' list-grouped false
bindkey '^I' complete-word
"""


def zsh_complete(script: str, lines: list[str], cwd: Path, harness: Path) -> dict[str, list[str]]:
    """What an interactive zsh in ``cwd`` offers on TAB after each of ``lines``."""
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed")
    (harness / "functions").mkdir(parents=True)
    (harness / "functions" / "_ctxpolicy").write_text(script, encoding="utf-8")
    setup = _ZSH_SETUP.replace("HARNESS", str(harness))
    (harness / "setup.zsh").write_text(setup, encoding="utf-8")
    (harness / "driver.zsh").write_text(_ZSH_DRIVER, encoding="utf-8")
    done = subprocess.run(
        [zsh, "-f", str(harness / "driver.zsh"), str(harness), *lines],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    offered: dict[str, list[str]] = {}
    for block in done.stdout.split("=== ")[1:]:
        line, *found = block.split("\n")
        offered[line] = sorted(f for f in found if f)
    return offered


def test_zsh_completes_in_an_interactive_shell(run_cli, tmp_path) -> None:
    code, script, _ = run_cli({}, "completion", "zsh")
    assert code == 0
    work = tmp_path / "work"
    for name in ("policies/base.yaml", "policies/teams/t.toml", "notes.txt", "q.yaml"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("x\n", encoding="utf-8")
    offered = zsh_complete(
        script,
        [
            "ctxpolicy ",
            "ctxpolicy -",
            "ctxpolicy --version ",
            "ctxpolicy validate --format ",
            "ctxpolicy validate --format=",
            "ctxpolicy show ",
            "ctxpolicy show policies/",
            "ctxpolicy preview q.yaml --state ",
            "ctxpolicy completion ",
            "ctxpolicy set q.yaml ",
            "ctxpolicy diff q.yaml ",
        ],
        work,
        tmp_path / "harness",
    )
    assert offered["ctxpolicy "] == sorted(VERBS)
    assert offered["ctxpolicy -"] == ["--help", "--version", "-h"]
    assert offered["ctxpolicy --version "] == []
    assert offered["ctxpolicy validate --format "] == ["github", "json", "text"]
    assert offered["ctxpolicy validate --format="] == ["github", "json", "text"]
    assert offered["ctxpolicy show "] == ["policies", "q.yaml"]
    assert offered["ctxpolicy show policies/"] == ["base.yaml", "teams"]
    assert "notes.txt" in offered["ctxpolicy preview q.yaml --state "]
    assert offered["ctxpolicy completion "] == ["bash", "zsh"]
    assert offered["ctxpolicy set q.yaml "] == []
    assert offered["ctxpolicy diff q.yaml "] == ["policies", "q.yaml"]


def test_unknown_shell_is_a_usage_error(run_cli) -> None:
    code, _, err = run_cli({}, "completion", "tcsh")
    assert code == 2 and "invalid choice" in err
