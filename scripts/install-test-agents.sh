#!/usr/bin/env bash
# Installs the coding agents that service/tests/real_agents.rs drives, at the versions the
# tests were written against (their hook and config formats change between releases), into
# PREFIX (default /opt/efr-test-agents), readable by every user so that the unprivileged
# test user runs them too. The tests find them in PREFIX/node_modules/.bin, or where
# EFR_TEST_AGENTS says.
#
# usage: scripts/install-test-agents.sh [PREFIX] [AGENT...]
#   AGENT: claude, codex, gemini, opencode (default: all four)
# Needs npm and a reachable npm registry; node 20 or later for Gemini CLI.
set -euo pipefail

PREFIX=${1:-/opt/efr-test-agents}
[ $# -gt 0 ] && shift
AGENTS=("$@")
[ ${#AGENTS[@]} -gt 0 ] || AGENTS=(claude codex gemini opencode)

pkgs=()
for a in "${AGENTS[@]}"; do
    case $a in
        claude) pkgs+=(@anthropic-ai/claude-code@2.1.332) ;;
        codex) pkgs+=(@openai/codex@0.171.0) ;;
        gemini) pkgs+=(@google/gemini-cli@0.61.0) ;;
        opencode) pkgs+=(opencode-ai@1.18.33) ;;
        *) echo "install-test-agents: unknown agent $a (claude, codex, gemini, opencode)" >&2; exit 2 ;;
    esac
done

install -d -m 0755 "$PREFIX"
# --no-audit/--no-fund: nothing but the packages is asked of the registry. The packages'
# install scripts run: they pick each agent's binary for this platform.
npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error "${pkgs[@]}"
chmod -R a+rX "$PREFIX"
echo "installed ${AGENTS[*]} in $PREFIX/node_modules/.bin (EFR_TEST_AGENTS=$PREFIX/node_modules/.bin)"
