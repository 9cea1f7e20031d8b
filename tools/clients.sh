#!/usr/bin/env bash
# Installs the third-party clients tests/clients/ drive for real: pre-commit and
# check-jsonschema (pip, into the project's .venv), a wheelhouse for the offline wheel
# install, and yaml-language-server (npm, into $CTXPOLICY_CLIENTS_DIR, default
# .venv/clients, which also holds pre-commit's store).
# Idempotent and quick when everything is present. Installs Debian's nodejs/npm when
# node or npm is missing and it runs as root with apt-get; elsewhere it says what is
# missing and goes on, and the tests that need it skip (or fail under
# CTXPOLICY_REQUIRE_CLIENTS=1).
set -u
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON_CLIENTS:-.venv/bin/python}
DIR=${CTXPOLICY_CLIENTS_DIR:-.venv/clients}
YLS_VERSION=1.25.0

if ! "$PY" -c 'import pre_commit, check_jsonschema' >/dev/null 2>&1; then
  echo "clients: pip install pre-commit check-jsonschema" >&2
  "$PY" -m pip install --quiet 'pre-commit>=3.5' 'check-jsonschema>=0.28' ||
    echo "clients: pip could not install pre-commit/check-jsonschema; their tests will skip" >&2
fi

# A wheelhouse for the offline wheel install (tests/clients/test_wheel_install.py): the
# build backend and every dependency of ctxpolicy[langchain,langgraph], at the versions
# of this .venv, downloaded once (pip's cache or the registry) so that the test builds and
# installs the wheel with the network off (pip --no-index --find-links). Rebuilt when
# pyproject.toml changes.
WHEELHOUSE="$DIR/wheelhouse"
if [ ! -f "$WHEELHOUSE/.complete" ] || [ pyproject.toml -nt "$WHEELHOUSE/.complete" ]; then
  echo "clients: pip download the wheel install's dependencies into $WHEELHOUSE" >&2
  rm -rf "$WHEELHOUSE" && mkdir -p "$WHEELHOUSE"
  "$PY" -m pip freeze --exclude-editable > "$WHEELHOUSE/constraints.txt"
  if "$PY" -m pip download --quiet -d "$WHEELHOUSE" -c "$WHEELHOUSE/constraints.txt" \
      'hatchling>=1.24' ".[langchain,langgraph]" 2>/dev/null; then
    rm -f "$WHEELHOUSE"/ctxpolicy-*  # the test builds its own from the checkout
    touch "$WHEELHOUSE/.complete"
  else
    echo "clients: pip could not fill the wheelhouse; the wheel install test will skip" >&2
  fi
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "clients: installing Debian's nodejs npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    echo "clients: node/npm missing (needs root and apt-get); yaml-language-server tests will skip" >&2
    exit 0
  fi
fi

installed=$(node -p "require('./$DIR/node_modules/yaml-language-server/package.json').version" 2>/dev/null)
if [ "$installed" != "$YLS_VERSION" ]; then
  echo "clients: npm install yaml-language-server@$YLS_VERSION into $DIR" >&2
  mkdir -p "$DIR"
  npm install --prefix "$DIR" --no-audit --no-fund --silent "yaml-language-server@$YLS_VERSION" ||
    echo "clients: npm could not install yaml-language-server; its tests will skip" >&2
fi
exit 0
