package rlverify

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// judgeMemFloor is the least soft memory limit judgeMemory sets: below
// it, the collector would run for every few MB a small run allocates.
const judgeMemFloor = 16 << 20

// judgeMemory caps the Go runtime's memory while an attack judges its own
// history at half as much again as the runtime held while it sent (at
// least judgeMemFloor), so that the judgement's garbage is collected
// rather than let the heap grow past what sending needed (issue 29, "the
// attack stays flat": a ten-minute soak's judgement otherwise took the
// process from 29 MB to up to 46 MB, at 18 MB of live heap). The limit is
// soft (runtime/debug.SetMemoryLimit): a judgement whose live heap needs
// more — many keys — gets it, the collector then held to about half the
// CPU. A limit the user set (GOMEMLIMIT, or the program's own) is kept. It
// returns what restores the previous limit.
func judgeMemory() (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		return func() {}
	}
	debug.SetMemoryLimit(judgeMemLimit(runtimeHeld()))
	return func() { debug.SetMemoryLimit(prev) }
}

// judgeMemLimit is the limit judgeMemory sets after sending held bytes.
func judgeMemLimit(held int64) int64 { return max(held*3/2, judgeMemFloor) }

// runtimeHeld is the memory the Go runtime holds from the system and has
// not handed back.
func runtimeHeld() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}
