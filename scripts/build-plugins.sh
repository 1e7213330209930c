#!/usr/bin/env bash
# Builds the WebAssembly policy plugins from source and checks their crates:
# the guest SDK (plugin-sdk/rust) and the default bundle's plugins
# (policies/plugins/*), and the C tenant-plugin example
# (examples/tenant-plugins/c). Each is its own Cargo package outside the root crate,
# so the root's fmt/clippy/test never see them; this script does. The built
# modules land in target/plugins/; the default bundle's are committed next
# to their sources (policies/plugins/<name>.wasm) so a fresh clone runs
# without a wasm toolchain — `--install` copies fresh builds there.
# tests/default_bundle.rs runs the bundle's tests against the fresh build.
# Safe to re-run; works from any directory. scripts/test.sh calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
install_modules=false
if [[ "${1:-}" == "--install" ]]; then install_modules=true; fi

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

# Source paths are remapped so no local path ends up in the module. The bytes
# still depend on the toolchain and on where the repository lies: cargo
# hashes the SDK's absolute path (it is outside the plugin's workspace) into
# symbol names, which changes the function order. A build elsewhere behaves
# the same but may differ byte for byte from the committed module.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
wasm_rustflags="--remap-path-prefix=$cargo_home=/cargo"$'\x1f'"--remap-path-prefix=$root=/arbiter"

for plugin in shortest-first; do
  log "policies/plugins/$plugin.wasm"
  CARGO_ENCODED_RUSTFLAGS="$wasm_rustflags" cargo build \
    --manifest-path "policies/plugins/$plugin/Cargo.toml" \
    --release --locked --target "$wasm_target" --target-dir "$target_dir"
  built="$target_dir/$wasm_target/release/${plugin//-/_}.wasm"
  if $install_modules; then
    install -m 644 "$built" "policies/plugins/$plugin.wasm"
  elif ! cmp -s "$built" "policies/plugins/$plugin.wasm"; then
    log "note: the fresh $plugin.wasm differs in bytes from the committed one (toolchain or checkout path); tests check it behaves the same; --install replaces it"
  fi
done

# The C example: clang and wasm-ld, from Debian's clang and lld when missing.
if ! command -v clang >/dev/null || ! command -v wasm-ld >/dev/null; then
  if command -v apt-get >/dev/null; then
    log "installing clang and lld"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q clang lld >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q clang lld >/dev/null; }
  else
    echo "build-plugins.sh: the C example needs clang and wasm-ld (lld) on PATH" >&2
    exit 1
  fi
fi
c_example=examples/tenant-plugins/c
mkdir -p "$target_dir/c"
log "$c_example: host test"
clang -Wall -Wextra -Werror -o "$target_dir/c/urgent-test" "$c_example/test.c"
"$target_dir/c/urgent-test"
log "$c_example -> target/plugins/c/urgent.wasm"
clang --target=wasm32 -O2 -Wall -Wextra -Werror -nostdlib \
  -Wl,--no-entry -Wl,--strip-all \
  -o "$target_dir/c/urgent.wasm" "$c_example/urgent.c"
