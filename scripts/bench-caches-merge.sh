#!/bin/sh
# Benchmark: what the verified cache merge costs a real install, side by side with another
# build (the one before the merge verified anything) in one run, against the real
# registries: a contained `cargo fetch` of 30 crates from crates.io and a contained
# `npm install` of 50 packages from the npm registry, each in a fresh home whose cache is
# empty (so every crate and package is downloaded, then merged after the call), through
# `efr-sandbox run` with the grants the classifier proposes. The two builds alternate, the
# order turning each round; the whole call is timed (the merge, and this build's fetches
# from the registry to verify, included), and apart from it what follows the line's end
# (the merge and the call's end: far less noisy than the downloads). Medians and their
# ratio.
# Usage: BEFORE=<target/release of the other build> scripts/bench-caches-merge.sh [N]
# (builds this tree's efr-launch and efr-sandbox in release first). Needs the network.
set -eu
N=${1:-5}
: "${BEFORE:?BEFORE=<the other build's target/release dir>}"
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
OURS=$CARGO_TARGET_DIR/release/efr-sandbox
THEIRS=$BEFORE/efr-sandbox
SYSROOT=$(rustc --print sysroot)
CARGO=$SYSROOT/bin/cargo
D=$(mktemp -d /var/tmp/bench-merge.XXXXXX)
trap 'rm -rf "$D"' EXIT

# The cargo project: 26 crates and their dependencies, 30 or so (only fetched), locked once.
mkdir -p "$D/cargo/src"
cat > "$D/cargo/Cargo.toml" <<'EOF'
[package]
name = "bench"
version = "0.1.0"
edition = "2021"

[dependencies]
itoa = "=1.0.11"
ryu = "=1.0.18"
memchr = "=2.7.4"
cfg-if = "=1.0.0"
bitflags = "=2.6.0"
lazy_static = "=1.5.0"
once_cell = "=1.20.2"
hex = "=0.4.3"
base64 = "=0.22.1"
smallvec = "=1.13.2"
either = "=1.13.0"
scopeguard = "=1.2.0"
fnv = "=1.0.7"
unicode-ident = "=1.0.13"
static_assertions = "=1.1.0"
byteorder = "=1.5.0"
adler = "=1.0.2"
semver = "=1.0.23"
log = "=0.4.22"
percent-encoding = "=2.3.1"
heck = "=0.5.0"
strsim = "=0.11.1"
humantime = "=2.1.0"
glob = "=0.3.1"
md-5 = "=0.10.6"
utf-8 = "=0.7.6"
EOF
echo 'fn main() {}' > "$D/cargo/src/main.rs"
(cd "$D/cargo" && HOME="$D/lockhome" "$CARGO" generate-lockfile -q)
CRATES=$(( $(grep -c '^name = ' "$D/cargo/Cargo.lock") - 1 ))

# The npm project: 50 packages, locked once.
mkdir -p "$D/npm"
cat > "$D/npm/package.json" <<'EOF'
{"name": "bench", "version": "1.0.0", "private": true, "dependencies": {
 "is-number": "7.0.0", "is-odd": "3.0.1", "left-pad": "1.3.0", "ms": "2.1.3",
 "debug": "4.3.7", "escape-string-regexp": "4.0.0", "chalk": "4.1.2", "semver": "7.6.3",
 "commander": "12.1.0", "uuid": "10.0.0", "lodash.get": "4.4.2", "lodash.set": "4.3.2",
 "minimist": "1.2.8", "yallist": "4.0.0", "lru-cache": "6.0.0", "color-name": "1.1.4",
 "color-convert": "2.0.1", "has-flag": "4.0.0", "supports-color": "7.2.0",
 "ansi-styles": "4.3.0", "ansi-regex": "5.0.1", "strip-ansi": "6.0.1",
 "string-width": "4.2.3", "emoji-regex": "8.0.0", "is-fullwidth-code-point": "3.0.0",
 "wrap-ansi": "7.0.0", "cliui": "8.0.1", "y18n": "5.0.8", "get-caller-file": "2.0.5",
 "require-directory": "2.1.1", "escalade": "3.2.0", "yargs-parser": "21.1.1",
 "balanced-match": "1.0.2", "brace-expansion": "2.0.1", "minimatch": "9.0.5",
 "picomatch": "2.3.1", "fill-range": "7.1.1", "to-regex-range": "5.0.1",
 "braces": "3.0.3", "kind-of": "6.0.3", "isobject": "3.0.1", "inherits": "2.0.4",
 "safe-buffer": "5.2.1", "once": "1.4.0", "wrappy": "1.0.2", "path-key": "3.1.1",
 "shebang-regex": "3.0.0", "which": "2.0.2", "isexe": "2.0.0", "argparse": "2.0.1"
}}
EOF
(cd "$D/npm" && HOME="$D/lockhome" npm install -s --package-lock-only --no-audit --no-fund >/dev/null)
PACKAGES=$(grep -c '"resolved"' "$D/npm/package-lock.json")

