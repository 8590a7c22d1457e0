#!/usr/bin/env bash
# Benchmark of the egress proxy: one transfer of BYTES (default 1 GiB) and CONNS sequential
# connection setups (default 2000), direct on loopback vs through the efr proxy (its TCP
# listener, and the contained call's path: a listener handed to the proxy) vs tinyproxy;
# and one TLS download of BYTES (openssl s_server -WWW -> curl --cacert) direct, through
# the efr proxy's handed listener and through tinyproxy.
# Usage: proxy/bench.sh [BYTES] [CONNS] [ROUNDS] (default 5 interleaved rounds; medians of
# the per-round ratios). Needs tinyproxy (apt-get install -y tinyproxy), openssl and curl;
# without tinyproxy its rows are left out, without openssl or curl the TLS table.
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-1073741824}
CONNS=${2:-2000}
ROUNDS=${3:-5}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --quiet --release -p efr-proxy --example proxy-bench
BIN=$CARGO_TARGET_DIR/release/examples/proxy-bench

ARGS=(--bytes "$BYTES" --conns "$CONNS" --rounds "$ROUNDS" --tls)
TP_PID=
WORK=$(mktemp -d)
cleanup() {
  if [ -n "$TP_PID" ]; then kill "$TP_PID" 2>/dev/null || true; wait "$TP_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if command -v tinyproxy >/dev/null; then
  TP_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
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
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$TP_PORT") 2>/dev/null && break
    sleep 0.1
  done
  ARGS+=(--http-proxy "127.0.0.1:$TP_PORT" --http-proxy-pid "$TP_PID")
else
  echo "tinyproxy not installed: its row is left out" >&2
fi
"$BIN" "${ARGS[@]}"
