#!/bin/sh
# The surface scan's false positives on a developer's home (docs/benchmarks.md): a home made
# here holding a clone of this repository, a `cargo new` project built, a Python virtual
# environment with pytest installed, an npm project with a few packages installed, and
# nothing else. None of its files holds a secret, so every question the scan asks is a false
# one. Prints, for each binary given, the files in the home, the files outside installed
# packages, build outputs and git's store ("source"), and the questions, with the questions
# per 10,000 source files.
#
#   scripts/surface-false-positives.sh BIN [BIN...]     (efr-sandbox binaries to compare)
#
# Needs git, cargo, python3 with venv and pip, npm, and the registries (PyPI, npm).
set -eu
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d /var/tmp/efr-surface-fp.XXXXXX)
trap 'rm -rf "$work"' EXIT
home=$work/home
mkdir -p "$home"
git clone --quiet "$repo" "$home/efr-sandbox"
# cargo and rustup keep reading their own homes, not the made one.
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
(cd "$home" && HOME=$home cargo new --quiet hello && cd hello && HOME=$home cargo build --quiet --offline)
python3 -m venv "$home/py/venv"
"$home/py/venv/bin/pip" install --quiet pytest
mkdir -p "$home/web" && (cd "$home/web" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund express lodash left-pad >/dev/null)
total=$(find "$home" -type f | wc -l)
source=$(find "$home" \( -name node_modules -o -name .git -o -name target -o -name venv -o -name .cargo \) -prune -o -type f -print | wc -l)
echo "home: $total files, $source outside installed packages, build outputs and git's store"
for bin in "$@"; do
  state=$(mktemp -d "$work/state.XXXXXX")
  out=$(HOME=$home XDG_STATE_HOME=$state XDG_CONFIG_HOME=$work/config "$bin" surface --json)
  q=$(printf '%s' "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(1 for f in r.get("files", []) if f.get("question_id")))')
  partial=$(printf '%s' "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r.get("partial") or "complete")')
  per=$(python3 -c "print(round($q * 10000 / $source, 1))")
  echo "$bin: $q questions ($per per 10,000 source files; scan $partial)"
  printf '%s' "$out" | python3 -c 'import json,sys; [print("  ", f["path"], "-", f["what"]) for f in json.load(sys.stdin).get("files", [])]'
done
