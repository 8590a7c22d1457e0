#!/bin/sh
# Benchmark: what the call's egress proxy adds to a launch (every contained call with its own
# network gets one, grants or not, so that a refused name is on record). Two paths, each in
# one run with the two builds interleaved in a rotating order (the same moment of the machine
# for both):
#
#  - rpc: `sandbox.launch` of a contained `true` through a running `efr-sandbox serve`, as
#    efrd makes it (one connection, one request after the other; time from the request to
#    its `end` frame);
#  - cli: `efr-sandbox run --project P -- true` from the shell (fork and exec included).
#
# BEFORE=DIR is the other build (a directory with its release efr-sandbox and efr-launch,
# such as main's target/release: no proxy for a call without a host grant). Without it, the
# pair is this build with no grant against this build with `--grant net_view` (the host's
# network namespace with only Unix and netlink sockets: no proxy, no network namespace made),
# which bounds the cost from above (it includes the namespace). With WEAKEN=KNOB, the pair
# is this build against itself with that test knob of the launcher: `no_proxy` (its own
# network namespace, no proxy) gives the proxy's own share of a launch, `no_supervise` (no
# write supervisor: no notification filter, no listener, no nested Landlock domain, no
# linked-file check) the supervisor's (its target: at most 5 %), on the two paths users get.
# Prints medians (microseconds), the ratio of the medians and the median of the per-round
# differences ("paired").
# Usage: scripts/bench-proxy-launch.sh [N] [native|bwrap]  (builds release first; NO_BUILD=1
# skips that, for a user who cannot build: run it as root first)
set -eu
N=${1:-200}
BACKEND=${2:-native}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build -q --release -p efr-launcher --bin efr-launch -p efr-sandbox --bin efr-sandbox
NEW=$CARGO_TARGET_DIR/release
D=$(mktemp -d)
mkdir -p "$D/home" "$D/config" "$D/proj"
git init -q "$D/proj"
cleanup() {
  for p in "$D"/pid-*; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
  rm -rf "$D"
}
trap cleanup EXIT
OLDENV=""
if [ -n "${BEFORE:-}" ]; then OLD=$BEFORE; OLDGRANT=""
elif [ -n "${WEAKEN:-}" ]; then
  OLD=$NEW; OLDGRANT=""; OLDENV="EFR_SANDBOX_TEST_WEAKEN=$WEAKEN"
  export EFR_LAUNCH_ALLOW_TEST_WEAKEN=1
