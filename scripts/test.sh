#!/usr/bin/env bash
# Runs every test of rlverify, the ones that need redis-server included.
# It installs what the tests need first (scripts/install.sh). CI (.ci/run)
# calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

# Each phase's line says when it started (seconds since the script did):
# CI's budget is 30 minutes, and this is where the time goes.
start=$SECONDS
phase() { echo "test: $* (at $((SECONDS - start)) s)" >&2; }
# reap PID LOG WHAT waits for a job started in the background, prints its
# log, and stops the script if it failed.
reap() {
  local rc=0
  wait "$1" || rc=$?
  cat "$2" >&2
  if [ "$rc" -ne 0 ]; then
    echo "test: $3 failed (exit $rc)" >&2
    exit 1
  fi
}

# envoyproxy/ratelimit takes minutes to build from source: it builds beside
# the installs, Docker's start-up, gofmt and vet, and the tests wait for it
# before the first one that runs it (envs/gateway, in the units).
envoy_log=$(mktemp)
bash scripts/envoy-ratelimit.sh >"$envoy_log" 2>&1 &
envoy_pid=$!
trap 'kill "$envoy_pid" 2>/dev/null || true; rm -f "$envoy_log"' EXIT
RLVERIFY_ENVOY_BUILT_BESIDE=1 bash scripts/install.sh --test
bash scripts/docker-up.sh; export RLVERIFY_REDIS_IMAGE="${RLVERIFY_REDIS_IMAGE:-rlverify/redis:local}"

# testcontainers must never dial this machine's gateway nor pull Ryuk.
export TESTCONTAINERS_HOST_OVERRIDE="${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}"
export TESTCONTAINERS_RYUK_DISABLED=true

phase gofmt
unformatted=$(gofmt -l . | grep -v '^vendor/' || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
# The default build leaves out the docker environment and the gubernator
# cluster (docs/architecture.md, "Optional parts"); the tests run with both
# built in, so what a tagged build adds is tested, and the default build's
# own answers (what a binary without them says) run once more without tags.
tags=docker,gubernator
phase go vet
go vet ./...
go vet -tags "$tags" ./...
if ! wait "$envoy_pid"; then
  echo "test: building envoy-ratelimit failed:" >&2
  cat "$envoy_log" >&2
  exit 1
fi
cat "$envoy_log" >&2
# Packages with their own concurrency run under the race detector. The
# end-to-end suites (cmd/rlverify: every built-in plan, the mutation matrix,
# compare; compose) drive real attacks whose limiters have 200 ms store
# timeouts: they run afterwards, without the detector's slowdown, one package
# at a time, so their timing is the product's and not the test machine's.
integration="./cmd/rlverify ./compose"
units=$(go list ./... | grep -v -E '/(cmd/rlverify|compose)$')
phase "go test -race (units)"
# Three packages at a time on two CPUs: the race detector keeps checks on
# one CPU for about 150 s, while most of the others wait on their services
# (attacks, docker, discovery); two at a time left them in a queue behind
# it (430 s for the phase in CI of bd8806a, the run at 1,810 s).
go test -race -count=1 -p 3 -timeout 20m -tags "$tags" $units
# The docker tests spend their time waiting for containers (about four
# minutes, two at a time): the fuzzing, one worker, runs beside them.
# TestBoundaryBurstOnDocker is not among them: its burst must land on a
# window's edge, so it runs with the rest, alone.
docker_tests='^(TestScenariosOnDocker|TestStoreOutageOnDocker|TestStoreFaultModesOnDocker)$'
# The default build's own tests (what a binary without the tags says) are
# a few seconds of tests and a compile: they run beside them too.
phase "fuzz and the default build (no docker, no gubernator), beside go test (end to end, docker)"
fuzz_log=$(mktemp)
bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}" >"$fuzz_log" 2>&1 &
fuzz_pid=$!
default_log=$(mktemp)
go test -count=1 -run 'TestGubernatorNeedsItsBuildTag|TestDefaultBuild' ./envs/gateway ./cmd/rlverify . >"$default_log" 2>&1 &
default_pid=$!
trap 'kill "$envoy_pid" "$fuzz_pid" "$default_pid" 2>/dev/null || true; rm -f "$envoy_log" "$fuzz_log" "$default_log"' EXIT
go test -count=1 -timeout 30m -tags "$tags" -run "$docker_tests" ./cmd/rlverify
reap "$default_pid" "$default_log" "the default build's tests"
reap "$fuzz_pid" "$fuzz_log" fuzz
phase "go test (end to end)"
go test -count=1 -p 1 -timeout 30m -tags "$tags" -skip "$docker_tests" $integration
phase "examples module (the library as a user imports it)"
(cd examples && go vet ./... && go test -count=1 ./...)
phase done
