#!/usr/bin/env bash
# Makes a Docker engine available for the docker-environment tests, then
# builds the local images (scripts/build-images.sh).
#
# When `docker info` already answers (a laptop, a CI runner with Docker), it
# only builds the images. Otherwise, as root, it installs docker.io if dockerd
# is missing and starts dockerd in the background with the flags this kind of
# machine needs (an explicit bridge gateway for testcontainers' host
# detection; published ports on 127.0.0.1 only), logging to
# ${RLVERIFY_DOCKERD_LOG:-/tmp/rlverify-dockerd.log}, and waits for it.
#
# Exit status: with CI=true a Docker that cannot be started is an error
# (non-zero); elsewhere it warns and exits 0 so the Docker tests skip.
# This is a CI/test helper: the product never starts a Docker engine.
set -uo pipefail
cd "$(dirname "$0")/.."

log="${RLVERIFY_DOCKERD_LOG:-/tmp/rlverify-dockerd.log}"
wait_s="${RLVERIFY_DOCKERD_WAIT:-30}"

fail() {
  if [ "${CI:-}" = true ]; then
    echo "docker-up: ERROR: $*" >&2
    echo "docker-up: CI=true and the Docker tests must run: failing." >&2
    [ -f "$log" ] && { echo "docker-up: last lines of $log:" >&2; tail -n 20 "$log" >&2; }
    exit 1
  fi
  echo "docker-up: warning: $* — the Docker tests will skip." >&2
  exit 0
}

if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    fail "docker info fails and we are not root: start Docker yourself"
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "dockerd is not installed and there is no apt-get"
    echo "docker-up: apt-get install docker.io" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq docker.io; } >/dev/null 2>&1 ||
      fail "apt-get install -y docker.io failed"
  fi
  command -v docker >/dev/null 2>&1 || fail "the docker client is missing (apt-get install docker.io)"
  if pgrep -x dockerd >/dev/null 2>&1; then
    echo "docker-up: dockerd is already running; waiting for it" >&2
  else
    echo "docker-up: starting dockerd (log: $log)" >&2
    # setsid: the engine outlives this script and is not in its process group.
    setsid dockerd --bip 172.17.0.1/16 --ip 127.0.0.1 >"$log" 2>&1 </dev/null &
  fi
  deadline=$((SECONDS + wait_s))
  until docker info >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "dockerd did not answer docker info within ${wait_s}s"
    fi
    sleep 0.3
  done
  echo "docker-up: dockerd is up after $((SECONDS))s" >&2
  # Belt and braces for the network rule on this kind of machine: nothing a
  # container sends may leave through the host's outside interface.
  out_if="$(ip route show default 2>/dev/null | awk '{print $5; exit}')"
  if [ -n "$out_if" ] && command -v iptables >/dev/null 2>&1; then
    iptables -C DOCKER-USER -o "$out_if" -j REJECT 2>/dev/null ||
      iptables -I DOCKER-USER -o "$out_if" -j REJECT 2>/dev/null ||
      echo "docker-up: warning: could not add the DOCKER-USER egress rule" >&2
  fi
fi

# The compose test drives a compose CLI: the docker plugin, else Debian's
# docker-compose (1.29).
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "docker-up: apt-get install docker-compose" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq docker-compose; } >/dev/null 2>&1 ||
      fail "apt-get install -y docker-compose failed"
  else
    fail "no compose CLI (docker compose or docker-compose)"
  fi
fi

bash scripts/build-images.sh || fail "scripts/build-images.sh failed"
echo "docker-up: ok (server $(docker version --format '{{.Server.Version}}' 2>/dev/null))" >&2
