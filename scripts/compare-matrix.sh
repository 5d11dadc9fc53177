#!/usr/bin/env bash
# Regenerates the published comparison matrix in README.md and
# docs/compare.md (data: docs/compare/matrix.json): every implementation
# under every plan of internal/matrix, each plan run twice so cells whose
# verdict depends on timing are marked unstable. Needs nginx, haproxy and
# envoy-ratelimit (bash scripts/install.sh --test). Takes several minutes.
# Extra arguments go to the generator, e.g. --runs 3, --render to only rewrite the
# documents from the data after editing internal/matrix/explain.go, or
# --column NAME to run one implementation only (beside token-bucket) and
# put its column into the committed data (a new column without rerunning
# the others; envoy/ratelimit's took 11 minutes at load 20).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
bin="$(mktemp -d)/rlverify"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -tags gubernator -o "$bin" ./cmd/rlverify  # the matrix has gubernator columns
go run ./internal/matrix/cmd/compare-matrix --rlverify "$bin" "$@"
