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
# Interleaved (ours first in even rounds, before first in odd ones), 3 warm-up runs of
# each; prints the medians of the wall time and of the CPU time of the process tree
# (microseconds) and the median of the per-round ratios ours/before.
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
# The rounds, timed by python: the wall time of each run and the CPU time (user + system)
# of its process tree (getrusage of the waited children), which a loaded machine disturbs
# less than the wall time.
python3 - "$N" "$D" "$OURS" "$BEFORE" <<'PY'
import os, resource, subprocess, sys, time
n, d, ours, before = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
cases = ["plain", "include", "status"]
def run(build, case):
    line = ["git", "status", "--porcelain"] if case == "status" else ["true"]
    env = dict(os.environ, HOME=d + "/home", XDG_CONFIG_HOME=d + "/config",
               EFR_SANDBOX_NO_SERVICE="1", EFR_LAUNCH=build + "/efr-launch")
    env.pop("XDG_RUNTIME_DIR", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    subprocess.run([build + "/efr-sandbox", "run", "--project", ".", "--backend", "native", "--"] + line,
                   cwd=d + "/" + case, env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    t1 = time.perf_counter_ns()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return (t1 - t0) // 1000, int(cpu * 1e6)
t = {(b, c): [] for b in ("ours", "before") for c in cases}
for c in cases:
    for _ in range(3):
        run(ours, c); run(before, c)
for i in range(n):
    for c in cases:
        order = [("ours", ours), ("before", before)]
        if i % 2:
            order.reverse()
        for name, build in order:
            t[(name, c)].append(run(build, c))
def median(v):
    v = sorted(v)
    return v[(len(v) - 1) // 2]
print(f"runs: {n} each, interleaved (median; wall and CPU of the process tree, microseconds)")
for c in cases:
    o, b = t[("ours", c)], t[("before", c)]
    for k, what in ((0, "wall"), (1, "cpu ")):
        paired = median([x[k] / y[k] for x, y in zip(o, b) if y[k]])
        print(f"{c:8} {what} before {median([y[k] for y in b]):8d}  ours {median([x[k] for x in o]):8d}  ours/before {paired:.3f} (paired)")
PY
echo "user $(id -un), load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
