#!/usr/bin/env bash
# Installs the system packages some tests drive for real: Debian's chromium (the HTML
# preview is checked in a headless browser), postgresql (LangGraph's Postgres
# checkpointer and the recall index across processes) and zsh (the completion script). Idempotent; does nothing when both are present.
# Needs root and apt-get (CI containers); elsewhere it says what is missing and goes on,
# and the tests that need the missing program skip with that reason.
set -u
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
if ! command -v pg_ctl >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  missing+=(postgresql)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: not installing ${missing[*]} (needs root and apt-get); dependent tests will skip" >&2
  exit 0
fi
echo "system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
