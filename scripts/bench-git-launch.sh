#!/bin/sh
# Benchmark: what the git parts of a call's preparation and finish cost, this build against
# another (BEFORE=DIR, a directory holding that build's release efr-sandbox and efr-launch),
# in the same rounds. Each case is `efr-sandbox run --project P --backend native -- LINE`
# without a service (EFR_SANDBOX_NO_SERVICE=1: the CLI builds the view, runs the call and
# folds the finish itself), a fresh HOME, stdin from /dev/null:
#   plain     a repository as `git init` makes it (the view reads its config itself), `true`
#   include   the same with `include.path` in .git/config (the view asks git: rev-parse and
#             config --list, side by side) and a nested repository below it, `true`
#   status    a repository of 5,000 tracked files, `git status` (git rewrites the index:
#             the finish compares the index flags before and after)
# Interleaved in a rotating order, 3 warm-up runs of each; prints medians (microseconds)
# and the median of the per-round ratios ours/before.
# Usage: BEFORE=DIR scripts/bench-git-launch.sh [N]   (builds this tree's release first;
# NO_BUILD=1 skips that)
set -eu
N=${1:-50}
cd "$(dirname "$0")/.."
: "${BEFORE:?BEFORE=DIR names the other build's release directory}"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
OURS=$CARGO_TARGET_DIR/release
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir -p "$D/home" "$D/config"
g() { git -c user.name=b -c user.email=b@x "$@"; }
mk() { mkdir -p "$1" && g -C "$1" init -q && echo a > "$1/a" && g -C "$1" add a && g -C "$1" commit -qm a; }
mk "$D/plain"
mk "$D/include"
printf '[include]\n\tpath = ../.gitconfig-shared\n' >> "$D/include/.git/config"
printf '[color]\n\tui = auto\n' > "$D/include/.gitconfig-shared"
mk "$D/include/libs/inner"
mk "$D/status"
(cd "$D/status" && for i in $(seq 1 50); do mkdir -p "d$i"; for j in $(seq 1 100); do echo "$i $j" > "d$i/f$j"; done; done && g add . && g commit -qm files)
echo "status index: $(stat -c %s "$D/status/.git/index") bytes" >&2
call() { # BUILD CASE
  line=true; [ "$2" = status ] && line="git status --porcelain"
  (cd "$D/$2" && HOME=$D/home XDG_CONFIG_HOME=$D/config EFR_SANDBOX_NO_SERVICE=1 EFR_LAUNCH=$1/efr-launch \
    "$1/efr-sandbox" run --project . --backend native -- $line </dev/null >/dev/null 2>&1)
}
one() { # BUILD-NAME CASE
  dir=$OURS; [ "$1" = before ] && dir=$BEFORE
  s=$(date +%s%N); call "$dir" "$2"; e=$(date +%s%N)
  echo $(( (e - s) / 1000 )) >> "$D/t-$1-$2"
}
for c in plain include status; do for w in 1 2 3; do call "$OURS" $c; call "$BEFORE" $c; done; done
i=0
while [ $i -lt "$N" ]; do
  for c in plain include status; do
    if [ $((i % 2)) = 0 ]; then one ours $c; one before $c; else one before $c; one ours $c; fi
  done
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
paired() { paste "$1" "$2" | awk '{print $1 / $2}' | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
echo "runs: $N each, interleaved (median, microseconds)"
for c in plain include status; do
  printf "%-8s before %8d  ours %8d  ours/before %s (paired)\n" "$c" \
    "$(median "$D/t-before-$c")" "$(median "$D/t-ours-$c")" "$(paired "$D/t-ours-$c" "$D/t-before-$c")"
done
echo "user $(id -un), load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