# The registries' names mapped to the addresses they resolve to now (`[network.resolve]`):
# where the network gives them addresses in a special range (a machine behind an
# inspecting proxy), the egress proxy and the merge's fetches dial them only so; elsewhere
# the same config changes nothing but one DNS lookup, for both builds alike.
CONFIG="[network.resolve]"
for host in index.crates.io static.crates.io registry.npmjs.org; do
  a=$(getent ahostsv4 "$host" | awk 'NR == 1 {print $1}')
  [ -n "$a" ] && CONFIG="$CONFIG
\"$host\" = \"$a\""
done

# One run: a fresh home with an empty cache, the call, the time in ms.
one() { # build(ours|theirs) tool(cargo|npm)
  exe=$OURS; [ "$1" = theirs ] && exe=$THEIRS
  h=$D/home-$1-$2; rm -rf "$h"; mkdir -p "$h/proj" "$h/config/efr"
  printf '%s\n' "$CONFIG" > "$h/config/efr/config.toml"
  if [ "$2" = cargo ]; then
    mkdir -p "$h/.cargo/registry"; : > "$h/.cargo/.package-cache"; : > "$h/.cargo/.package-cache-mutate"
    cp -r "$D/cargo/." "$h/proj/"
    line="RUSTC=$SYSROOT/bin/rustc $CARGO fetch -q && date +%s%N > line-end"
    grants="--grant host=index.crates.io --grant host=static.crates.io"
  else
    mkdir -p "$h/.npm"
    cp "$D/npm/package.json" "$D/npm/package-lock.json" "$h/proj/"
    line="npm ci -s --no-audit --no-fund && date +%s%N > line-end"
    grants="--grant host=registry.npmjs.org"
  fi
  s=$(date +%s%N)
  # shellcheck disable=SC2086
  (cd "$h/proj" && env -u CARGO_HOME -u CARGO_TARGET_DIR HOME="$h" XDG_CONFIG_HOME="$h/config" \
     "$exe" run --project . $grants -- "$line") >"$D/out" 2>&1 || { cat "$D/out" >&2; exit 1; }
  e=$(date +%s%N)
  echo $(( (e - s) / 1000000 )) >> "$D/t-$1-$2"
  # After the line (it writes the time it ended in the project): the merge (and this
  # build's fetches to verify it), the call's end.
  echo $(( (e - $(cat "$h/proj/line-end")) / 1000000 )) >> "$D/a-$1-$2"
  # What reached the real cache: .crate files, or npm index buckets.
  if [ "$2" = cargo ]; then
    find "$h/.cargo/registry/cache" -name '*.crate' | wc -l > "$D/m-$1-$2"
  else
    find "$h/.npm/_cacache/index-v5" -type f 2>/dev/null | wc -l > "$D/m-$1-$2"
  fi
}
for t in cargo npm; do one ours $t; one theirs $t; done   # warm-up (DNS, TLS, CDN)
rm -f "$D"/t-*
i=0
while [ "$i" -lt "$N" ]; do
  for t in cargo npm; do
    if [ $((i % 2)) = 0 ]; then one ours $t; one theirs $t; else one theirs $t; one ours $t; fi
  done
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'runs: %d each, alternating (median ms); cargo fetch of %d crates, npm ci of %d packages\n' \
  "$N" "$CRATES" "$PACKAGES"
for t in cargo npm; do
  o=$(median "$D/t-ours-$t"); b=$(median "$D/t-theirs-$t")
  printf '%-6s ours %6d  before %6d  ours/before %s\n' "$t" "$o" "$b" \
    "$(awk -v o="$o" -v b="$b" 'BEGIN {printf "%.3f", o / b}')"
  printf '%-6s all ours: %s\n%-6s all before: %s\n' "$t" "$(sort -n "$D/t-ours-$t" | tr '\n' ' ')" \
    "$t" "$(sort -n "$D/t-theirs-$t" | tr '\n' ' ')"
  ao=$(median "$D/a-ours-$t"); ab=$(median "$D/a-theirs-$t")
  printf '%-6s after the line (merge, end): ours %6d  before %6d  (+%d ms)\n' "$t" "$ao" "$ab" $((ao - ab))
  printf '%-6s merged into the real cache by the last run: ours %s, before %s\n' "$t" \
    "$(cat "$D/m-ours-$t")" "$(cat "$D/m-theirs-$t")"
done
