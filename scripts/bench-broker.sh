#!/bin/sh
# The credential broker against today's pass-through tunnel and mitmproxy, in one run:
# a 200 MB download and 1,000 small requests on one keep-alive connection, the same curl
# for all three. Needs curl and python3; mitmproxy is installed into a venv under /var/tmp
# (pip) when missing. See docs/benchmarks.md, section "The credential broker".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/bench-broker.py" "$@"
