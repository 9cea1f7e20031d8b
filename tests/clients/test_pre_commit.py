"""pre-commit runs the published ``ctxpolicy-validate`` hook from this repository.

A throwaway Git repository uses this repository as its hook repository, pinned to a
commit, exactly as docs/ci.md tells users to. The hook repository is a clone of HEAD
with the working tree's ``.pre-commit-hooks.yaml`` committed on top (with fixed dates,
so the same content gives the same commit and pre-commit reuses its environment). The
clone and pre-commit's store live in the clients folder, so only the first run builds
the hook environment (a ``pip install`` of ctxpolicy from PyPI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clients.conftest import CLIENTS_DIR, REPO, missing_client, python_client

pytestmark = pytest.mark.slow

GOOD = "version: 1\nname: team-x\nbudget:\n  output_reserve: 0.2\n"
BAD = "version: 1\nname: team-y\nbudget:\n  output_reserve: 2\n"
BAD_LINE = (
    "policies/bad.yaml:4:3: $.budget.output_reserve: 2 is greater than the maximum of 0.9"
    " [schema.range]"
)
FIXED_DATE = "2000-01-01T00:00:00Z"


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "ctxpolicy tests",
        "GIT_AUTHOR_EMAIL": "tests@ctxpolicy.invalid",
        "GIT_COMMITTER_NAME": "ctxpolicy tests",
        "GIT_COMMITTER_EMAIL": "tests@ctxpolicy.invalid",
        "GIT_AUTHOR_DATE": FIXED_DATE,
        "GIT_COMMITTER_DATE": FIXED_DATE,
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def hook_repository() -> tuple[Path, str]:
    """A clone of HEAD plus the working tree's hook file; its path and commit."""
    clone = CLIENTS_DIR / "hook-repo"
    if not (clone / ".git").is_dir():
        shutil.rmtree(clone, ignore_errors=True)
        CLIENTS_DIR.mkdir(parents=True, exist_ok=True)
        _git(CLIENTS_DIR, "clone", "--quiet", "--no-checkout", str(REPO), str(clone))
    _git(clone, "fetch", "--quiet", str(REPO), "HEAD")
    _git(clone, "checkout", "--quiet", "--force", "--detach", "FETCH_HEAD")
    shutil.copyfile(REPO / ".pre-commit-hooks.yaml", clone / ".pre-commit-hooks.yaml")
    if _git(clone, "status", "--porcelain", "--", ".pre-commit-hooks.yaml"):
        _git(clone, "commit", "--quiet", "-m", "working tree hook file", ".pre-commit-hooks.yaml")
    return clone, _git(clone, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, dict[str, str]]:
    """pre-commit's command, a user repository using the hook, and the environment."""
    command = python_client("pre_commit")
    if shutil.which("git") is None:
        missing_client("git is not installed")
    hook_repo, rev = hook_repository()
    user = tmp_path_factory.mktemp("user-repo")
    _git(user, "init", "--quiet")
    (user / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        f"  - repo: {hook_repo}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: ctxpolicy-validate\n"
        "        files: ^policies/.*\\.(ya?ml|toml|j2)$\n",  # as docs/ci.md writes it
        encoding="utf-8",
    )
    (user / "policies").mkdir()
    (user / "policies" / "good.yaml").write_text(GOOD, encoding="utf-8")
    (user / ".github").mkdir()
    (user / ".github" / "ci.yml").write_text("on: push\n", encoding="utf-8")
    _git(user, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(CLIENTS_DIR / "pre-commit"), "NO_COLOR": "1"}
    env.pop("VIRTUAL_ENV", None)
    installed = subprocess.run(
        [*command, "install-hooks"], cwd=user, env=env, capture_output=True, text=True, check=False
    )
    if installed.returncode != 0:
        missing_client(f"pre-commit could not build the hook environment:\n{installed.stdout}")
    return command, user, env


