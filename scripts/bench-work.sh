#!/bin/sh
# Benchmark: real work inside a contained call, two efr-sandbox binaries against each other
# and against the bare command, in one run, reported as ratios.
#
# Usage: [WORKLOADS="cargo npm"] scripts/bench-work.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#        (ROUNDS defaults to 5, WORKLOADS to all three)
#
# Three workloads, generated in a fresh temp dir that is also the one project root of every
# contained call (`$BIN run --project "$W" -- LINE`):
#   cargo: `cargo build --offline` (debug) of a small crate with a few modules and two
#          local path dependencies, `target/` removed before each build (a clean build);
#   npm:   `npm install --offline` of 300 small local packages given as `file:` tarballs
#          (the lockfile made once, untimed), `node_modules/` removed before each install;
#   files: 2000 times create-and-write, rename, chmod and remove of a file (python3): the
#          calls the init supervises, back to back.
# Each round runs every workload bare, under BEFORE and under AFTER, interleaved in a
# rotating order (bare/before/after, before/after/bare, after/bare/before), so a slow
# moment of a shared machine costs all three alike. Wall time of the whole command
# (`date +%s%N` around it), median over the rounds, and the median of the per-round
# after/before ratios (`paired a/b`); one untimed warm-up of each first
# (page cache, the npm lockfile).
#
# It writes only inside its temp dir (under $TMPDIR or /tmp): the cargo home, the npm cache
# and config and both projects live there, and the dir is removed on exit. Works as root
# and as a user (the binaries need what `efr-sandbox run` needs; nothing here is root's).
set -eu

usage() {
  echo "usage: $0 BEFORE_BIN AFTER_BIN [ROUNDS]" >&2
  exit 2
}
[ $# -ge 2 ] && [ $# -le 3 ] || usage
ROUNDS=${3:-5}
# WORKLOADS (space-separated, of cargo npm files) runs only those; all three by default.
WORKLOADS=${WORKLOADS:-cargo npm files}
for wl in $WORKLOADS; do
  case $wl in cargo | npm | files) ;; *) echo "$0: unknown workload $wl" >&2; exit 2 ;; esac
done
case $ROUNDS in '' | *[!0-9]*) usage ;; esac
[ "$ROUNDS" -ge 1 ] || usage

# Absolute paths: the calls run from other directories.
abspath() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s/%s\n' "$(pwd)" "$1" ;;
  esac
}
BEFORE=$(abspath "$1")
AFTER=$(abspath "$2")
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "$0: not an executable: $b" >&2; exit 2; }
done

# Each binary must use its own launcher. EFR_LAUNCH would make both use the same one; an
# efr-launch next to a binary (or its parent dir) or on PATH is taken instead of the
# binary's built-in launcher, so say which one each binary gets.
unset EFR_LAUNCH
for b in "$BEFORE" "$AFTER"; do
  d=$(dirname "$b")
  for c in "$d/efr-launch" "$(dirname "$d")/efr-launch"; do
    [ -f "$c" ] && echo "note: $b uses the launcher $c (next to it), not its built-in one" >&2 && break
  done
done
if command -v efr-launch >/dev/null 2>&1; then
  echo "note: efr-launch on PATH ($(command -v efr-launch)) is used by a binary without one next to it" >&2
fi

for t in cargo rustc npm node git; do
  command -v "$t" >/dev/null 2>&1 || { echo "$0: needs $t" >&2; exit 2; }
done
# `date +%s%N` must give nanoseconds (GNU date; busybox prints a literal N).
case $(date +%s%N) in *[!0-9]*) echo "$0: date +%s%N gives no nanoseconds" >&2; exit 2 ;; esac

# The toolchain's own cargo and rustc, not the rustup proxies: the proxies would look up
# the toolchain on every call and could write rustup state in the home.
SYSROOT=$(rustc --print sysroot)
CARGO_BIN=$SYSROOT/bin/cargo
RUSTC_BIN=$SYSROOT/bin/rustc
[ -x "$CARGO_BIN" ] || CARGO_BIN=$(command -v cargo)
[ -x "$RUSTC_BIN" ] || RUSTC_BIN=$(command -v rustc)

