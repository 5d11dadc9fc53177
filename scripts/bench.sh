#!/usr/bin/env bash
# Side-by-side performance benchmarks (DESIGN.md "Performance targets").
# Prints one Markdown table: measured values, ratios against wrk, vegeta,
# x/time/rate, go-redis/redis_rate and redis-benchmark, and the targets.
# Everything runs on 127.0.0.1. Takes about 7 minutes on 2 vCPUs and up
# to about 4 GB of memory (10^7 events in memory, in a child process).
#
#   bash scripts/bench.sh                  # everything
#   ROUNDS=1 DUR=2s bash scripts/bench.sh  # quicker, noisier
#   ONLY=checks,limiters bash scripts/bench.sh
#   ONLY=calibrate ROUNDS=1 bash scripts/bench.sh   # the 10^7-line calibrate row alone
#   ONLY=stream STREAM_MAX=8 bash scripts/bench.sh  # the streaming rows up to 10^8 events
#   ONLY=soak bash scripts/bench.sh        # the attack's 10-minute soak at 5,000/s (scripts/soak.sh;
#                                          # not in the default list: it loads the machine for 11 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-4s}"
ONLY="${ONLY:-load,burst,checks,limiters,redis,scaling,stream,import,audit,calibrate}"
if [[ ",$ONLY," == *",soak,"* ]]; then
  bash scripts/soak.sh
  ONLY="$(echo ",$ONLY," | sed -e 's/,soak,/,/g' -e 's/^,//' -e 's/,$//')"
  [ -n "$ONLY" ] || exit 0
fi
# The stream rows judge up to 10^STREAM_MAX events (8: a 20 GB file in TMPDIR).
STREAM_MAX="${STREAM_MAX:-7}"

need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-benchmark >/dev/null || need_apt+=(redis-tools)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench: installing ${need_apt[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null ||
      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null; }
  else
    echo "bench: missing ${need_apt[*]} (install them, or run as root on Debian); those rows are skipped" >&2
  fi
fi

tmp="$(mktemp -d)"
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$tmp" || true
}
trap cleanup EXIT

echo "bench: building rlbench, rlverify and the vegeta CLI" >&2
go build -o "$tmp/rlbench" ./internal/bench/cmd/rlbench
go build -o "$tmp/rlverify" ./cmd/rlverify
# vegeta's CLI as released (v12.13.0, the library version rlverify uses),
# built outside this module so go.mod is untouched.
vegeta=""
if (cd "$tmp" && GOFLAGS= GOBIN="$tmp" go install github.com/tsenart/vegeta/v12@v12.13.0) >&2; then
  vegeta="$tmp/vegeta"
else
  echo "bench: could not build vegeta; its rows are skipped" >&2
fi

redis_addr=""
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  port=$(( 20000 + RANDOM % 20000 ))
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --daemonize no \
    --dir "$tmp" --logfile "$tmp/redis.log" &
  redis_pid=$!
  for _ in $(seq 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis_addr="127.0.0.1:$port"
fi

echo "bench: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$tmp/rlbench" -rounds "$ROUNDS" -dur "$DUR" -only "$ONLY" -stream-max "$STREAM_MAX" \
  -wrk "$(command -v wrk || echo wrk)" -vegeta "$vegeta" -rlverify "$tmp/rlverify" \
  -redis "$redis_addr" -redis-benchmark "$(command -v redis-benchmark || echo redis-benchmark)" -tmp "$tmp"
echo "bench: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
