package main

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/rlverify/rlverify/history"
)

// streamFile is `rlbench stream FILE`: read FILE through history.Stream
// (send order, the default reorder bound) and print the events, wall and
// CPU time per event, the most events held back at once and the peak RSS,
// to measure the streaming reader alone on histories too large for memory.
func streamFile(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: rlbench stream FILE")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	t0, c0 := time.Now(), cpuTime()
	st := history.NewStream(args[0], f, history.StreamOptions{})
	held := 0
	var last int64
	for st.Next() {
		held = max(held, st.Held())
		if e := st.Event(); e.Sent < last {
			return fmt.Errorf("event %d out of send order", e.ID)
		} else {
			last = e.Sent
		}
	}
	if err := st.Err(); err != nil {
		return err
	}
	wall, cpu := time.Since(t0), cpuTime()-c0
	n := st.Events()
	fmt.Printf("events %d wall %s cpu %s = %.2f M events/s wall, %.0f CPU-ns/event; held at most %d; peak RSS (VmHWM) %s\n",
		n, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(n)/wall.Seconds()/1e6, float64(cpu)/float64(max(n, 1)), held, mb(vmHWM(os.Getpid())))
	return nil
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
