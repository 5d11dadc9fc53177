package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

func simulateCmd() *cobra.Command {
	var (
		at     string
		specs  []string
		startS string
	)
	c := &cobra.Command{
		Use:   "simulate --at T1,T2,… --limiter NAME:PARAM=V,… [--limiter …]",
		Short: "Run limiters in simulated time on given request times and print each decision",
		Long: `Run in-memory limiters in simulated time. Each --limiter is NAME:PARAMS with
capacity=K,rate=R (R per second, or 100/min) or limit=N,window=W. The output
has one row per request time: the time, then ALLOW or DENY per limiter.

  rlverify simulate --at 0,0.1,0.2 --limiter token-bucket:capacity=5,rate=2 \
      --limiter sliding-log:limit=5,window=1s`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			times, err := parseTimes(at)
			if err != nil {
				return usageWrap(err)
			}
			if len(specs) == 0 {
				return usageErr("simulate: give at least one --limiter NAME:PARAMS")
			}
			t0 := time.Unix(1_700_000_000, 0)
			if startS != "" {
				t, err := time.Parse(time.RFC3339Nano, startS)
				if err != nil {
					return usageErr("--start %q: want RFC 3339 time: %v", startS, err)
				}
				t0 = t
			}
			type sim struct {
				name string
				lim  limiters.Limiter
			}
			var sims []sim
			for _, s := range specs {
				name, lim, err := buildSim(s)
				if err != nil {
					return usageWrap(err)
				}
				sims = append(sims, sim{name, lim})
			}
			out := c.OutOrStdout()
			header := fmt.Sprintf("%9s", "t (s)")
			for _, s := range sims {
				header += fmt.Sprintf("   %-14s", s.name)
			}
			fmt.Fprintln(out, strings.TrimRight(header, " "))
			ctx := context.Background()
			for _, t := range times {
				ts := strconv.FormatFloat(t.Seconds(), 'f', -1, 64)
				if !strings.Contains(ts, ".") {
					ts += ".0"
				}
				row := fmt.Sprintf("%9s", ts)
				for _, s := range sims {
					d, err := s.lim.Allow(ctx, t0.Add(t), "sim", 1)
					if err != nil {
						return runErr(err)
					}
					word := "DENY"
					if d.Allowed {
						word = "ALLOW"
					}
					row += fmt.Sprintf("   %-14s", word)
				}
				fmt.Fprintln(out, strings.TrimRight(row, " "))
			}
			return nil
		},
	}
	c.Flags().StringVar(&at, "at", "", "comma-separated request times in seconds from the start (e.g. 0,0.1,0.25)")
	c.Flags().StringArrayVar(&specs, "limiter", nil, "NAME:capacity=K,rate=R or NAME:limit=N,window=W (repeatable)")
	c.Flags().StringVar(&startS, "start", "", "wall-clock instant of time 0 (matters for epoch-aligned fixed windows)")
	return c
}

func parseTimes(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("simulate: --at needs request times, e.g. --at 0,0.1,0.2")
	}
	parts := strings.Split(s, ",")
	if len(parts) > 1_000_000 {
		return nil, fmt.Errorf("simulate: %d times; at most 1000000", len(parts))
	}
	out := make([]time.Duration, 0, len(parts))
	var prev time.Duration
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f < 0 || f > 1e7 {
			return nil, fmt.Errorf("simulate: --at item %d %q is not a time in seconds ≥ 0", i+1, p)
		}
		d := time.Duration(f*1e9 + 0.5)
		if d < prev {
			return nil, fmt.Errorf("simulate: --at item %d (%s) goes back in time", i+1, p)
		}
		prev = d
		out = append(out, d)
	}
	return out, nil
}

// buildSim parses NAME:k=v,… into an in-memory limiter.
func buildSim(spec string) (string, limiters.Limiter, error) {
	name, entry, l, err := parseLimitSpec(spec)
	if err != nil {
		return "", nil, err
	}
	lim, err := entry.New([]policy.Limit{l}, catalog.Env{})
	if err != nil {
		return "", nil, fmt.Errorf("--limiter %q: %w", spec, err)
	}
	return name, lim, nil
}

// parseLimitSpec parses NAME:k=v,… (a memory limiter of the catalog and
// its numbers) into the catalog entry and a validated limit.
func parseLimitSpec(spec string) (string, catalog.Entry, policy.Limit, error) {
	name, params, _ := strings.Cut(spec, ":")
	entry, err := catalog.Lookup(name, catalog.Memory)
	if err != nil {
		return "", catalog.Entry{}, policy.Limit{}, fmt.Errorf("--limiter %q: %w", spec, err)
	}
	l := policy.Limit{Algorithm: entry.Algorithm}
	for _, kv := range strings.Split(params, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", catalog.Entry{}, policy.Limit{}, fmt.Errorf("--limiter %q: parameter %q is not key=value", spec, kv)
		}
		switch strings.TrimSpace(k) {
		case "capacity", "K":
			l.Capacity, err = strconv.ParseInt(v, 10, 64)
		case "rate", "r":
			var r float64
			r, err = policy.ParseRate(v)
			l.Rate = policy.Rate(r)
		case "limit", "N":
			l.Count, err = strconv.ParseInt(v, 10, 64)
		case "window", "W":
			var w time.Duration
			w, err = policy.ParseDuration(v)
			l.Window = policy.Duration(w)
		default:
			return "", catalog.Entry{}, policy.Limit{}, fmt.Errorf("--limiter %q: unknown parameter %q (want capacity, rate, limit, window)", spec, k)
		}
		if err != nil {
			return "", catalog.Entry{}, policy.Limit{}, fmt.Errorf("--limiter %q: %s: %w", spec, k, err)
		}
	}
	p := &policy.Policy{Tiers: []policy.Tier{{Name: "sim", Limits: []policy.Limit{l}}}}
	if err := p.Validate(); err != nil {
		return "", catalog.Entry{}, policy.Limit{}, fmt.Errorf("--limiter %q: %w", spec, err)
	}
	return name, entry, p.Tiers[0].Limits[0], nil
}
