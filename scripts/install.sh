#!/usr/bin/env bash
# Installs what rlverify needs on a fresh Debian machine: Go modules, and
# redis-server/redis-cli (used by the redis store, the local environment and
# the tests). With --test it also installs what only the tests need:
# Chromium (the HTML report is rendered in a real browser), docker.io, tmux
# (the progress bars are drawn in a real terminal), and the gateways
# rlverify compare runs as child processes (nginx, haproxy), and
# envoyproxy/ratelimit built from the Go module proxy (envoy-ratelimit.sh).
# Safe to run again. Without root it installs nothing from apt and says what
# is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
if [ "${1:-}" = --test ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
  command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
  # Debian installs them in /usr/sbin, not always on a user's PATH.
  for gw in nginx haproxy; do
    command -v "$gw" >/dev/null 2>&1 || [ -x "/usr/sbin/$gw" ] || need_apt+=("$gw")
  done
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install: apt-get install ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "install: please install ${need_apt[*]} (not root or no apt-get); rlverify falls back to an in-process Redis emulation" >&2
  fi
fi

go mod download
# scripts/test.sh builds it in the background itself (RLVERIFY_ENVOY_BUILT_BESIDE).
if [ "${1:-}" = --test ] && [ -z "${RLVERIFY_ENVOY_BUILT_BESIDE:-}" ]; then
  bash scripts/envoy-ratelimit.sh
fi
echo "install: ok ($(go version | awk '{print $3}'), $(redis-server --version 2>/dev/null | awk '{print $3}' || echo 'no redis-server'))" >&2