W=$(mktemp -d "${TMPDIR:-/tmp}/efr-bench-work.XXXXXX")
# npm can leave read-only files; make everything removable before removing it.
cleanup() { chmod -R u+rwX "$W" 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The project root: a git repository, as a real project (the launcher protects its git
# dir and shows git the placeholders' names in info/exclude; that is part of the cost).
git init -q "$W"
mkdir -p "$W/home" "$W/logs"

# --- the cargo project ----------------------------------------------------------------
R=$W/rust
mkdir -p "$R/src" "$R/alpha/src" "$R/beta/src"
cat > "$R/Cargo.toml" <<'EOF'
[package]
name = "benchapp"
version = "0.1.0"
edition = "2021"

[dependencies]
alpha = { path = "alpha" }
beta = { path = "beta" }
EOF
for c in alpha beta; do
  cat > "$R/$c/Cargo.toml" <<EOF
[package]
name = "$c"
version = "0.1.0"
edition = "2021"
EOF
done
# Some generic code and derives, so the build has real work (type checking, codegen of
# monomorphised code) rather than only process start-up.
gen_module() { # name: a module with a struct, a trait impl and generic functions
  cat <<EOF
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Item$1 {
    pub id: u64,
    pub name: String,
    pub tags: Vec<String>,
}

impl fmt::Display for Item$1 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.id, self.name, self.tags.join(","))
    }
}

pub fn index<T: Clone + Ord, K: Ord + Clone>(items: &[T], key: impl Fn(&T) -> K) -> BTreeMap<K, Vec<T>> {
    let mut m: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for i in items {
        m.entry(key(i)).or_default().push(i.clone());
    }
    m
}

pub fn make(n: u64) -> Vec<Item$1> {
    (0..n)
        .map(|i| Item$1 { id: i, name: format!("n{}", i % 7), tags: vec![format!("t{}", i % 3)] })
        .collect()
}

pub fn summary(n: u64) -> String {
    let items = make(n);
    let by_name = index(&items, |i| i.name.clone());
    let by_tag = index(&items, |i| i.tags.first().cloned().unwrap_or_default());
    let longest = items.iter().map(|i| i.to_string()).max_by_key(|s| s.len()).unwrap_or_default();
    format!("{} {} {} {}", items.len(), by_name.len(), by_tag.len(), longest)
}
EOF
}
MODS="one two three four five six seven eight nine ten"
for m in $MODS; do gen_module "$m" > "$R/src/$m.rs"; done
gen_module Alpha > "$R/alpha/src/lib.rs"
gen_module Beta > "$R/beta/src/lib.rs"
{
  for m in $MODS; do echo "mod $m;"; done
  echo 'fn main() {'
  for m in $MODS; do echo "    println!(\"{}\", $m::summary(10));"; done
  echo '    println!("{}", alpha::summary(50));'
  echo '    println!("{}", beta::summary(60));'
  echo '}'
} > "$R/src/main.rs"

# --- the npm project ------------------------------------------------------------------
N=$W/npm
NPKG=300
mkdir -p "$N/tarballs" "$W/pkgsrc"
deps=""
i=1
while [ $i -le $NPKG ]; do
  p=$(printf 'p%03d' $i)
  d=$W/pkgsrc/$p/package
  mkdir -p "$d/lib"
  printf '{"name":"%s","version":"1.0.0","main":"index.js","license":"MIT"}\n' "$p" > "$d/package.json"
  printf 'module.exports = require("./lib/impl.js");\n' > "$d/index.js"
  printf 'exports.name = "%s";\nexports.add = (a, b) => a + b;\n' "$p" > "$d/lib/impl.js"
  printf '# %s\n\nA generated package for the benchmark.\n' "$p" > "$d/README.md"
  # An npm tarball holds the package under `package/`, as `npm pack` makes it.
  tar -czf "$N/tarballs/$p-1.0.0.tgz" -C "$W/pkgsrc/$p" package
  deps="$deps${deps:+,}\"$p\":\"file:tarballs/$p-1.0.0.tgz\""
  i=$((i + 1))
done
rm -rf "$W/pkgsrc"
printf '{"name":"benchnpm","version":"1.0.0","private":true,"dependencies":{%s}}\n' "$deps" > "$N/package.json"
: > "$W/home/npmrc"
: > "$W/home/npmrc-global"

# The two commands, as scripts in the project, so a contained call (whose environment is
# scrubbed) and the bare run get the same environment: every home, cache and config
# inside $W, nothing from the user's.
cat > "$W/cargo-build.sh" <<EOF
set -eu
export CARGO_HOME="$W/home/cargo" RUSTC="$RUSTC_BIN" CARGO_TERM_COLOR=never
cd "$R"
exec "$CARGO_BIN" build --offline -q
EOF
cat > "$W/npm-install.sh" <<EOF
set -eu
export npm_config_cache="$W/home/npm-cache" npm_config_userconfig="$W/home/npmrc" \\
  npm_config_globalconfig="$W/home/npmrc-global" npm_config_update_notifier=false \\
  npm_config_fund=false npm_config_audit=false npm_config_progress=false \\
  npm_config_loglevel=error
cd "$N"
exec npm install --offline
EOF

