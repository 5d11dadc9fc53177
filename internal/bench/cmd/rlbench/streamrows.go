package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/bench"
)

// streamRows are the streaming judgement's rows (issue 29): 10^6 up to
// 10^streamMax events of one key and of 10^5 keys, each written to a file
// (bench.WriteGenerated) and judged by `rlbench stream FILE judge` in a
// child process, one at a time: wall time, CPU time per event (user +
// system of the child, all its threads) and peak RSS (VmHWM). A file of
// 10^8 events is about 20 GB, removed after its row.
func (c *config) streamRows(ctx context.Context, t *bench.Table) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	n := 1
	for exp := 1; exp <= c.streamMax; exp++ {
		n *= 10
		if exp < 6 {
			continue
		}
		for _, keys := range []int{1, 100_000} {
			file := c.tmpFile(fmt.Sprintf("stream-1e%d-%d.jsonl", exp, keys))
			if err := bench.WriteGenerated(file, n, keys); err != nil {
				os.Remove(file)
				return err
			}
			cmd := exec.CommandContext(ctx, self, "stream", file, "judge")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			t0 := time.Now()
			peak, err := runPeak(cmd)
			wall := time.Since(t0)
			os.Remove(file)
			if err != nil {
				return fmt.Errorf("rlbench stream %s judge: %w: %.300s", file, err, out.String())
			}
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			t.Check("stream", fmt.Sprintf("history.Stream + checks.Streamer %v + reports.Tally, 10^%d events of %d key(s): time, CPU, peak RSS", checks.Streamable(), exp, keys),
				fmt.Sprintf("%s = %.2f M events/s; CPU %.0f ns/event; peak RSS %s", bench.Dur(float64(wall)), float64(n)/wall.Seconds()/1e6, float64(cpu)/float64(n), mb(peak)),
				"≤ 2 GB peak RSS", float64(peak), 2e9, true)
		}
	}
	return nil
}
