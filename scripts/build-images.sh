#!/usr/bin/env bash
# Builds the two images the docker environment and compose/ use, without
# pulling anything (no registry is needed):
#
#   rlverify/limiter:local  FROM scratch + a static rlverify binary
#                           (CGO_ENABLED=0), ENTRYPOINT ["/rlverify"]
#   rlverify/redis:local    FROM scratch + this machine's redis-server and
#                           every library ldd lists, plus the loader
#
# scripts/test.sh then points the tests at rlverify/redis:local
# (RLVERIFY_REDIS_IMAGE) instead of an official image.
# Usage: scripts/build-images.sh [--limiter-only|--redis-only]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

LIMITER_IMAGE="${RLVERIFY_LIMITER_IMAGE:-rlverify/limiter:local}"
REDIS_IMAGE_LOCAL="rlverify/redis:local"
what="${1:-all}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

build_limiter() {
  local ctx="$work/limiter"
  mkdir -p "$ctx"
  echo "build-images: go build (static) for $LIMITER_IMAGE" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/rlverify" ./cmd/rlverify
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rlverify /rlverify
EXPOSE 8080 9090
ENTRYPOINT ["/rlverify"]
CMD ["serve", "--addr", "0.0.0.0:8080"]
DOCKERFILE
  docker build --pull=false -q -t "$LIMITER_IMAGE" --label rlverify.image=limiter "$ctx" >/dev/null
  # The image the tag pointed at before is dangling now: drop it.
  docker image prune -f --filter dangling=true --filter label=rlverify.image=limiter >/dev/null || true
  echo "build-images: built $LIMITER_IMAGE" >&2
}

build_redis() {
  local ctx="$work/redis" bin real lib
  bin="$(command -v redis-server || true)"
  if [ -z "$bin" ]; then
    echo "build-images: redis-server is not installed (apt-get install redis-server): cannot build $REDIS_IMAGE_LOCAL" >&2
    return 1
  fi
  real="$(readlink -f "$bin")"
  mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/data"
  # Debian's redis-server is a symlink to redis-check-rdb: the binary picks
  # its role from argv[0], so it must be installed under the server's name.
  cp "$real" "$ctx/rootfs/usr/local/bin/redis-server"
  # Every shared library ldd resolves, and the dynamic loader, at the same path.
  while read -r lib; do
    [ -n "$lib" ] || continue
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
  done < <(ldd "$real" | awk '/=> \//{print $3} /^[[:space:]]*\/[^ ]*ld-linux/{print $1}')
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/redis-server"]
CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
DOCKERFILE
  docker build --pull=false -q -t "$REDIS_IMAGE_LOCAL" --label rlverify.image=redis "$ctx" >/dev/null
  docker image prune -f --filter dangling=true --filter label=rlverify.image=redis >/dev/null || true
  echo "build-images: built $REDIS_IMAGE_LOCAL ($(redis-server --version | awk '{print $3}'))" >&2
}

case "$what" in
  all) build_limiter; build_redis ;;
  --limiter-only) build_limiter ;;
  --redis-only) build_redis ;;
  *) echo "usage: $0 [--limiter-only|--redis-only]" >&2; exit 2 ;;
esac

