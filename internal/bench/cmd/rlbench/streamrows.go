package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// streamRows are the streaming judgement's rows (issue 29): 10^6 up to
// 10^streamMax events of one key, of 1,000 keys and of 10^5 keys, each
// written to a file (bench.WriteGenerated) and judged in a child process,
// one at a time, twice: by `rlbench stream FILE judge` (the stream and the
// checks alone) and by `rlverify check --checks oversell,token-bounds,headers`
// (the command end to end on its streaming path: records, both passes,
// the document), and — when every check streams for the bench policy
// (checks.StreamChecks) — by `rlverify check` with every check, the
// command's default (else a row says why it was not run: judged in memory,
// 10^7 events would need gigabytes). Each row gives wall time and events/s, CPU time per
// event (user + system of the child, all its threads), peak RSS (VmHWM)
// and the load average before and after it: on a shared machine only the
// CPU time compares. A file of 10^8 events is about 20 GB, removed after
// its rows.
func (c *config) streamRows(ctx context.Context, t *bench.Table) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	pfile := c.tmpFile("stream-policy.yaml")
	if err := os.WriteFile(pfile, []byte(bench.PolicyYAML), 0o644); err != nil {
		return err
	}
	defer os.Remove(pfile)
	p, err := policy.Parse(pfile, []byte(bench.PolicyYAML))
	if err != nil {
		return err
	}
	_, every, why := checks.StreamChecks(p, checks.Options{})
	if !every && c.rlverify != "" {
		t.Add("stream", "`rlverify check` with every check (the default)", "not run: it would judge in memory ("+why+")", "every check streams", "BELOW")
	}
	n := 1
	for exp := 1; exp <= c.streamMax; exp++ {
		n *= 10
		if exp < 6 {
			continue
		}
		for _, keys := range []int{1, 1_000, 100_000} {
			file := c.tmpFile(fmt.Sprintf("stream-1e%d-%d.jsonl", exp, keys))
			if err := bench.WriteGenerated(file, n, keys); err != nil {
				os.Remove(file)
				return err
			}
			err := c.streamRow(ctx, t, exp, n, keys, "history.Stream + checks.Streamer "+fmt.Sprint(checks.Streamable())+" + reports.Tally", exec.CommandContext(ctx, self, "stream", file, "judge"), "≤ 2 GB peak RSS")
			if err == nil && c.rlverify != "" {
				err = c.streamRow(ctx, t, exp, n, keys, "`rlverify check --checks oversell,token-bounds,headers` (streaming path, document)",
					exec.CommandContext(ctx, c.rlverify, "check", "--history", file, "--policy", pfile, "--checks", "oversell,token-bounds,headers", "--format", "json"), "≥ 2 M events/s at 10^7; ≤ 2 GB peak RSS")
			}
			if err == nil && c.rlverify != "" && every {
				err = c.streamRow(ctx, t, exp, n, keys, "`rlverify check` with every check (streaming path, document)",
					exec.CommandContext(ctx, c.rlverify, "check", "--history", file, "--policy", pfile, "--format", "json"), "≥ 2 M events/s at 10^7; ≤ 2 GB peak RSS")
			}
			os.Remove(file)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// streamRow runs cmd, which judges n events of keys keys, and adds its row.
// A row of `rlverify check` at 10^7 events or more is ok when it judged at
// least 2 M events/s and peaked at 2 GB or less; the others on the peak.
func (c *config) streamRow(ctx context.Context, t *bench.Table, exp, n, keys int, what string, cmd *exec.Cmd, target string) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &out
	if cmd.Args[1] == "stream" {
		cmd.Stdout = &out
	}
	before := loadAverage()
	t0 := time.Now()
	peak, err := runPeak(cmd)
	wall := time.Since(t0)
	if err != nil {
		return fmt.Errorf("%s: %w: %.300s", strings.Join(cmd.Args, " "), err, out.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	rate := float64(n) / wall.Seconds()
	st := "ok"
	if peak > 2e9 || strings.HasPrefix(target, "≥") && exp >= 7 && rate < 2e6 {
		st = "BELOW"
	}
	row := fmt.Sprintf("%s, 10^%d events of %d key(s): time, CPU, peak RSS, load", what, exp, keys)
	value := fmt.Sprintf("%s = %.2f M events/s; CPU %.0f ns/event; peak RSS %s; load %s → %s", bench.Dur(float64(wall)), rate/1e6, float64(cpu)/float64(n), mb(peak), before, loadAverage())
	t.Add("stream", row, value, target, st)
	// The table comes at the end; a run of 10^8 events takes an hour, so
	// each row is also said as it is measured (a run cut short keeps them).
	fmt.Fprintf(os.Stderr, "  %s: %s (%s)\n", row, value, st)
	return nil
}

// loadAverage is the one-minute load average ("?" where it cannot be read).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