# A third workload: the calls the init supervises, one after another (create and write,
# rename, chmod, remove 2000 files, in the project), the worst case for its round trip.
PY_BIN=$(command -v python3)
cat > "$W/files.py" <<'EOF'
import os
os.makedirs("files-d", exist_ok=True)
for i in range(2000):
    p = "files-d/f%d" % i
    with open(p, "w") as f:
        f.write("x")
    os.rename(p, p + ".r")
    os.chmod(p + ".r", 0o600)
    os.unlink(p + ".r")
EOF
cat > "$W/files.sh" <<EOF
set -eu
cd "$W"
exec "$PY_BIN" "$W/files.py"
EOF

prep() { # workload: what comes before each timed run
  case $1 in
    files) rm -rf "$W/files-d" ;;
    cargo) rm -rf "$R/target" ;;
    npm) chmod -R u+rwX "$N/node_modules" 2>/dev/null || true; rm -rf "$N/node_modules" ;;
  esac
}
script() {
  case $1 in
    cargo) echo "$W/cargo-build.sh" ;;
    npm) echo "$W/npm-install.sh" ;;
    files) echo "$W/files.sh" ;;
  esac
}

run() { # runner workload: one run, output to a log; fails the benchmark when it fails
  log=$W/logs/$1-$2.log
  case $1 in
    bare) (cd "$W" && sh "$(script "$2")") > "$log" 2>&1 ;;
    before) (cd "$W" && "$BEFORE" run --project "$W" -- "sh $(script "$2")") > "$log" 2>&1 ;;
    after) (cd "$W" && "$AFTER" run --project "$W" -- "sh $(script "$2")") > "$log" 2>&1 ;;
  esac || {
    echo "$0: $2 failed ($1):" >&2
    cat "$log" >&2
    exit 1
  }
}

timed() { # runner workload: appends one timing (ms) to $W/t-runner-workload
  prep "$2"
  s=$(date +%s%N)
  run "$1" "$2"
  e=$(date +%s%N)
  echo $(((e - s) / 1000000)) >> "$W/t-$1-$2"
}

# The first npm install makes the lockfile; every timed one installs from it.
echo "warm-up: one untimed run of each workload, bare, before and after" >&2
for wl in $WORKLOADS; do
  for r in bare before after; do prep "$wl"; run "$r" "$wl"; done
done

# The work really happened, in the last (contained) warm-up run of each: all packages
# installed, the program built and running.
case " $WORKLOADS " in *" npm "*)
  got=$(find "$N/node_modules" -mindepth 1 -maxdepth 1 -name 'p*' | wc -l)
  [ "$got" -eq "$NPKG" ] || { echo "$0: npm installed $got packages, not $NPKG" >&2; exit 1; } ;;
esac
case " $WORKLOADS " in *" cargo "*)
  "$R/target/debug/benchapp" > /dev/null || { echo "$0: the cargo build gave no working program" >&2; exit 1; } ;;
esac

i=0
while [ $i -lt "$ROUNDS" ]; do
  for wl in $WORKLOADS; do
    case $((i % 3)) in
      0) timed bare "$wl"; timed before "$wl"; timed after "$wl" ;;
      1) timed before "$wl"; timed after "$wl"; timed bare "$wl" ;;
      2) timed after "$wl"; timed bare "$wl"; timed before "$wl" ;;
    esac
  done
  i=$((i + 1))
  echo "round $i of $ROUNDS done" >&2
done

median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The median over the rounds of the ratio of two runners' times in the same round (a slow
# moment of the machine costs both runs of a round alike, so this is steadier than the
# ratio of the medians).
paired() { paste "$1" "$2" | awk '{print $1 / $2}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
echo "before: $BEFORE"
echo "after:  $AFTER"
printf 'rounds: %d, interleaved; median wall time (ms)\n' "$ROUNDS"
printf '%-28s %8s %8s %8s %12s %12s %13s %14s\n' workload bare before after after/before after/bare before/bare 'paired a/b'

for wl in $WORKLOADS; do
  b=$(median "$W/t-bare-$wl"); x=$(median "$W/t-before-$wl"); y=$(median "$W/t-after-$wl")
  case $wl in
    cargo) name="cargo build (clean, debug)" ;;
    npm) name="npm install ($NPKG file: pkgs)" ;;
    files) name="2000 x (write,mv,chmod,rm)" ;;
  esac
  p=$(paired "$W/t-after-$wl" "$W/t-before-$wl")
  awk -v n="$name" -v b="$b" -v x="$x" -v y="$y" -v p="$p" 'BEGIN {
    printf "%-28s %8d %8d %8d %12.2f %12.2f %13.2f %14s\n", n, b, x, y, y / x, y / b, x / b, p
  }'
done
