#!/bin/sh
# Benchmark: a contained `true` with the full default view (the plan `efr-sandbox run`
# builds from the built-in config: every default mask, read-only-inside path and floor),
# native and bwrap backends, against bare
# `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true`,
# in the same run. Fair by construction: the same N for each, 5 warm-up runs of each
# (cache warm), and the three interleaved in a rotating order within every round, so a
# slow period of the machine hits all three alike. Prints medians (microseconds) and the
# ratio to bare bwrap, and the median of the per-round ratios ("paired").
# With USER_PATHS=1, the two paths users get run in the same rounds too (the target: a call
# through them at most bare bubblewrap's time):
# `rpc`, a `sandbox.launch` of `true` through a running `efr-sandbox serve` as efrd makes it
# (request to `end` frame, scripts/rpc-launch.py), and `cli`, `efr-sandbox run --project P
# -- true` as a user types it (with `$XDG_RUNTIME_DIR` set, so it hands the call to that
# running service: see service/src/handoff.rs), and `cli, no service`, the same with
# EFR_SANDBOX_NO_SERVICE=1 (the call run by the CLI's own launcher); all native, the
# built-in config, a fresh HOME. And `cli floor`: the same `run` handed to a stand-in that
# answers at once and runs nothing (scripts/stand-in-service.py), which is what the CLI
# costs on its own, before any work of a service.
# Usage: scripts/bench-launch.sh [N]   (builds efr-launch and efr-sandbox in release first;
# NO_BUILD=1 skips that, for a user who cannot build: run it as root first)
# With BEFORE=DIR (a directory holding another build's release efr-launch and efr-sandbox,
# such as an older commit's target/release), that build's native launch runs in the same
# rounds too, with its own plan, and is reported beside ours. With WEAKEN=KNOB (a test knob
# of the launcher, such as `no_supervise`), BEFORE is this build with that layer off: the
# share of one layer in the same binary (the plan carries the knob, and the launcher honours
# it with EFR_LAUNCH_ALLOW_TEST_WEAKEN=1, set here for every launch).
# With HOST_SOCKETS=N, a process holds N connected Unix socket pairs on the host while the
# rounds run, as a logged-in desktop's programs do (its `/proc/net/unix` has thousands of
# lines): the launch looks at the host's listening sockets for its view.
set -eu
N=${1:-50}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
EXE=$CARGO_TARGET_DIR/release/efr-launch
SBX=$CARGO_TARGET_DIR/release/efr-sandbox
D=$(mktemp -d)
cleanup() {
  for p in "$D/pid-serve" "$D/pid-stand-in" "$D/pid-crowd"; do
    if [ -f "$p" ]; then kill "$(cat "$p")" 2>/dev/null || true; fi
  done
  rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/proj"
git init -q "$D/proj"
if [ -n "${HOST_SOCKETS:-}" ]; then
  mkfifo "$D/crowd"
  # Pairs spread over processes as the open-files limit allows; each child ends when the
  # first process does (its pipe reads its end).
  python3 -c 'import os, resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
each = max(1, (min(hard, 1 << 16) - 64) // 2)
left = int(sys.argv[1])
r, w = os.pipe()
while left > each:
    left -= each
    if os.fork() == 0:
        os.close(w)
        keep = [socket.socketpair() for _ in range(each)]
        os.read(r, 1)
        os._exit(0)
os.close(r)
keep = [socket.socketpair() for _ in range(left)]
time.sleep(0.5)
print("ready", flush=True)
time.sleep(86400)' "$HOST_SOCKETS" >"$D/crowd" &
  echo $! > "$D/pid-crowd"
  read -r _ <"$D/crowd"
  echo "host: $(($(wc -l </proc/net/unix) - 1)) unix sockets" >&2
fi
for b in native bwrap; do
  (cd "$D/proj" && "$SBX" run --project . --backend "$b" --plan-out "$D/plan-$b.json" -- true)
done
echo "plan: $(grep -c '"/' "$D/plan-native.json") paths (masks, read-only-inside, project)" >&2
if [ -n "${WEAKEN:-}" ]; then
  [ -z "${BEFORE:-}" ] || { echo "$0: BEFORE and WEAKEN exclude each other" >&2; exit 2; }
  BEFORE=$CARGO_TARGET_DIR/release
  export EFR_LAUNCH_ALLOW_TEST_WEAKEN=1
  (cd "$D/proj" && EFR_SANDBOX_TEST_WEAKEN=$WEAKEN "$SBX" run --project . --backend native --plan-out "$D/plan-before.json" -- true)
  grep -q "\"$WEAKEN\"" "$D/plan-before.json" || { echo "$0: the plan does not carry $WEAKEN" >&2; exit 2; }
  echo "BEFORE: this build with $WEAKEN" >&2
elif [ -n "${BEFORE:-}" ]; then
  (cd "$D/proj" && "$BEFORE/efr-sandbox" run --project . --backend native --plan-out "$D/plan-before.json" -- true)
fi
if [ -n "${USER_PATHS:-}" ]; then
  mkdir -p "$D/home" "$D/config" "$D/run"
  HOME=$D/home XDG_CONFIG_HOME=$D/config XDG_RUNTIME_DIR=$D/run "$SBX" serve \
    </dev/null >/dev/null 2>"$D/serve.log" &
  echo $! > "$D/pid-serve"
  mkdir -p -m 700 "$D/run-floor/efr"
  python3 "$(dirname "$0")/stand-in-service.py" "$D/run-floor/efr/sandbox.sock" &
  echo $! > "$D/pid-stand-in"
  mkfifo "$D/rpc-in" "$D/rpc-out"
  while [ ! -S "$D/run/efr/sandbox.sock" ] || [ ! -S "$D/run-floor/efr/sandbox.sock" ]; do sleep 0.01; done
  python3 "$(dirname "$0")/rpc-launch.py" "$D/run/efr/sandbox.sock" "$D/proj" native <"$D/rpc-in" >"$D/rpc-out" &
  exec 3>"$D/rpc-in" 4<"$D/rpc-out"
fi
rpc() { echo go >&3; read -r t <&4; echo "$t" >> "$D/t-rpc"; }
# stdin from /dev/null: with a terminal on its stdio, `run` keeps the call (and relays the
# terminal) itself, so a bench run from a terminal would time `here` twice.
# run_true RUNTIME_DIR NO_SERVICE: `efr-sandbox run -- true` as a user types it, with that
# runtime dir (whose service it finds) and EFR_SANDBOX_NO_SERVICE (empty: unset, for run).
run_true() { (cd "$D/proj" && HOME=$D/home XDG_CONFIG_HOME=$D/config XDG_RUNTIME_DIR=$1 EFR_SANDBOX_NO_SERVICE=$2 "$SBX" run --project . --backend native -- true </dev/null); }
cli() { run_true "$D/run" ""; }
floor() { run_true "$D/run-floor" ""; }
here() { run_true "$D/run" 1; }
bare() { bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true; }
nat() { "$EXE" --plan "$D/plan-native.json"; }
bw() { "$EXE" --plan "$D/plan-bwrap.json"; }
old() { if [ -n "${BEFORE:-}" ]; then "$BEFORE/efr-launch" --plan "$D/plan-before.json"; fi; }
one() { # name: appends one timing (us) to $D/name
  if [ "$1" = old ] && [ -z "${BEFORE:-}" ]; then return; fi
  case $1 in rpc|cli|here|floor) [ -n "${USER_PATHS:-}" ] || return 0 ;; esac
  # The rpc client times its own launch (request to end frame).
  if [ "$1" = rpc ]; then rpc; return; fi
  s=$(date +%s%N); "$1" >/dev/null 2>&1; e=$(date +%s%N)
  echo $(( (e - s) / 1000 )) >> "$D/t-$1"
}
for w in 1 2 3 4 5; do bare >/dev/null 2>&1; nat >/dev/null 2>&1; bw >/dev/null 2>&1; old >/dev/null 2>&1; done
if [ -n "${USER_PATHS:-}" ]; then
  for w in 1 2 3 4 5; do one rpc; cli >/dev/null 2>&1; here >/dev/null 2>&1; floor >/dev/null 2>&1; done
  rm -f "$D/t-rpc"
fi
i=0
while [ $i -lt "$N" ]; do
  case $((i % 3)) in
    0) one bare; one nat; one bw; one old; one rpc; one cli; one here; one floor ;;
    1) one nat; one here; one floor; one rpc; one old; one cli; one bw; one bare ;;
    2) one cli; one old; one floor; one bw; one here; one rpc; one bare; one nat ;;
  esac
  i=$((i + 1))
