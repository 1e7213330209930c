#!/usr/bin/env bash
# The one test command (README): prepares a fresh machine, then checks and
# tests everything. Safe to re-run; every set-up step is skipped when done.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

# Toolchain pieces the build needs (idempotent).
if command -v rustup >/dev/null; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
log "plugins (scripts/build-plugins.sh)"
./scripts/build-plugins.sh
log "cargo test"
ARBITER_REQUIRE_PLUGINS=1 cargo test --all-targets --locked