else OLD=$NEW; OLDGRANT=net_view; fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# --- rpc: one server per build, the client in python (frames: 4-byte length + JSON).
serve() { # name dir [VAR=value]
  mkdir -p "$D/run-$1"
  env ${3:-} HOME=$D/home XDG_CONFIG_HOME=$D/config XDG_RUNTIME_DIR= "$2/efr-sandbox" serve \
    --socket "$D/run-$1/sandbox.sock" </dev/null >/dev/null 2>"$D/serve-$1.log" &
  echo $! > "$D/pid-$1"
}
serve new "$NEW"
serve old "$OLD" "$OLDENV"
python3 - "$D" "$N" "$BACKEND" "$OLDGRANT" "$(cat "$D/pid-new")" "$(cat "$D/pid-old")" <<'EOF'
import json, os, socket, struct, sys, time
d, n, backend, oldgrant = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
pids = {"new": sys.argv[5], "old": sys.argv[6]}
tick = os.sysconf("SC_CLK_TCK")
def cpu(k):
    # utime + stime of the service (all its threads, live and ended) and of the children it
    # reaped (the launchers), seconds: CPU time, which the machine's load does not inflate.
    f = open(f"/proc/{pids[k]}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / tick
def conn(name):
    path = f"{d}/run-{name}/sandbox.sock"
    for _ in range(200):
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(path); break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(f"no server at {path}")
    return s
def send(s, v):
    b = json.dumps(v).encode(); s.sendall(struct.pack(">I", len(b)) + b)
def recv(s):
    h = b""
    while len(h) < 4:
        c = s.recv(4 - len(h))
        if not c: sys.exit("server closed")
        h += c
    (l,) = struct.unpack(">I", h); b = b""
    while len(b) < l:
        b += s.recv(l - len(b))
    return json.loads(b)
cs = {k: conn(k) for k in ("new", "old")}
for s in cs.values():
    send(s, {"id": 0, "method": "hello", "params": {"protocol": 1, "client": "bench"}}); recv(s)
grants = {"new": [], "old": [{"kind": oldgrant}] if oldgrant else []}
ids = {"new": 0, "old": 0}
def launch(k):
    ids[k] += 1
    s = cs[k]
    p = {"line": "true", "cwd": f"{d}/proj", "projects": [f"{d}/proj"], "backend": backend,
         "grants": grants[k]}
    t0 = time.perf_counter_ns()
    send(s, {"id": ids[k], "method": "sandbox.launch", "params": p})
    while True:
        f = recv(s)
        if "item" not in f: break
    t = (time.perf_counter_ns() - t0) // 1000
    if "end" not in f or f["end"].get("exit_status") != 0:
        sys.exit(f"{k}: {f}")
    proxied = f["end"].get("sandbox_summary", {}).get("proxied", False)
    return t, proxied
for _ in range(5):
    launch("new"); launch("old")
t = {"new": [], "old": []}
prox = {"new": set(), "old": set()}
c0 = {k: cpu(k) for k in t}
for i in range(n):
    order = ("new", "old") if i % 2 == 0 else ("old", "new")
    for k in order:
        x, p = launch(k); t[k].append(x); prox[k].add(p)
c1 = {k: cpu(k) for k in t}
med = lambda v: sorted(v)[len(v) // 2]
diff = med([a - b for a, b in zip(t["new"], t["old"])])
print(f"rpc sandbox.launch ({backend}), {n} each, interleaved (median, microseconds)")
print(f"  this build, no grant (proxied {sorted(prox['new'])})  {med(t['new']):8d}")
print(f"  other (proxied {sorted(prox['old'])})                {med(t['old']):8d}")
print(f"  ratio {med(t['new']) / med(t['old']):.3f}; paired difference {diff} us")
cn, co = ((c1[k] - c0[k]) / n * 1e6 for k in ("new", "old"))
print(f"  CPU per launch (service + launchers): this {cn:.0f} us, other {co:.0f} us, "
      f"difference {cn - co:.0f} us")
EOF
for k in new old; do kill "$(cat "$D/pid-$k")" 2>/dev/null || true; rm -f "$D/pid-$k"; done

# --- cli.
run_new() { (cd "$D/proj" && HOME=$D/home XDG_CONFIG_HOME=$D/config "$NEW/efr-sandbox" run --project . --backend "$BACKEND" -- true); }
run_old() {
  if [ -n "$OLDGRANT" ]; then set -- --grant "$OLDGRANT"; fi
  (cd "$D/proj" && env $OLDENV HOME=$D/home XDG_CONFIG_HOME=$D/config "$OLD/efr-sandbox" run --project . --backend "$BACKEND" "$@" -- true)
}
one() { s=$(date +%s%N); "run_$1" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000 )) >> "$D/t-$1"; }
for w in 1 2 3 4 5; do run_new >/dev/null 2>&1; run_old >/dev/null 2>&1; done
i=0
while [ $i -lt "$N" ]; do
  if [ $((i % 2)) = 0 ]; then one new; one old; else one old; one new; fi
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
pdiff() { paste "$1" "$2" | awk '{print $1 - $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
a=$(median "$D/t-new"); b=$(median "$D/t-old"); p=$(pdiff "$D/t-new" "$D/t-old")
echo "cli efr-sandbox run ($BACKEND), $N each, interleaved (median, microseconds)"
echo "  this build, no grant  $a"
echo "  other                 $b"
awk -v a="$a" -v b="$b" -v p="$p" 'BEGIN { printf "  ratio %.3f; paired difference %d us\n", a / b, p }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
