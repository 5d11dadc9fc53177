#!/usr/bin/env bash
# The attack's soak (issue 29, "the attack stays flat"): the built-in soak
# plan at RATE for DURATION against `rlverify serve` (the reference token
# bucket, forwarding admitted requests to `rlverify sink`), everything on
# 127.0.0.1. Samples the attacking process's RSS (VmRSS) every SAMPLE
# seconds until it exits, the end-of-run judgement included, and prints the
# RSS after the first minute, the peak, their ratio, the CPU time and the
# load average. Loads the machine for DURATION and more: not part of CI.
#
#   bash scripts/soak.sh                          # 10 minutes at 5,000/s
#   DURATION=1m bash scripts/soak.sh              # a dry run
#   ONLY=soak bash scripts/bench.sh               # the same, from bench.sh
#   KEEP=DIR bash scripts/soak.sh                 # keep the run's folder (history, reports) in DIR
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

DURATION="${DURATION:-10m}"
RATE="${RATE:-5000/s}"
SAMPLE="${SAMPLE:-5}"

tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ] && [ -d "$tmp/out" ]; then
    mkdir -p "$KEEP" && cp -rL "$tmp/out/latest/." "$KEEP/" || true
  fi
  rm -rf "$tmp" || true
}
trap cleanup EXIT

go build -o "$tmp/rlverify" ./cmd/rlverify
port() { echo $(( 20000 + RANDOM % 20000 )); }
sinkp=$(port); servep=$(port)
while [ "$servep" = "$sinkp" ]; do servep=$(port); done
"$tmp/rlverify" sink --addr "127.0.0.1:$sinkp" >"$tmp/sink.log" 2>&1 &
pids+=($!)
"$tmp/rlverify" serve --addr "127.0.0.1:$servep" --downstream "http://127.0.0.1:$sinkp" >"$tmp/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$servep/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

# The built-in soak plan with its rate and duration replaced.
"$tmp/rlverify" plans show soak |
  sed -e "s|^    rate: .*|    rate: $RATE|" -e "s|^    duration: .*|    duration: $DURATION|" >"$tmp/soak.yaml"
grep -q "rate: $RATE" "$tmp/soak.yaml" && grep -q "duration: $DURATION" "$tmp/soak.yaml"

echo "soak: $(nproc) CPUs, $RATE for $DURATION, load average before $(cut -d' ' -f1-3 /proc/loadavg)" >&2
start=$(date +%s.%N)
/usr/bin/time -f "%e s wall, %U s user, %S s system, max RSS %M KB" -o "$tmp/time.txt" \
  "$tmp/rlverify" attack --plan "$tmp/soak.yaml" --policy default \
  --target "http://127.0.0.1:$servep" --sink "http://127.0.0.1:$sinkp" \
  --max-requests 1000000000 --max-duration 3h --out "$tmp/out" --quiet --format text --fail-on none >"$tmp/report.txt" 2>"$tmp/attack.err" &
tpid=$!
apid=""
for _ in $(seq 100); do
  apid=$(pgrep -P "$tpid" || true)
  [ -n "$apid" ] && break
  sleep 0.05
done
: >"$tmp/rss.tsv"
while kill -0 "$apid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$apid/status" 2>/dev/null || true)
  [ -n "$rss" ] && printf '%.1f\t%s\t%s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$rss" "$(cut -d' ' -f1 /proc/loadavg)" >>"$tmp/rss.tsv"
  sleep "$SAMPLE"
done
wait "$tpid" || true
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cat "$tmp/attack.err" >&2
grep -E "^(verdict|requests|[a-z-]+ +(PASS|FAIL|UNKNOWN|SKIP|EXPLAINED) )" "$tmp/report.txt" | head -30 >&2 || true
events=$(awk '/^requests / { gsub(/[,:]/, "", $2); print $2 }' "$tmp/report.txt")
secs=$(awk -v d="$DURATION" 'BEGIN { n = d + 0; u = substr(d, length(d)); print (u == "m" ? n * 60 : (u == "h" ? n * 3600 : n)) }')
maxrss=$(sed -E 's/.*max RSS ([0-9]+) KB.*/\1/' "$tmp/time.txt")
awk -F'\t' -v events="$events" -v secs="$secs" -v dur="$DURATION" -v rate="$RATE" -v after="$load_after" -v timing="$(cat "$tmp/time.txt")" -v maxrss="$maxrss" -v samp="$SAMPLE" '
  { t = $1; rss = $2 / 1024; if (rss > peak) { peak = rss; peakAt = t }
    if (t <= 60) first = rss
    if (t <= secs) { if (rss > runPeak) runPeak = rss } else if (rss > judgePeak) judgePeak = rss
    if ($3 > maxLoad) maxLoad = $3; sumLoad += $3; n++ }
  END {
    printf "soak: %s events in %s (%.0f requests/s achieved; plan %s)\n", events, dur, events / secs, rate
    printf "soak: RSS after the first minute %.0f MB; sampled every %s s: peak while sending %.0f MB, peak judging %.0f MB (peak sample at %.0f s); peak RSS (the kernel\x27s high-water mark) %.0f MB; peak / first minute = %.2f\n", first, samp, runPeak, judgePeak, peakAt, maxrss / 1024, maxrss / 1024 / first
    printf "soak: %s; load average (1 min) mean %.1f, max %.1f while it ran; after: %s\n", timing, sumLoad / n, maxLoad, after
  }' "$tmp/rss.tsv"
echo "soak: RSS samples (seconds, KB, load):" >&2
awk 'NR % 12 == 1' "$tmp/rss.tsv" >&2
tail -3 "$tmp/rss.tsv" >&2
