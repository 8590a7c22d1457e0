#!/bin/sh
# Benchmark: one call's proxy flood against its neighbours. A release `efr-sandbox serve`
# started as a systemd session starts it (soft open-file limit 1024, the hard limit as it
# is); in one run, rounds alternate quiet and flood: the RPC's `sandbox.status` latency and
# a well-behaved call's (`sandbox.launch` of a line making 20 requests through its own
# proxy), alone and while a neighbour call holds 3,000 connections to its proxy and reopens
# each one ended. Prints p50/p99 (ms) and the ratios flood/quiet (goal: at most 1.5 at p99).
# Usage: scripts/bench-isolation.sh [ROUNDS] [SAMPLES]   (NO_BUILD=1 skips the release build)
set -eu
ROUNDS=${1:-3}
SAMPLES=${2:-15}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
BIN=$CARGO_TARGET_DIR/release
D=$(mktemp -d /var/tmp/efr-bench-isolation.XXXXXX)
mkdir -p "$D/home" "$D/config" "$D/proj" "$D/run"
chmod 700 "$D/run"
cleanup() {
  [ -f "$D/pid" ] && kill "$(cat "$D/pid")" 2>/dev/null || true
  rm -rf "$D"
}
trap cleanup EXIT
HARD=$(ulimit -Hn)
env HOME="$D/home" XDG_CONFIG_HOME="$D/config" XDG_RUNTIME_DIR="$D/run" \
  prlimit --nofile=1024:"$HARD" "$BIN/efr-sandbox" serve --socket "$D/run/sandbox.sock" \
  2>"$D/serve.log" &
echo $! >"$D/pid"
python3 scripts/bench-isolation.py "$D/run/sandbox.sock" "$D/proj" "$ROUNDS" "$SAMPLES" "${MODES:-spin,spin4,conns,requests,heads,requests-own,heads-own}" "$BIN/efr-sandbox"
if grep -q "Too many open files" "$D/serve.log"; then
  echo "the service ran out of open files:"; grep -c "Too many open files" "$D/serve.log"
fi
