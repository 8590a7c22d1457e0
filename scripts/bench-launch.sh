#!/bin/sh
# Benchmark: a contained `true` with the full default view (native and bwrap backends)
# against bare `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true`,
# in the same run. Prints the median of N runs (ms) and the ratio to bare bwrap.
# Usage: scripts/bench-launch.sh [N]   (builds efr-launch in release first)
set -eu
N=${1:-50}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-launch}
cargo build -q --release -p efr-launcher --bin efr-launch
EXE=$CARGO_TARGET_DIR/release/efr-launch
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir -p "$D/proj" "$D/tmp" "$D/scratch"
git init -q "$D/proj"
for b in native bwrap; do
  cat > "$D/plan-$b.json" <<J
{"version":1,"mode":"contained","backend":"$b","line":"true","cwd":"$D/proj","home":"$HOME",
 "projects":["$D/proj"],"tmp":"$D/tmp","scratch":"$D/scratch",
 "read_only_inside":["$D/proj/.git/hooks/","$D/proj/.git/config","$D/proj/.envrc","$D/proj/.vscode/"],
 "masks":["$HOME/.ssh","$HOME/.aws","$HOME/.gnupg","$HOME/.netrc"]}
J
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_ms() { # command...
  i=0
  while [ $i -lt "$N" ]; do
    s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N)
    echo $(( (e - s) / 1000 )); i=$((i + 1))
  done | median
}
bare=$(time_ms bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true)
nat=$(time_ms "$EXE" --plan "$D/plan-native.json")
bw=$(time_ms "$EXE" --plan "$D/plan-bwrap.json")
awk -v b="$bare" -v n="$nat" -v w="$bw" -v N="$N" 'BEGIN {
  printf "runs: %d (median, microseconds)\n", N
  printf "bare bwrap            %8d  1.00\n", b
  printf "efr-launch native     %8d  %.2f\n", n, n / b
  printf "efr-launch bwrap      %8d  %.2f\n", w, w / b
}'
