#!/usr/bin/env bash
# Regenerates the published comparison matrix in README.md and
# docs/compare.md (data: docs/compare/matrix.json): every implementation
# under every plan of internal/matrix, each plan run twice so cells whose
# verdict depends on timing are marked unstable. Needs nginx and haproxy
# (bash scripts/install.sh --test). Takes several minutes. Extra arguments
# go to the generator, e.g. --runs 3, or --render to only rewrite the
# documents from the data after editing internal/matrix/explain.go.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
bin="$(mktemp -d)/rlverify"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -tags gubernator -o "$bin" ./cmd/rlverify  # the matrix has gubernator columns
go run ./internal/matrix/cmd/compare-matrix --rlverify "$bin" "$@"