done
if [ -n "${USER_PATHS:-}" ] && [ -e "$D/run-floor/efr/serve.log" ]; then
  echo "$0: the floor row started a service of its own: the stand-in did not answer" >&2
  exit 1
fi
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The median of the per-round ratios of two launches (the same round: the same moment of
# the machine), steadier than the ratio of the medians.
paired() { paste "$1" "$2" | awk '{print $1 / $2}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
b=$(median "$D/t-bare"); n=$(median "$D/t-nat"); w=$(median "$D/t-bw"); o=""; p=""; if [ -s "$D/t-old" ]; then o=$(median "$D/t-old"); p=$(paired "$D/t-nat" "$D/t-old"); fi
pn=$(paired "$D/t-nat" "$D/t-bare")
r=""; c=""; pr=""; pc=""; h=""; ph=""; f=""; pf=""
if [ -n "${USER_PATHS:-}" ]; then
  r=$(median "$D/t-rpc"); c=$(median "$D/t-cli"); pr=$(paired "$D/t-rpc" "$D/t-bare"); pc=$(paired "$D/t-cli" "$D/t-bare")
  h=$(median "$D/t-here"); ph=$(paired "$D/t-here" "$D/t-bare")
  f=$(median "$D/t-floor"); pf=$(paired "$D/t-floor" "$D/t-bare")
fi
awk -v b="$b" -v n="$n" -v w="$w" -v o="$o" -v p="$p" -v pn="$pn" -v N="$N" -v r="$r" -v c="$c" -v pr="$pr" -v pc="$pc" -v h="$h" -v ph="$ph" -v f="$f" -v pf="$pf" 'BEGIN {
  printf "runs: %d each, interleaved (median, microseconds)\n", N
  printf "bare bwrap            %8d  1.00\n", b
  printf "efr-launch native     %8d  %.2f  (paired %s)\n", n, n / b, pn
  printf "efr-launch bwrap      %8d  %.2f\n", w, w / b
  if (o != "") printf "BEFORE native         %8d  %.2f  (ours/before %.2f, paired %s)\n", o, o / b, n / o, p
  if (r != "") printf "rpc sandbox.launch    %8d  %.2f  (paired %s)\n", r, r / b, pr
  if (c != "") printf "cli efr-sandbox run   %8d  %.2f  (paired %s)\n", c, c / b, pc
  if (h != "") printf "cli, no service       %8d  %.2f  (paired %s)\n", h, h / b, ph
  if (f != "") printf "cli floor (stand-in)  %8d  %.2f  (paired %s)\n", f, f / b, pf
}'
echo "user $(id -un), load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
