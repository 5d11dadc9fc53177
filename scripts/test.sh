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
echo "test: go vet" >&2
go vet ./...
echo "test: go test -race" >&2
go test -race -count=1 -timeout 20m ./...
