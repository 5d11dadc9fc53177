#!/usr/bin/env bash
# Builds envoyproxy/ratelimit (Envoy's reference rate-limit service, a real
# subject of the grpc:// target's tests) from the Go module proxy into
# $(go env GOPATH)/bin/envoy-ratelimit, in a scratch module so its
# dependencies never enter rlverify's go.mod. Safe to run again: a binary of
# the same version is kept. The tests find it there (or at
# $RLVERIFY_ENVOY_RATELIMIT); CI builds it once through install.sh --test.
set -euo pipefail
export PATH="/usr/local/go/bin:$PATH"
version=v1.4.1-0.20260122083618-3fb702589d36
bin="$(go env GOPATH)/bin/envoy-ratelimit"
if [ -x "$bin" ] && [ "$(cat "$bin.version" 2>/dev/null || true)" = "$version" ]; then
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$(dirname "$bin")"
(
  cd "$scratch"
  printf 'module rlverify.local/envoyratelimit\n\ngo 1.26\n' > go.mod
  if ! out=$(GOFLAGS=-mod=mod go get "github.com/envoyproxy/ratelimit@$version" 2>&1); then
    echo "envoy-ratelimit: go get github.com/envoyproxy/ratelimit@$version failed:" >&2
    echo "$out" >&2
    exit 1
  fi
  GOFLAGS=-mod=mod go build -o "$bin.tmp" github.com/envoyproxy/ratelimit/src/service_cmd
)
mv "$bin.tmp" "$bin"
echo "$version" > "$bin.version"
echo "install: envoy-ratelimit $version ($(du -h "$bin" | cut -f1))" >&2
