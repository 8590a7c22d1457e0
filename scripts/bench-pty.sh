#!/bin/sh
# Benchmark: the call's own pty on large output. Every command runs on a terminal made by
# an outer `script -qfec CMD /dev/null` (its output to /dev/null), so the launcher finds a
# terminal on stdio and relays the call's pty through its escape filter. Compared, in the
# same rounds:
#   ours native / ours bwrap   efr-launch (release) running `cat FILE` contained
#   peer                       `script -qfec 'bwrap ... cat FILE'`: bare bwrap with a pty
#                              relayed by script(1), the same layers as ours (an inner pty
#                              and a relay to the outer one)
#   direct                     bare bwrap writing to the outer terminal (no inner pty;
#                              for scale only)
# FILE is 200 MB of text, once plain (base64 lines) and once coloured (SGR sequences and
# UTF-8 on every line: the filter's slow path). The same N for each, one warm-up run of
# each, interleaved in a rotating order within every round. Prints the median and the
# fastest run (ms) of each; its ratio to the peer: the median of the ratios to the peer's
# run in the same round, and fastest to fastest.
# Usage: scripts/bench-pty.sh [N]   (builds efr-launch and efr-sandbox in release first)
set -eu
N=${1:-5}
MB=${MB:-200}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
EXE=$CARGO_TARGET_DIR/release/efr-launch
SBX=$CARGO_TARGET_DIR/release/efr-sandbox
D=$(mktemp -d /var/tmp/efr-bench-pty.XXXXXX)
trap 'rm -rf "$D"' EXIT
mkdir -p "$D/proj"
git init -q "$D/proj"
python3 - "$D/proj" "$MB" <<'EOF'
import base64, os, sys
d, mb = sys.argv[1], int(sys.argv[2])
n = mb * 1000 * 1000
chunk = base64.encodebytes(os.urandom(3 << 20))
with open(os.path.join(d, "plain.txt"), "wb") as f:
    left = n
    while left > 0:
        f.write(chunk[:left]); left -= len(chunk)
line = "\x1b[1;32m{:08d}\x1b[0m \x1b[34mhéllo wörld — ✓ ← 日本語\x1b[0m \x1b[2mdone\x1b[0m\n"
chunk = "".join(line.format(i) for i in range(20000)).encode()
with open(os.path.join(d, "color.txt"), "wb") as f:
    left = n
    while left > 0:
        f.write(chunk[:left]); left -= len(chunk)
EOF
for b in native bwrap; do
  for f in plain color; do
    (cd "$D/proj" && "$SBX" run --project . --backend "$b" --plan-out "$D/plan-$b-$f.json" -- "cat $f.txt")
  done
done
BW="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --chdir $D/proj"
outer() { script -qfec "$1" /dev/null </dev/null >/dev/null; }
run() { # name file
  case $1 in
    nat) outer "$EXE --plan $D/plan-native-$2.json" ;;
    bw) outer "$EXE --plan $D/plan-bwrap-$2.json" ;;
    peer) outer "script -qfec '$BW cat $2.txt' /dev/null" ;;
    direct) outer "$BW cat $2.txt" ;;
  esac
}
one() { # name file: appends one timing (ms) to $D/t-name-file
  s=$(date +%s%N); run "$1" "$2"; e=$(date +%s%N)
  echo $(( (e - s) / 1000000 )) >> "$D/t-$1-$2"
}
for f in plain color; do for c in nat bw peer direct; do run $c $f; done; done
i=0
while [ $i -lt "$N" ]; do
  for f in plain color; do
    case $((i % 4)) in
      0) one nat $f; one bw $f; one peer $f; one direct $f ;;
      1) one peer $f; one direct $f; one nat $f; one bw $f ;;
      2) one bw $f; one peer $f; one direct $f; one nat $f ;;
      3) one direct $f; one nat $f; one bw $f; one peer $f ;;
    esac
  done
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
least() { sort -n "$1" | head -1; }
# The ratio to the peer's run of the same round, for each round (a slow period of the
# machine hits both), then its median.
paired() { paste "$1" "$2" | awk '{printf "%.4f\n", $1 / $2}' > "$D/r"; median "$D/r"; }
echo "runs: $N each, interleaved; $MB MB per run"
echo "  (ms: median, fastest; ratio to the peer: median of the per-round ratios, fastest/fastest)"
for f in plain color; do
  echo "$f text"
  pl=$(least "$D/t-peer-$f")
  for c in peer nat bw direct; do
    case $c in
      peer) name="peer (script + bwrap)" ;;
      nat) name="efr-launch native" ;;
      bw) name="efr-launch bwrap" ;;
      direct) name="direct (no inner pty)" ;;
    esac
    m=$(median "$D/t-$c-$f"); l=$(least "$D/t-$c-$f"); r=$(paired "$D/t-$c-$f" "$D/t-peer-$f")
    awk -v n="$name" -v m="$m" -v l="$l" -v r="$r" -v pl="$pl" \
      'BEGIN { printf "  %-24s %6d %6d   %.3f %.3f\n", n, m, l, r, l / pl }'
  done
done
