#!/bin/sh
# Benchmark: the cost of a bus filter. A contained `true` through `efr-sandbox run` with a
# `bus_filter=session` grant (one xdg-dbus-proxy started for the call, ready on its --fd
# byte, ended with it) against the same call without the grant, in the same run: a
# private dbus-daemon started here is the session bus, N runs of each after 3 warm-up runs,
# the two interleaved (alternating which goes first) so a slow period hits both alike.
# Prints the medians (ms), their difference and ratio, and the median per-round difference.
# Usage: scripts/bench-bus.sh [N] [BACKEND]   (N defaults to 50, BACKEND to native; builds
# efr-launch and efr-sandbox in release first; SBX=PATH measures that efr-sandbox instead,
# without a build: two builds compared in one sitting)
set -eu
N=${1:-50}
B=${2:-native}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${SBX:-}" ]; then
  cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
  SBX=$CARGO_TARGET_DIR/release/efr-sandbox
fi
D=$(mktemp -d)
cleanup() { [ -n "${BUSPID:-}" ] && kill "$BUSPID" 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
mkdir -p "$D/proj" "$D/home"
cat > "$D/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=$D/bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
EOF
mkfifo "$D/addr"
dbus-daemon --config-file="$D/bus.conf" --nofork --print-address=1 >"$D/addr" 2>/dev/null &
BUSPID=$!
read -r ADDR <"$D/addr"
export DBUS_SESSION_BUS_ADDRESS="unix:path=$D/bus"
run() { (cd "$D/proj" && HOME="$D/home" "$SBX" run --project . --backend "$B" "$@" -- true); }
now() { date +%s%N; }
for _ in 1 2 3; do run; run --grant bus_filter=session; done
: >"$D/plain"; : >"$D/bus.t"; : >"$D/diff"
i=0
while [ "$i" -lt "$N" ]; do
  if [ $((i % 2)) -eq 0 ]; then
    t0=$(now); run; t1=$(now); run --grant bus_filter=session; t2=$(now)
    p=$((t1 - t0)); b=$((t2 - t1))
  else
    t0=$(now); run --grant bus_filter=session; t1=$(now); run; t2=$(now)
    b=$((t1 - t0)); p=$((t2 - t1))
  fi
  echo "$p" >>"$D/plain"; echo "$b" >>"$D/bus.t"; echo $((b - p)) >>"$D/diff"
  i=$((i + 1))
done
med() { sort -n "$1" | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.2f", m / 1e6}'; }
P=$(med "$D/plain"); BB=$(med "$D/bus.t"); DD=$(med "$D/diff")
echo "backend $B, $N runs each (ms, medians): without $P, with bus_filter $BB, per-round difference $DD" 
awk -v p="$P" -v b="$BB" 'BEGIN { printf "ratio with/without %.3f, difference of medians %.2f ms\n", b / p, b - p }'
