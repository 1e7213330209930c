#!/usr/bin/env bash
# Builds the WebAssembly policy plugins from source and checks them:
# - Rust: the guest SDK (plugin-sdk/rust), the default bundle's plugins
#   and the FGD placement policy (policies/plugins/*; fgd.wasm lands in
#   policies/placement-fgd/) and examples/plugins/rust; each is its own Cargo
#   package outside the root crate, so the root's fmt/clippy/test never see
#   them; this script does.
# - Go (the preinstalled `go`, >= 1.26; GOTOOLCHAIN=local, nothing is
#   downloaded): the Go SDK (plugin-sdk/go: gofmt, vet, its tests, and the
#   check that its generated types and the C SDK's match
#   plugin-sdk/schema), examples/plugins/go and the hostile test plugin.
# - C (clang and wasm-ld, from Debian's clang and lld, installed when
#   missing): the SDK's host tests, examples/plugins/c and the hostile test
#   plugin.
# - AssemblyScript (node and npm; plugin-sdk/assemblyscript/asc.sh runs the
#   compiler pinned by its package-lock.json, `npm ci` when its
#   node_modules is missing or stale): the SDK's tests,
#   examples/plugins/assemblyscript (and its test) and the hostile test
#   plugin.
# - Zig (plugin-sdk/zig/zig.sh runs the `ziglang` package from PyPI it pins,
#   pip-installed into a venv under ~/.cache/arbiter/ziglang-<version>,
#   never into the repository): zig fmt, the SDK's tests,
#   examples/plugins/zig (and its test) and the hostile test plugin.
# The Go section's generator check (`go run ./internal/gen -check`) covers
# the AssemblyScript and Zig views too.
# The default bundle's modules land in target/plugins/ and are committed
# next to their sources (policies/plugins/<name>.wasm) so a fresh clone runs
# without a wasm toolchain — `--install` copies fresh builds there. Each
# examples/plugins/<language>/ bundle gets its urgent-first.wasm (not
# committed) and its tests are run with `arbiter policy test`; the hostile
# plugins land in target/plugins/hostile/. tests/default_bundle.rs and
# tests/plugin_languages.rs use the fresh builds.
# A missing toolchain that cannot be installed is reported, and is an error
# when ARBITER_REQUIRE_PLUGINS=1 (scripts/test.sh sets it for the tests).
# Safe to re-run; works from any directory. scripts/test.sh calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
install_modules=false
if [[ "${1:-}" == "--install" ]]; then install_modules=true; fi

log() { printf '==> %s\n' "$*"; }
missing() {
  if [[ "${ARBITER_REQUIRE_PLUGINS:-}" == 1 ]]; then
    echo "build-plugins.sh: $*; ARBITER_REQUIRE_PLUGINS=1 requires every plugin" >&2
    exit 1
  fi
  log "SKIPPED: $* (set ARBITER_REQUIRE_PLUGINS=1 to make this an error)"
}

# One target directory for all plugin crates, so their shared dependencies
# are built once and cached between runs.
target_dir="$root/target/plugins"
wasm_target=wasm32-unknown-unknown

if command -v rustup >/dev/null; then
  rustup target add "$wasm_target" >/dev/null 2>&1
fi

packages=(plugin-sdk/rust policies/plugins/shortest-first policies/plugins/fgd examples/plugins/rust)
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

# The FGD placement policy's module lives in its own bundle directory.
log "policies/placement-fgd/fgd.wasm"
CARGO_ENCODED_RUSTFLAGS="$wasm_rustflags" cargo build \
  --manifest-path policies/plugins/fgd/Cargo.toml \
  --release --locked --target "$wasm_target" --target-dir "$target_dir"
if $install_modules; then
  install -m 644 "$target_dir/$wasm_target/release/fgd.wasm" policies/placement-fgd/fgd.wasm
elif ! cmp -s "$target_dir/$wasm_target/release/fgd.wasm" policies/placement-fgd/fgd.wasm; then
  log "note: the fresh fgd.wasm differs in bytes from the committed one (toolchain or checkout path); --install replaces it"
fi

log "examples/plugins/rust/urgent-first.wasm"
CARGO_ENCODED_RUSTFLAGS="$wasm_rustflags" cargo build \
  --manifest-path examples/plugins/rust/Cargo.toml \
  --release --locked --target "$wasm_target" --target-dir "$target_dir"
install -m 644 "$target_dir/$wasm_target/release/urgent_first.wasm" examples/plugins/rust/urgent-first.wasm

# C: clang and wasm-ld, from Debian's clang and lld when missing.
if ! command -v clang >/dev/null || ! command -v wasm-ld >/dev/null; then
  if command -v apt-get >/dev/null; then
    log "installing clang and lld"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q clang lld >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q clang lld >/dev/null; }
  else
    echo "build-plugins.sh: the C plugins need clang and wasm-ld (lld) on PATH" >&2
    exit 1
  fi
fi
mkdir -p "$target_dir/c" "$target_dir/hostile"
c_wasm() { # output, source
  clang --target=wasm32 -O2 -Wall -Wextra -Werror -nostdlib -I plugin-sdk/c \
    -Wl,--no-entry -Wl,--strip-all -o "$1" "$2"
}
log "plugin-sdk/c and examples/plugins/c: host test"
clang -Wall -Wextra -Werror -I plugin-sdk/c -o "$target_dir/c/urgent-first-test" examples/plugins/c/test.c
"$target_dir/c/urgent-first-test"
log "examples/plugins/c/urgent-first.wasm"
c_wasm examples/plugins/c/urgent-first.wasm examples/plugins/c/urgent_first.c
log "target/plugins/hostile/c.wasm"
c_wasm "$target_dir/hostile/c.wasm" tests/data/plugins/hostile/c/hostile.c

