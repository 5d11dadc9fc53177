package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/internal/bench"
)

// ---- scaling past 10^6, in a child process for its peak RSS ----

// scaleResult is what `rlbench scale N KEYS` prints: checks.Run on
// bench.Generate(N, KEYS), once.
type scaleResult struct {
	Wall, CPU float64 // ns
	Alloc     uint64  // bytes allocated by the checks
	Peak      int64   // the child's peak RSS (VmHWM), bytes
}

// genFile is `rlbench gen FILE EVENTS KEYS`: the synthetic history the
// checks rows judge, written to FILE (its policy is bench.PolicyYAML), for
// profiling `rlverify check` by hand.
func genFile(args []string) error {
	if len(args) == 4 && args[0] == "access-log" {
		n, err1 := strconv.Atoi(args[2])
		keys, err2 := strconv.Atoi(args[3])
		if err := errors.Join(err1, err2); err != nil || n <= 0 || keys <= 0 {
			return fmt.Errorf("rlbench gen access-log: LINES and KEYS must be positive whole numbers, not %q and %q", args[2], args[3])
		}
		return writeAccessLog(args[1], bench.AccessLogOptions{Lines: n, Keys: keys, PerSecond: 50, Seed: 1, Scraper: true})
	}
	if len(args) != 3 {
		return fmt.Errorf("usage: rlbench gen FILE EVENTS KEYS, or rlbench gen access-log FILE LINES KEYS")
	}
	n, err1 := strconv.Atoi(args[1])
	keys, err2 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2); err != nil || n <= 0 || keys <= 0 {
		return fmt.Errorf("rlbench gen: EVENTS and KEYS must be positive whole numbers, not %q and %q", args[1], args[2])
	}
	return bench.WriteGenerated(args[0], n, keys)
}

// scaleChild is the child's side of scaleRun.
func scaleChild(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: rlbench scale EVENTS KEYS")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("events %q: %w", args[0], err)
	}
	keys, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("keys %q: %w", args[1], err)
	}
	w, cpu, alloc, err := runChecks(bench.Generate(n, keys), benchPolicy())
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(scaleResult{Wall: w, CPU: cpu, Alloc: alloc, Peak: vmHWM(os.Getpid())})
}

// scaleRun runs the checks on n events of keys keys in a child process and
// returns its result and peak RSS in bytes (the history in memory
// included).
func scaleRun(ctx context.Context, n, keys int) (scaleResult, int64, error) {
	self, err := os.Executable()
	if err != nil {
		return scaleResult{}, 0, err
	}
	cmd := exec.CommandContext(ctx, self, "scale", strconv.Itoa(n), strconv.Itoa(keys))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return scaleResult{}, 0, fmt.Errorf("rlbench scale %d %d: %w: %.300s", n, keys, err, out.String())
	}
	var r scaleResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return scaleResult{}, 0, fmt.Errorf("rlbench scale %d %d: %w: %.300s", n, keys, err, out.String())
	}
	return r, r.Peak, nil
}

// vmHWM is process pid's peak resident set in bytes so far (VmHWM in
// /proc/PID/status; 0 when unknown). Not getrusage's ru_maxrss: Linux
// carries a parent's peak across fork and exec into the child's, so every
// child of a large rlbench would report rlbench's.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// runPeak runs cmd to its end and returns its peak resident set: VmHWM,
// read every 10 ms while it runs (it only grows, so the last reading is
// the peak up to 10 ms before the end).
func runPeak(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var peak int64
	done, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, vmHWM(cmd.Process.Pid))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-polled
	return peak, err
}

// scaleLarge adds the 10^7-event rows: one key and 10^5 keys, one round
// each (a round takes tens of seconds and GBs of memory).
func (c *config) scaleLarge(ctx context.Context, t *bench.Table) error {
	const n = 10_000_000
	for _, keys := range []int{1, 100_000} {
		r, rss, err := scaleRun(ctx, n, keys)
		if err != nil {
			return err
		}
		t.Check("scaling", fmt.Sprintf("checks, 10^7 events of %d key(s), one round: time, peak RSS", keys),
			fmt.Sprintf("%s = %.0f ns/event (CPU %.0f ns/event); %d B/ev allocated by the checks; peak RSS %s (VmHWM, the history in memory included) = %d B/event",
				bench.Dur(r.Wall), r.Wall/n, r.CPU/n, r.Alloc/n, mb(rss), rss/n),
			"≤ 400 ns/event", r.Wall/n, 400, true)
	}
	return nil
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }

// checkMemory measures `rlverify check` on 10^6 events of one key: wall
// time and peak RSS per event.
func (c *config) checkMemory(ctx context.Context, t *bench.Table) error {
	if c.rlverify == "" {
		return nil
	}
	const n = 1_000_000
	file, pfile := c.tmpFile("bench-1m-1key.jsonl"), c.tmpFile("bench-policy.yaml")
	if err := os.WriteFile(pfile, []byte(bench.PolicyYAML), 0o644); err != nil {
		return err
	}
	if err := bench.WriteHistory(file, bench.Generate(n, 1)); err != nil {
		return err
	}
	defer os.Remove(file)
	var walls, rsss []float64
	for i := 0; i < c.rounds; i++ {
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, c.rlverify, "check", "--history", file, "--policy", pfile, "--format", "json")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		peak, err := runPeak(cmd)
		if err != nil {
			return fmt.Errorf("rlverify check: %v: %.500s", err, out.String())
		}
		walls, rsss = append(walls, float64(time.Since(t0))), append(rsss, float64(peak))
	}
	rss := bench.Median(rsss)
	t.Add("scaling", "`rlverify check` on 10^6 events of one key: time, peak RSS (runs)",
		fmt.Sprintf("%s (%s); peak RSS (VmHWM) %s = %.0f B/event (%s)", bench.Dur(bench.Median(walls)), bench.Join(walls, bench.Dur),
			mb(int64(rss)), rss/n, bench.Join(rsss, func(x float64) string { return mb(int64(x)) })), "", "")
	return nil
}

