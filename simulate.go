package rlverify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// SimulateOptions say which in-memory limiters to run in simulated time
// and when the requests arrive.
type SimulateOptions struct {
	// At are the request times in seconds from the start, comma-separated
	// (0,0.1,0.25), never going back.
	At string
	// Limiters are NAME:capacity=K,rate=R or NAME:limit=N,window=W
	// (catalog.ParseLimit).
	Limiters []string
	// Start is the wall-clock instant of time 0 (it matters for
	// epoch-aligned fixed windows); a fixed instant when zero.
	Start time.Time
}

// Simulation is each limiter's decision on each request time.
type Simulation struct {
	Names []string
	Times []time.Duration
	// Allowed[i][j] is limiter j's decision on request i.
	Allowed [][]bool
}

// MaxSimulateTimes bounds SimulateOptions.At.
const MaxSimulateTimes = 1_000_000

// Simulate runs every limiter on one key at the given times. Errors in
// the options are *OptionError naming the field.
func Simulate(o SimulateOptions) (*Simulation, error) {
	times, err := parseTimes(o.At)
	if err != nil {
		return nil, err
	}
	if len(o.Limiters) == 0 {
		return nil, fieldErr("Limiters", "is empty: give at least one NAME:PARAMS")
	}
	t0 := o.Start
	if t0.IsZero() {
		t0 = time.Unix(1_700_000_000, 0)
	}
	s := &Simulation{Times: times, Allowed: make([][]bool, len(times))}
	ctx := context.Background()
	for _, spec := range o.Limiters {
		name, entry, l, err := catalog.ParseLimit(spec)
		if err != nil {
			return nil, &OptionError{Field: "Limiters", Err: err}
		}
		lim, err := entry.New([]policy.Limit{l}, catalog.Env{})
		if err != nil {
			return nil, fieldErr("Limiters", "%q: %w", spec, err)
		}
		s.Names = append(s.Names, name)
		for i, t := range times {
			d, err := lim.Allow(ctx, t0.Add(t), "sim", 1)
			if err != nil {
				return nil, err
			}
			s.Allowed[i] = append(s.Allowed[i], d.Allowed)
		}
	}
	return s, nil
}

func parseTimes(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fieldErr("At", "needs request times, e.g. 0,0.1,0.2")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxSimulateTimes {
		return nil, fieldErr("At", "holds %d times; at most %d", len(parts), MaxSimulateTimes)
	}
	out := make([]time.Duration, 0, len(parts))
	var prev time.Duration
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f < 0 || f > 1e7 {
			return nil, fieldErr("At", "item %d %q is not a time in seconds ≥ 0", i+1, p)
		}
		d := time.Duration(f*1e9 + 0.5)
		if d < prev {
			return nil, fieldErr("At", "item %d (%s) goes back in time", i+1, p)
		}
		prev = d
		out = append(out, d)
	}
	return out, nil
}

// String is the simulation as a table: one row per request time, ALLOW or
// DENY per limiter.
func (s *Simulation) String() string {
	var b strings.Builder
	row := func(first string, cells []string) {
		line := fmt.Sprintf("%9s", first)
		for _, c := range cells {
			line += fmt.Sprintf("   %-14s", c)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	row("t (s)", s.Names)
	for i, t := range s.Times {
		ts := strconv.FormatFloat(t.Seconds(), 'f', -1, 64)
		if !strings.Contains(ts, ".") {
			ts += ".0"
		}
		cells := make([]string, len(s.Names))
		for j, ok := range s.Allowed[i] {
			cells[j] = map[bool]string{true: "ALLOW", false: "DENY"}[ok]
		}
		row(ts, cells)
	}
	return b.String()
}
