#!/bin/sh
# Benchmark: the cost of the caches' layers on a contained `true` (full default view), per
# backend: no cache, three caches through their per-call overlay layers (~/.npm,
# ~/.cargo/registry, ~/.cache: what the service does), and the same three as plain writable
# binds (a write grant of each: the alternative without a merge, and without any of its
# checks). The three plans run interleaved in a rotating order, N times each after 5
# warm-up runs; medians in microseconds. The merge of an empty layer is timed apart:
# `efr-sandbox run` of `true` with and without the caches.
# Usage: scripts/bench-caches.sh [N]   (builds efr-launch and efr-sandbox in release first;
# PROFILE=debug uses the debug build instead)
set -eu
N=${1:-50}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
PROFILE=${PROFILE:-release}
if [ "$PROFILE" = release ]; then
  cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
else
  cargo build -q -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
fi
EXE=$CARGO_TARGET_DIR/$PROFILE/efr-launch
SBX=$CARGO_TARGET_DIR/$PROFILE/efr-sandbox
D=$(mktemp -d /var/tmp/bench-caches.XXXXXX)
trap 'rm -rf "$D"' EXIT
for h in none layers binds; do
  mkdir -p "$D/$h/proj"
  git init -q "$D/$h/proj"
done
for h in layers binds; do
  mkdir -p "$D/$h/.npm/_cacache" "$D/$h/.cargo/registry/cache" "$D/$h/.cache/pip"
done
G="--grant write=$D/binds/.npm --grant write=$D/binds/.cargo/registry --grant write=$D/binds/.cache"
for b in native bwrap; do
  for h in none layers binds; do
    g=""; [ "$h" = binds ] && g=$G
    # shellcheck disable=SC2086
    (cd "$D/$h/proj" && HOME="$D/$h" "$SBX" run --project . --backend "$b" $g --plan-out "$D/plan-$h-$b.json" -- true)
  done
done
echo "layers in the plan: $(grep -c '"upper"' "$D/plan-layers-native.json")" >&2
one() { # plan: appends one timing (us) to $D/t-plan
  s=$(date +%s%N); "$EXE" --plan "$D/plan-$1.json" >/dev/null 2>&1; e=$(date +%s%N)
  echo $(( (e - s) / 1000 )) >> "$D/t-$1"
}
for p in none-native layers-native binds-native none-bwrap layers-bwrap binds-bwrap; do
  for w in 1 2 3 4 5; do "$EXE" --plan "$D/plan-$p.json" >/dev/null 2>&1; done
done
i=0
while [ $i -lt "$N" ]; do
  for b in native bwrap; do
    case $((i % 3)) in
      0) one none-$b; one layers-$b; one binds-$b ;;
      1) one layers-$b; one binds-$b; one none-$b ;;
      2) one binds-$b; one none-$b; one layers-$b ;;
    esac
  done
  i=$((i + 1))
done
# The whole CLI call, merge included (an empty layer of each cache).
run1() { # home backend
  s=$(date +%s%N); (cd "$D/$1/proj" && HOME="$D/$1" "$SBX" run --project . --backend "$2" -- true) >/dev/null 2>&1; e=$(date +%s%N)
  echo $(( (e - s) / 1000 )) >> "$D/r-$1-$2"
}
i=0
while [ $i -lt "$N" ]; do
  for b in native bwrap; do run1 none $b; run1 layers $b; done
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'runs: %d each, interleaved (median, microseconds)\n' "$N"
for b in native bwrap; do
  n=$(median "$D/t-none-$b"); l=$(median "$D/t-layers-$b"); w=$(median "$D/t-binds-$b")
  rn=$(median "$D/r-none-$b"); rl=$(median "$D/r-layers-$b")
  printf '%-7s efr-launch: no cache %6d  3 layers %6d (+%d)  3 binds %6d (+%d)\n' "$b" "$n" "$l" $((l - n)) "$w" $((w - n))
  printf '%-7s efr-sandbox run (merge included): no cache %6d  3 layers %6d (+%d)\n' "$b" "$rn" "$rl" $((rl - rn))
done
