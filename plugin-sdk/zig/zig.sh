#!/usr/bin/env bash
# zig.sh ARGS...: `zig ARGS...` with the Zig this SDK is written for,
# PyPI's ziglang package pinned below, run from a venv under
# ~/.cache/arbiter/ziglang-<version> (never in the repository). When the
# venv is missing or holds another version it pip-installs ziglang there
# first (needs python3 with venv, and PyPI). scripts/build-plugins.sh and
# the build.sh of `arbiter plugin new --lang zig` build with it.
set -euo pipefail
version=0.17.0
venv="$HOME/.cache/arbiter/ziglang-$version"
installed() {
  [[ "$("$venv/bin/python" -m ziglang version 2>/dev/null)" == "$version" ]]
}
if ! installed; then
  if ! command -v python3 >/dev/null; then
    echo "zig.sh: python3 not found; Zig $version comes from PyPI's ziglang package (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$venv")"
  # One install at a time: builds may run side by side.
  exec 9>"$venv.lock"
  flock 9
  if ! installed; then
    echo "zig.sh: installing ziglang==$version from PyPI into $venv" >&2
    rm -rf "$venv"
    if ! { python3 -m venv "$venv" &&
      "$venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$version"; } >&2; then
      rm -rf "$venv"
      echo "zig.sh: could not install ziglang==$version (python3 -m venv, pip install); see above" >&2
      exit 1
    fi
  fi
  exec 9>&-
fi
exec "$venv/bin/python" -m ziglang "$@"
