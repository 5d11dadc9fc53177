#!/usr/bin/env bash
# Runs every fuzz target of rlverify for SECONDS each (default 10), one at a
# time with one worker, so it can share a small CI machine. Each target's
# seed corpus (testdata/fuzz/FuzzXxx/) also runs in the plain `go test`.
#
#   bash scripts/fuzz.sh        # 10 s per target
#   bash scripts/fuzz.sh 600    # 10 min per target
#
# -fuzzminimizetime is bounded in executions: minimising a new input with
# the default 60 s budget stalls the plan fuzzer (its test binary carries the
# coverage counters of every dependency, so executions are slow).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
secs="${1:-10}"

# The targets are found in the source (func FuzzXxx(f *testing.F) in a
# _test.go file), not by `go test -list ./...`, which builds and links every
# package's test binary only to print names (about two minutes in CI).
pairs=()
while IFS= read -r file; do
  dir=$(dirname "$file")
  pkg=$(go list "./${dir#./}")
  while IFS= read -r t; do
    pairs+=("$pkg $t")
  done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "$file")
done < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v -E '^\./(vendor|examples)/' | sort)

found=0
for pair in "${pairs[@]}"; do
  read -r pkg t <<<"$pair"
  found=$((found + 1))
  echo "fuzz: $pkg $t for ${secs}s" >&2
  # The fuzzing engine sometimes ends a time-boxed run with "context
  # deadline exceeded" while stopping its worker on a loaded machine, with
  # no failing input: that is the toolchain, not a finding. Run such a
  # target once more; a real failure (it writes testdata/fuzz/…) still fails.
  out=$(go test -run '^$' -fuzz "^${t}\$" -fuzztime "${secs}s" -fuzzminimizetime 200x -parallel 1 "$pkg" 2>&1) && { echo "$out"; continue; }
  echo "$out"
  if grep -q "context deadline exceeded" <<<"$out" && ! grep -q "Failing input written" <<<"$out"; then
    echo "fuzz: $t stopped with the engine's deadline error and no failing input; running it again" >&2
    go test -run '^$' -fuzz "^${t}\$" -fuzztime "${secs}s" -fuzzminimizetime 200x -parallel 1 "$pkg"
    continue
  fi
  exit 1
done
if [ "$found" -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: $found targets passed" >&2
