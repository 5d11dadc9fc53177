package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// streamFile is `rlbench stream FILE [judge]`: read FILE through
// history.Stream (send order, the default bounds) and print the events,
// wall and CPU time per event, the most events held back at once and the
// peak RSS: the streaming reader alone on histories too large for memory.
// With judge, also ReadRecords first and every streaming check
// (checks.Streamer) and the run figures (reports.Tally) on the way, against
// bench.PolicyYAML, and the Streamer's second pass when it asks for one. RLBENCH_CPUPROFILE=FILE writes a CPU profile.
func streamFile(args []string) error {
	if len(args) < 1 || len(args) > 2 || len(args) == 2 && args[1] != "judge" {
		return fmt.Errorf("usage: rlbench stream FILE [judge]")
	}
	judge := len(args) == 2
	if prof := os.Getenv("RLBENCH_CPUPROFILE"); prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	t0, c0 := time.Now(), cpuTime()
	var s *checks.Streamer
	var tally *reports.Tally
	if judge {
		pol, err := policy.Parse("bench-policy.yaml", []byte(bench.PolicyYAML))
		if err != nil {
			return err
		}
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		rec, n, err := history.ReadRecords(args[0], f)
		f.Close()
		if err != nil {
			return err
		}
		if s, err = checks.NewStreamer(rec, pol, checks.Options{}); err != nil {
			return err
		}
		s.SetEvents(n)
		tally = reports.NewTally(pol)
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	st := history.NewStream(args[0], f, history.StreamOptions{})
	held := 0
	var last int64
	for st.Next() {
		held = max(held, st.Held())
		e := st.Event()
		if e.Sent < last {
			return fmt.Errorf("event %d out of send order", e.ID)
		}
		last = e.Sent
		if judge {
			s.Add(e, st.Seq())
			tally.Add(e)
		}
	}
	if err := st.Err(); err != nil {
		return err
	}
	n := st.Events()
	again := judge && s.Again()
	if again {
		// Oversell judges a second time the segments its first pass could
		// not clear.
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		st = history.NewStream(args[0], f, history.StreamOptions{})
		for st.Next() {
			s.AddAgain(st.Event(), st.Seq())
		}
		if err := st.Err(); err != nil {
			return err
		}
	}
	wall, cpu := time.Since(t0), cpuTime()-c0
	what := "read"
	if judge {
		what = "read and judged (" + fmt.Sprint(checks.Streamable()) + ", run figures"
		if again {
			what += "; a second pass"
		}
		what += ")"
		for _, r := range s.Results() {
			what += fmt.Sprintf("; %s %s", r.Name, r.Verdict)
		}
	}
	fmt.Printf("%s: events %d wall %s cpu %s = %.2f M events/s wall, %.0f CPU-ns/event; held at most %d; peak RSS (VmHWM) %s\n",
		what, n, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(n)/wall.Seconds()/1e6, float64(cpu)/float64(max(n, 1)), held, mb(vmHWM(os.Getpid())))
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
