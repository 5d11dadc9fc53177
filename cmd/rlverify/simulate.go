package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
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
			o := rlverify.SimulateOptions{At: at, Limiters: specs}
			if startS != "" {
				t, err := time.Parse(time.RFC3339Nano, startS)
				if err != nil {
					return usageErr("--start %q: want RFC 3339 time: %v", startS, err)
				}
				o.Start = t
			}
			s, err := rlverify.Simulate(o)
			if err != nil {
				return fromLib(err)
			}
			_, err = io.WriteString(c.OutOrStdout(), s.String())
			return err
		},
	}
	c.Flags().StringVar(&at, "at", "", "comma-separated request times in seconds from the start (e.g. 0,0.1,0.25)")
	c.Flags().StringArrayVar(&specs, "limiter", nil, "NAME:capacity=K,rate=R or NAME:limit=N,window=W (repeatable)")
	c.Flags().StringVar(&startS, "start", "", "wall-clock instant of time 0 (matters for epoch-aligned fixed windows)")
	return c
}
