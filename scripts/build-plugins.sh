#!/usr/bin/env bash
# Builds the WebAssembly policy plugins from source and checks their crates:
# the guest SDK (plugin-sdk/rust) and the default bundle's plugins
# (policies/plugins/*). Each is its own Cargo package outside the root crate,
# so the root's fmt/clippy/test never see them; this script does. The built
# modules are copied next to their sources (policies/plugins/<name>.wasm) and
# committed, so a fresh clone runs without a wasm toolchain. Safe to re-run;
# works from any directory. scripts/test.sh calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

log() { printf '==> %s\n' "$*"; }

# One target directory for all plugin crates, so their shared dependencies
# are built once and cached between runs.
target_dir="$root/target/plugins"
wasm_target=wasm32-unknown-unknown

if command -v rustup >/dev/null; then
  rustup target add "$wasm_target" >/dev/null 2>&1
fi

packages=(plugin-sdk/rust policies/plugins/shortest-first)
for package in "${packages[@]}"; do
  manifest="$package/Cargo.toml"
  log "$package: fmt, clippy, test"
  cargo fmt --manifest-path "$manifest" -- --check
  cargo clippy --manifest-path "$manifest" --all-targets --locked --target-dir "$target_dir" -- -D warnings
  cargo test --manifest-path "$manifest" --locked --target-dir "$target_dir"
done

# Source paths are remapped so the module does not depend on where the
# repository or the cargo home lie: the same toolchain builds the same bytes.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
wasm_rustflags="--remap-path-prefix=$cargo_home=/cargo"$'\x1f'"--remap-path-prefix=$root=/arbiter"

for plugin in shortest-first; do
  log "policies/plugins/$plugin.wasm"
  CARGO_ENCODED_RUSTFLAGS="$wasm_rustflags" cargo build \
    --manifest-path "policies/plugins/$plugin/Cargo.toml" \
    --release --locked --target "$wasm_target" --target-dir "$target_dir"
  install -m 644 "$target_dir/$wasm_target/release/${plugin//-/_}.wasm" "policies/plugins/$plugin.wasm"
done