# Go: the preinstalled toolchain; never a downloaded one.
export GOTOOLCHAIN=local
go_minor=$( (command -v go >/dev/null && go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p') || true)
# Without a usable Go, no stale Go module may pass for a fresh one.
rm -f examples/plugins/go/urgent-first.wasm "$target_dir/hostile/go.wasm"
if [[ -n "$go_minor" && "$go_minor" -lt 26 ]]; then
  missing "$(go env GOVERSION) is too old: plugin-sdk/go needs Go >= 1.26 (go.mod); the Go plugins are not built"
elif [[ -n "$go_minor" ]]; then
  go_wasm() { # output, package directory
    (cd "$2" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath \
      -ldflags=-s -o "$1" .)
  }
  log "plugin-sdk/go: gofmt, vet, test, generated types up to date"
  unformatted=$(gofmt -l plugin-sdk/go examples/plugins/go tests/data/plugins/hostile/go)
  if [[ -n "$unformatted" ]]; then
    echo "build-plugins.sh: not gofmt-formatted: $unformatted" >&2
    exit 1
  fi
  (cd plugin-sdk/go && go vet ./... && GOOS=wasip1 GOARCH=wasm go vet ./... &&
    go test ./... && go run ./internal/gen -check)
  log "examples/plugins/go: test"
  (cd examples/plugins/go && go vet ./... && go test ./...)
  log "examples/plugins/go/urgent-first.wasm"
  go_wasm "$root/examples/plugins/go/urgent-first.wasm" examples/plugins/go
  log "target/plugins/hostile/go.wasm"
  go_wasm "$target_dir/hostile/go.wasm" tests/data/plugins/hostile/go
else
  missing "go not found: the Go SDK, examples/plugins/go and the Go hostile plugin are not built (install Go >= 1.26)"
fi

# AssemblyScript: node and npm (Debian's when missing); the compiler comes
# from npm at the version package-lock.json pins.
as_sdk=plugin-sdk/assemblyscript
rm -f examples/plugins/assemblyscript/urgent-first.wasm "$target_dir/hostile/assemblyscript.wasm"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if command -v apt-get >/dev/null; then
    log "installing nodejs and npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q nodejs npm >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q nodejs npm >/dev/null; } || true
  fi
fi
if command -v node >/dev/null && command -v npm >/dev/null; then
  # asc.sh installs the pinned compiler (npm ci) when it is missing or stale.
  asc() { "$as_sdk/asc.sh" "$@"; }
  asc --version >/dev/null
  log "plugin-sdk/assemblyscript: test"
  (cd "$as_sdk" && npm test --silent)
  log "examples/plugins/assemblyscript/urgent-first.wasm"
  asc examples/plugins/assemblyscript/urgent-first.ts -o examples/plugins/assemblyscript/urgent-first.wasm
  node examples/plugins/assemblyscript/test.mjs
  log "target/plugins/hostile/assemblyscript.wasm"
  asc tests/data/plugins/hostile/assemblyscript/hostile.ts -o "$target_dir/hostile/assemblyscript.wasm"
else
  missing "node and npm not found: the AssemblyScript SDK, examples/plugins/assemblyscript and the AssemblyScript hostile plugin are not built"
fi

# Zig: from PyPI's ziglang wheel, in a venv outside the repository; zig.sh
# installs it when missing.
zig() { plugin-sdk/zig/zig.sh "$@"; }
rm -f examples/plugins/zig/urgent-first.wasm "$target_dir/hostile/zig.wasm"
if zig version >/dev/null; then
  zig_cache=(--cache-dir "$target_dir/zig-cache" --global-cache-dir "$target_dir/zig-cache")
  zig_wasm() { # output, root source file (a plugin importing the SDK as `arbiter`)
    zig build-exe "${zig_cache[@]}" -target wasm32-freestanding -fno-entry -rdynamic -O ReleaseSmall \
      --dep arbiter "-Mroot=$2" -Marbiter=plugin-sdk/zig/arbiter.zig "-femit-bin=$1"
  }
  log "plugin-sdk/zig and examples/plugins/zig: zig fmt, test"
  zig fmt --check plugin-sdk/zig examples/plugins/zig tests/data/plugins/hostile/zig
  zig test "${zig_cache[@]}" plugin-sdk/zig/test.zig
  zig test "${zig_cache[@]}" --dep arbiter -Mroot=examples/plugins/zig/urgent_first.zig \
    -Marbiter=plugin-sdk/zig/arbiter.zig
  log "examples/plugins/zig/urgent-first.wasm"
  zig_wasm examples/plugins/zig/urgent-first.wasm examples/plugins/zig/urgent_first.zig
  log "target/plugins/hostile/zig.wasm"
  zig_wasm "$target_dir/hostile/zig.wasm" tests/data/plugins/hostile/zig/hostile.zig
else
  missing "zig could not be installed (plugin-sdk/zig/zig.sh: python3 -m venv, pip install ziglang): the Zig SDK, examples/plugins/zig and the Zig hostile plugin are not built"
fi

# Every examples/plugins bundle that was built passes its own tests, and
# so do the placement policies (FGD with its committed module).
for bundle in examples/plugins/*/; do
  if [[ -f "$bundle/urgent-first.wasm" ]]; then
    log "arbiter policy test $bundle"
    cargo run --quiet --locked --bin arbiter -- policy test "$bundle"
  fi
done
for bundle in policies/placement-bestfit policies/placement-fgd; do
  log "arbiter policy test $bundle"
  cargo run --quiet --locked --bin arbiter -- policy test "$bundle"
done
