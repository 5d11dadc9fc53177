#!/usr/bin/env bash
# Runs every test of rlverify, the ones that need redis-server included.
# It installs what the tests need first (scripts/install.sh). CI (.ci/run)
# calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

bash scripts/install.sh --test
bash scripts/docker-up.sh; export RLVERIFY_REDIS_IMAGE="${RLVERIFY_REDIS_IMAGE:-rlverify/redis:local}"

# testcontainers must never dial this machine's gateway nor pull Ryuk.
export TESTCONTAINERS_HOST_OVERRIDE="${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}"
export TESTCONTAINERS_RYUK_DISABLED=true

echo "test: gofmt" >&2
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
echo "test: go vet" >&2
go vet ./...
go vet -tags "$tags" ./...
# Packages with their own concurrency run under the race detector. The
# end-to-end suites (cmd/rlverify: every built-in plan, the mutation matrix,
# compare; compose) drive real attacks whose limiters have 200 ms store
# timeouts: they run afterwards, without the detector's slowdown, one package
# at a time, so their timing is the product's and not the test machine's.
integration="./cmd/rlverify ./compose"
units=$(go list ./... | grep -v -E '/(cmd/rlverify|compose)$')
echo "test: go test -race (units)" >&2
go test -race -count=1 -timeout 20m -tags "$tags" $units
echo "test: the default build (no docker, no gubernator)" >&2
go test -count=1 -run 'TestGubernatorNeedsItsBuildTag|TestDefaultBuild' ./envs/gateway ./cmd/rlverify .
echo "test: fuzz" >&2
bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
echo "test: go test (end to end)" >&2
go test -count=1 -p 1 -timeout 30m -tags "$tags" $integration
echo "test: examples module (the library as a user imports it)" >&2
(cd examples && go vet ./... && go test -count=1 ./...)