// ---- importers ----

// importRows times importers.Import of 100,000 requests in each format.
func (c *config) importRows(_ context.Context, t *bench.Table) error {
	const n = 100_000
	p := benchPolicy()
	for _, f := range importers.Formats() {
		in, err := bench.ImportInput(f, n)
		if err != nil {
			return err
		}
		var rates []float64
		for i := 0; i < c.rounds; i++ {
			w := history.NewWriter(io.Discard)
			t0 := time.Now()
			if _, err := importers.Import(f, bytes.NewReader(in), w, importers.Options{Policy: p, Key: bench.ImportKey, Name: f}); err != nil {
				return fmt.Errorf("import %s: %w", f, err)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			rates = append(rates, n/time.Since(t0).Seconds())
		}
		m := bench.Median(rates)
		t.Add("import", fmt.Sprintf("importers.Import %s, 10^5 requests: requests/s (runs)", f),
			fmt.Sprintf("%s (%s); %.1f MB/s of input (%d B/request)", bench.Rate(m), bench.Join(rates, bench.Rate),
				m*float64(len(in))/n/1e6, len(in)/n), "", "")
	}
	return nil
}

// ---- audit ----

// auditRow times `rlverify audit` of one external target, every plan,
// against the reference service (`rlverify serve`, token bucket, built-in
// policy) on 127.0.0.1.
func (c *config) auditRow(ctx context.Context, t *bench.Table) error {
	if c.rlverify == "" {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	srv := exec.CommandContext(ctx, c.rlverify, "serve", "--addr", addr)
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	if err := srv.Start(); err != nil {
		return fmt.Errorf("rlverify serve: %w", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := waitListening(ctx, addr); err != nil {
		return err
	}
	out := c.tmpFile("audit")
	defer os.RemoveAll(out)
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, c.rlverify, "audit", "--target", "http://"+addr, "--out", out, "--fail-on", "none")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	peak, err := runPeak(cmd)
	if err != nil {
		return fmt.Errorf("rlverify audit: %w: %.500s", err, lastLines(buf.String(), 5))
	}
	wall := time.Since(t0)
	plans := strings.Count("\n"+buf.String(), "\naudit: ") // one progress line per plan
	t.Add("audit", "`rlverify audit --target` of `rlverify serve` (every plan, one round)",
		fmt.Sprintf("%s wall, %d plans, peak RSS %s", wall.Round(100*time.Millisecond), plans, mb(peak)), "", "")
	return nil
}

// waitListening waits up to 5 s for addr to accept connections.
func waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := (&net.Dialer{Timeout: 200 * time.Millisecond}).DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rlverify serve on %s: not listening after 5s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}

// writeAccessLog writes bench.AccessLog to file.
func writeAccessLog(file string, o bench.AccessLogOptions) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := bench.AccessLog(f, o); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ---- calibrate ----

const calibratePolicy = bench.CalibratePolicyYAML

// calibrateRow times `rlverify calibrate` of a 10^7-line nginx access log
// (bench.AccessLog: 10^5 keys, 50 lines a second, a scraper), read from
// disk: wall time, lines per second and peak RSS. The goal is 20 s.
func (c *config) calibrateRow(ctx context.Context, t *bench.Table) error {
	if c.rlverify == "" {
		return nil
	}
	const lines = 10_000_000
	log, pol := c.tmpFile("access.log"), c.tmpFile("calibrate-policy.yaml")
	defer os.Remove(log)
	if err := writeAccessLog(log, bench.AccessLogOptions{Lines: lines, Keys: 100_000, PerSecond: 50, Seed: 1, Scraper: true}); err != nil {
		return err
	}
	if err := os.WriteFile(pol, []byte(calibratePolicy), 0o644); err != nil {
		return err
	}
	st, err := os.Stat(log)
	if err != nil {
		return err
	}
	var walls []float64
	var peak int64
	for i := 0; i < c.rounds; i++ {
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, c.rlverify, "calibrate", "--traffic", log, "--key-field", "extra1",
			"--policy", pol, "--abusive-keys", "free-scraper", "--report", "json")
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &errb
		p, err := runPeak(cmd)
		if err != nil {
			return fmt.Errorf("rlverify calibrate: %w: %.500s", err, lastLines(errb.String(), 5))
		}
		walls = append(walls, time.Since(t0).Seconds())
		peak = max(peak, p)
	}
	m := bench.Median(walls)
	t.Check("calibrate", "`rlverify calibrate` of a 10^7-line nginx access log (10^5 keys, 2 tiers), s wall (runs)",
		fmt.Sprintf("%.1f s (%s); %.2f M lines/s, %.0f MB of log, peak RSS %s", m,
			bench.Join(walls, func(v float64) string { return fmt.Sprintf("%.1f", v) }), lines/m/1e6, float64(st.Size())/1e6, mb(peak)),
		"≤ 20 s", m, 20, true)
	return nil
}
