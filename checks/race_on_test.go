//go:build race

package checks

// raceEnabled: the tests run under the race detector, which makes pure
// computation 5–10 times slower; the largest differential tests shrink
// their histories then (every case they mix still occurs).
const raceEnabled = true
