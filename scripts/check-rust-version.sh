#!/bin/sh
# The workspace's rust-version (Cargo.toml) is its true minimum: the README states it, the
# pinned toolchain (rust-toolchain.toml) is not older, and the whole workspace (every
# target: tests, benches, examples) builds with exactly that toolchain, which catches a
# language feature or a std API newer than it, and a locked dependency that needs more.
# Needs rustup (it installs the toolchain, minimal profile, when missing) and the network
# to static.rust-lang.org once. Usage: scripts/check-rust-version.sh
set -eu
cd "$(dirname "$0")/.."

v=$(sed -n 's/^rust-version = "\([0-9.]*\)"$/\1/p' Cargo.toml)
[ -n "$v" ] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
pinned=$(sed -n 's/^channel = "\([0-9.]*\)"$/\1/p' rust-toolchain.toml)

if ! grep -q "needs Rust $v or newer" README.md; then
    echo "README.md does not say the workspace needs Rust $v or newer" >&2
    exit 1
fi
older=$(printf '%s\n%s\n' "$v" "$pinned" | sort -V | head -n1)
if [ "$older" != "$v" ]; then
    echo "rust-toolchain.toml pins $pinned, older than rust-version $v" >&2
    exit 1
fi
rustup toolchain list | grep -q "^$v-" || rustup toolchain install "$v" --profile minimal
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/rust-$v" \
    cargo "+$v" check --locked --workspace --all-targets
echo "rust-version $v: README says it, the pin $pinned is not older, the workspace builds with $v"
