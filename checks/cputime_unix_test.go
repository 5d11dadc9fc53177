//go:build unix

package checks

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process has used so far:
// benchmarks report it beside wall time because this machine is shared.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
