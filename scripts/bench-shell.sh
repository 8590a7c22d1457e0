#!/bin/sh
# Benchmark: the overhead per call of the shell route, `efr-bash -c true` (an agent pointed
# at efr-bash as its shell), against the agent's plain shell, `bash -c true`, and against
# `efr-sandbox run -- true`, in the same run. Both sandboxed routes as a user has them: with
# `$XDG_RUNTIME_DIR` set, so the call is handed to the running service (started here, a
# fresh HOME and the built-in config, native backend), and again with
# EFR_SANDBOX_NO_SERVICE=1 (the CLI's own launcher); and `run --shell sh -- true`, the cost
# of bash over dash as the line's shell. The same N for each, 5 warm-up runs of
# each, interleaved in a rotating order within every round. Prints medians (microseconds),
# the ratio to plain bash, and the median of the per-round ratios ("paired").
# Also Claude Code's hook route: the hook alone, and the hook then the rewritten line as
# Claude runs it (the whole of what one Bash call costs through it).
# Usage: scripts/bench-shell.sh [N]   (builds efr-sandbox and efr-bash in release first;
# NO_BUILD=1 skips that)
set -eu
N=${1:-50}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build -q --release -p efr-sandbox --bins -p efr-launcher --bin efr-launch
REL=$CARGO_TARGET_DIR/release
FIXTURE=$PWD/service/tests/fixtures/hook/claude-bash.json
D=$(mktemp -d /var/tmp/bench-shell.XXXXXX)
cleanup() {
  if [ -f "$D/pid-serve" ]; then kill "$(cat "$D/pid-serve")" 2>/dev/null || true; fi
  rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/proj" "$D/home" "$D/config/efr" "$D/run"
chmod 700 "$D/run"
git init -q "$D/proj"
printf '[sandbox]\nbackend = "native"\n' > "$D/config/efr/config.toml"
export HOME="$D/home" XDG_CONFIG_HOME="$D/config" XDG_RUNTIME_DIR="$D/run"
export EFR_SANDBOX_PROJECT="$D/proj" EFR_SANDBOX_CONVERSATION=bench
"$REL/efr-sandbox" serve </dev/null >/dev/null 2>"$D/serve.log" &
echo $! > "$D/pid-serve"
while [ ! -S "$D/run/efr/sandbox.sock" ]; do sleep 0.01; done
cd "$D/proj"
# stdin from /dev/null: with a terminal on its stdio, a call keeps (and relays) it itself.
plain() { bash -c true </dev/null; }
shell() { "$REL/efr-bash" -c true </dev/null; }
run() { "$REL/efr-sandbox" run --conversation bench -- true </dev/null; }
run_sh() { "$REL/efr-sandbox" run --shell sh --conversation bench -- true </dev/null; }
shell_here() { EFR_SANDBOX_NO_SERVICE=1 "$REL/efr-bash" -c true </dev/null; }
# The hook route as Claude Code takes it per call: its PreToolUse hook (a process that
# classifies the line and asks the service for the session's approved grants), then the
# rewritten command in the agent's bash (`eval 'CMD' && pwd -P`, as Claude runs it).
sed -e "s|@CWD@|$D/proj|" -e 's|@LINE@|"true"|' "$FIXTURE" > "$D/hook.json"
REWRITTEN=$(CLAUDE_PROJECT_DIR="$D/proj" "$REL/efr-sandbox" hook claude < "$D/hook.json" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"]["command"])')
export REWRITTEN
hook() { CLAUDE_PROJECT_DIR="$D/proj" "$REL/efr-sandbox" hook claude < "$D/hook.json" >/dev/null; }
hooked() { hook && bash -c 'eval "$REWRITTEN" && pwd -P >/dev/null' </dev/null; }
run_here() { EFR_SANDBOX_NO_SERVICE=1 "$REL/efr-sandbox" run --conversation bench -- true </dev/null; }
one() { # name: appends one timing (us) to $D/t-name; a failed call stops the benchmark
  s=$(date +%s%N); "$1" >/dev/null 2>"$D/err" || { cat "$D/err" >&2; exit 1; }; e=$(date +%s%N)
  echo $(( (e - s) / 1000 )) >> "$D/t-$1"
}
for w in 1 2 3 4 5; do plain; shell; run; run_sh; shell_here; run_here; hook; hooked; done >/dev/null 2>&1
i=0
while [ $i -lt "$N" ]; do
  case $((i % 3)) in
    0) one plain; one shell; one run; one run_sh; one shell_here; one run_here; one hook; one hooked ;;
    1) one hooked; one run; one shell_here; one run_sh; one plain; one hook; one run_here; one shell ;;
    2) one run_here; one hook; one run; one shell; one hooked; one plain; one shell_here; one run_sh ;;
  esac
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
paired() { paste "$1" "$2" | awk '{print $1 / $2}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
p=$(median "$D/t-plain")
echo "runs: $N each, interleaved (median, microseconds; ratio to bash -c true; paired)"
for t in plain shell run run_sh shell_here run_here hook hooked; do
  case $t in
    plain) name="bash -c true" ;;
    shell) name="efr-bash -c true" ;;
    run) name="efr-sandbox run -- true" ;;
    run_sh) name="run --shell sh (dash)" ;;
    shell_here) name="efr-bash, no service" ;;
    run_here) name="run, no service" ;;
    hook) name="hook claude (alone)" ;;
    hooked) name="hook + rewritten line" ;;
  esac
  m=$(median "$D/t-$t")
  printf '%-26s %8d  %6.2f  (paired %s)\n' "$name" "$m" "$(echo "$m $p" | awk '{print $1 / $2}')" "$(paired "$D/t-$t" "$D/t-plain")"
done
s=$(median "$D/t-shell"); r=$(median "$D/t-run")
printf 'efr-bash / run: %.2f (paired %s); no service: %.2f (paired %s)\n' \
  "$(echo "$s $r" | awk '{print $1 / $2}')" "$(paired "$D/t-shell" "$D/t-run")" \
  "$(median "$D/t-shell_here" | awk -v r="$(median "$D/t-run_here")" '{print $1 / r}')" \
  "$(paired "$D/t-shell_here" "$D/t-run_here")"
echo "user $(id -un), load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