def _run(pre_commit: tuple[list[str], Path, dict[str, str]], *args: str) -> tuple[int, str]:
    command, user, env = pre_commit
    done = subprocess.run(
        [*command, "run", "--color", "never", *args],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_good_policies_pass(pre_commit: tuple[list[str], Path, dict[str, str]]) -> None:
    code, output = _run(pre_commit, "--all-files")
    assert code == 0, output
    assert "ctxpolicy validate" in output
    assert "Passed" in output


def test_other_yaml_files_do_not_trigger_it(
    pre_commit: tuple[list[str], Path, dict[str, str]],
) -> None:
    code, output = _run(pre_commit, "--files", ".github/ci.yml")
    assert code == 0, output
    assert "(no files to check)Skipped" in output


def test_bad_policy_fails_with_file_line_col(
    pre_commit: tuple[list[str], Path, dict[str, str]],
) -> None:
    _, user, _ = pre_commit
    bad = user / "policies" / "bad.yaml"
    bad.write_text(BAD, encoding="utf-8")
    _git(user, "add", "policies/bad.yaml")
    try:
        code, output = _run(pre_commit, "--all-files")
    finally:
        _git(user, "rm", "--quiet", "--cached", "policies/bad.yaml")
        bad.unlink()
    assert code == 1, output
    assert "Failed" in output
    assert "- exit code: 1" in output
    assert BAD_LINE in output.splitlines()


def _hook_env() -> Path:
    envs = sorted((CLIENTS_DIR / "pre-commit").glob("repo*/py_env-*"))
    assert envs, "no hook environment in the pre-commit store"
    return max(envs, key=lambda path: path.stat().st_mtime)


def test_hook_environment_size_and_imports(
    pre_commit: tuple[list[str], Path, dict[str, str]], record_property: pytest.RecordProperty
) -> None:
    """Measures what the hook installs (reported, not bounded: issue 14) and checks
    that ``validate`` in it imports neither langchain-core nor tiktoken."""
    _, user, _ = pre_commit
    env = _hook_env()
    size = sum(path.stat().st_size for path in env.rglob("*") if path.is_file())
    dists = sorted(
        path.name.removesuffix(".dist-info").rsplit("-", 1)[0].lower()
        for path in env.glob("lib/python*/site-packages/*.dist-info")
    )
    record_property("hook_env_bytes", size)
    record_property("hook_env_distributions", " ".join(dists))
    print(f"hook environment {env}: {size / 1e6:.1f} MB, {len(dists)} distributions: {dists}")
    assert "ctxpolicy" in dists
    probe = (
        "import sys\nfrom ctxpolicy.cli import main\n"
        "code = main(['validate', 'policies'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'langchain_core', 'tiktoken'})\n"
        "print(repr((code, heavy)))\n"
    )
    done = subprocess.run(
        [str(env / "bin" / "python"), "-c", probe],
        cwd=user,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == repr((0, [])), done.stdout


def test_the_installed_variant_needs_no_environment_and_reports_the_same_line(
    pre_commit: tuple[list[str], Path, dict[str, str]],
) -> None:
    """``ctxpolicy-validate-installed`` runs the ctxpolicy on PATH: nothing is built."""
    command, user, env = pre_commit
    hook_repo, rev = hook_repository()
    config = user / "lean-config.yaml"
    config.write_text(
        "repos:\n"
        f"  - repo: {hook_repo}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: ctxpolicy-validate-installed\n"
        "        files: ^policies/\n",
        encoding="utf-8",
    )
    lean_env = {**env, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    bad = user / "policies" / "bad.yaml"
    bad.write_text(BAD, encoding="utf-8")
    _git(user, "add", "policies/bad.yaml")
    try:
        done = subprocess.run(
            [*command, "run", "--color", "never", "--all-files", "-c", str(config)],
            cwd=user,
            env=lean_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        _git(user, "rm", "--quiet", "--cached", "policies/bad.yaml")
        bad.unlink()
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "ctxpolicy validate (installed)" in output
    assert BAD_LINE in output.splitlines()
