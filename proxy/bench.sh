#!/usr/bin/env bash
# Benchmark of the egress proxy: one transfer of BYTES (default 1 GiB) and CONNS sequential
# connection setups (default 2000), direct on loopback vs through the efr proxy (its TCP
# listener, and the contained call's path: a listener handed to the proxy) vs tinyproxy vs
# HAProxy (mode tcp, splice: the best a relay does on this machine); and one TLS download
# of BYTES (openssl s_server -WWW -> curl --cacert) direct, through the efr proxy's handed
# listener, through tinyproxy and through HAProxy; then the efr modes as ratios to HAProxy
# (ratio of medians and median of the per-round paired ratios).
# Usage: proxy/bench.sh [BYTES] [CONNS] [ROUNDS] [ARGS...] (default 5 interleaved rounds;
# medians of the per-round ratios; ARGS go to proxy-bench, e.g. --tls-only for the TLS
# downloads alone; EFR_BENCH_TRACE=1 prints each TLS download). Needs tinyproxy (apt-get
# install -y tinyproxy), haproxy (apt-get install -y haproxy; for measuring only, nothing
# else uses it), openssl and curl; without tinyproxy or haproxy its rows are left out,
# without openssl or curl the TLS table.
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-1073741824}
CONNS=${2:-2000}
ROUNDS=${3:-5}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --quiet --release -p efr-proxy --example proxy-bench
BIN=$CARGO_TARGET_DIR/release/examples/proxy-bench

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Wait until something accepts on 127.0.0.1:$2, while process $1 runs (10 s at most).
await_port() {
  local i
  for i in $(seq 100); do
    kill -0 "$1" 2>/dev/null || return 1
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# The sink and the TLS server bind these (the relay's config names them before they run).
SINK_PORT=$(free_port)
TLS_PORT=$(free_port)
ARGS=(--bytes "$BYTES" --conns "$CONNS" --rounds "$ROUNDS" --tls --sink-port "$SINK_PORT" --tls-port "$TLS_PORT")
TP_PID=
HA_PID=
WORK=$(mktemp -d)
cleanup() {
  local p
  for p in $TP_PID $HA_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
if command -v tinyproxy >/dev/null; then
  TP_PORT=$(free_port)
  cat > "$WORK/tinyproxy.conf" <<CONF
Port $TP_PORT
Listen 127.0.0.1
Timeout 600
MaxClients 1000
LogLevel Critical
Allow 127.0.0.1
DisableViaHeader Yes
CONF
  tinyproxy -d -c "$WORK/tinyproxy.conf" >"$WORK/tinyproxy.log" 2>&1 &
  TP_PID=$!
  await_port "$TP_PID" "$TP_PORT" || { cat "$WORK/tinyproxy.log" >&2; echo "tinyproxy did not start" >&2; exit 1; }
  ARGS+=(--http-proxy "127.0.0.1:$TP_PORT" --http-proxy-pid "$TP_PID")
else
  echo "tinyproxy not installed: its row is left out" >&2
fi
if command -v haproxy >/dev/null; then
  # HAProxy as a plain TCP relay with kernel splicing both ways (no HTTP, no CONNECT):
  # one frontend to the sink, one to the TLS server. Threads: HAProxy's default (one per
  # CPU), as the efr proxy runs 2 tokio workers.
  HA_PORT=$(free_port)
  HA_TLS_PORT=$(free_port)
  cat > "$WORK/haproxy.cfg" <<CONF
global
  maxconn 4096
defaults
  mode tcp
  option splice-request
  option splice-response
  timeout connect 5s
  timeout client 600s
  timeout server 600s
frontend raw
  bind 127.0.0.1:$HA_PORT
  default_backend sink
backend sink
  server sink 127.0.0.1:$SINK_PORT
frontend tls
  bind 127.0.0.1:$HA_TLS_PORT
  default_backend tls
backend tls
  server tls 127.0.0.1:$TLS_PORT
CONF
  haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
  HA_PID=$!
  await_port "$HA_PID" "$HA_PORT" || { cat "$WORK/haproxy.log" >&2; echo "haproxy did not start" >&2; exit 1; }
  ARGS+=(--relay "127.0.0.1:$HA_PORT" --relay-tls "127.0.0.1:$HA_TLS_PORT" --relay-pid "$HA_PID")
else
  echo "haproxy not installed (apt-get install -y haproxy): its rows and the ratios to it are left out" >&2
fi
"$BIN" "${ARGS[@]}" "${@:4}"
