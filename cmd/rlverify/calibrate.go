package main

import (
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/calibrate"
)

type calibrateFlags struct {
	traffic                                        []string
	format, keyField, keyRegex, tierField          string
	timeField, statusField, routeField, timeUnit   string
	skipMalformed                                  bool
	maxDisorder                                    time.Duration
	policyFile, maxRefused, maxPerKey, timelineKey string
	timelineRows                                   int
	abusiveKeys, abusiveStatus, hosts              []string
	compare, reports                               []string
	writePolicy                                    string
	force                                          bool
}

func calibrateCmd() *cobra.Command {
	var f calibrateFlags
	c := &cobra.Command{
		Use:   "calibrate --traffic FILE… [--policy candidate.yaml]",
		Short: "Replay recorded traffic through a policy's limiters: what it would refuse, and the numbers that meet a target",
		Long: `Read recorded requests (time and key, and status and route when the format
has them) and replay them, per key and per tier, through the reference
algorithms of the candidate policy in simulated time. The report says, per
tier, how many legitimate requests the policy would refuse, which keys and
which minutes (with the burst that caused them), and the smallest capacity K
(at the declared rate), the smallest rate (at the declared K), the smallest
count N (at the declared window) and the largest window (at the declared N)
that keep refusals at or below --max-refused, for every algorithm family,
and each family's refusals on the same traffic.

Formats (--from): combined (nginx/Apache combined log, with more fields
after the user agent allowed), json (one object per line), history (an
rlverify history), vegeta, k6, har (through the importers). gzip input is
recognised by its content and read as a stream. Access logs need the key:
--key-field ip|user|extraN (combined; extraN is the N-th field after the user
agent, such as "$http_x_api_key") or a JSON field (dotted for nested
objects), or --key-regex with one capture group. Lines without a key ("-")
are counted and left out; lines that cannot be read stop the run with their
file and line, or with --skip-malformed are skipped, counted and listed.
Lines up to --max-disorder earlier than a line before them are sorted into
place (servers log when a response ends); further back is an error.

Traffic marked abusive (--abusive-keys, --abusive-status) is replayed too
(it used up quota) but kept out of the target: the report shows how much of
it each policy refuses. --write-policy FILE writes the candidate with the
recommended capacity (bucket families) or limit (window families) of its
own family; rlverify audit --policy FILE then verifies the real service.
See docs/calibrate.md.

Examples:
  rlverify calibrate --traffic access.log --key-field extra1 --policy candidate.yaml
  rlverify calibrate --traffic access.log.gz --from combined --key-regex 'Bearer ([^"]+)' \
      --max-refused 0.1% --report text --report html=calibrate.html --write-policy recommended.yaml
  rlverify calibrate --traffic app.jsonl --from json --key-field headers.x-api-key --abusive-status 401,403`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runCalibrate(&f, c.InOrStdin(), c.OutOrStdout())
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.traffic, "traffic", nil, "recorded traffic: an access log, results or a history, gzip or not (repeat for rotated files; - for stdin)")
	fl.StringVar(&f.format, "from", calibrate.Combined, "format of the traffic (as import --from): "+strings.Join(calibrate.Formats(), ", "))
	fl.StringVar(&f.keyField, "key-field", "", "where the key is: combined ip, user or extraN; json a field (a.b for nested); vegeta attack or k6 a tag")
	fl.StringVar(&f.keyRegex, "key-regex", "", "instead of --key-field: a regular expression on the raw line whose first group is the key")
	fl.StringVar(&f.tierField, "tier-field", "", "where each request's tier is (json a field, combined extraN): it decides the key's tier instead of the policy's key prefixes")
	fl.StringVar(&f.timeField, "time-field", "time", "json: the field with the request time (RFC 3339, CLF or Unix time)")
	fl.StringVar(&f.statusField, "status-field", "status", "json: the field with the response status")
	fl.StringVar(&f.routeField, "route-field", "path", "json: the field with the request path")
	fl.StringVar(&f.timeUnit, "time-unit", "s", "json: unit of numeric times: s, ms, us, ns")
	fl.StringArrayVar(&f.hosts, "host", nil, "vegeta, k6, har: keep only requests to this host[:port] (repeat; a HAR's CDN requests carry no key)")
	fl.BoolVar(&f.skipMalformed, "skip-malformed", false, "skip lines that cannot be read (counted, the first 20 listed) instead of stopping")
	fl.DurationVar(&f.maxDisorder, "max-disorder", calibrate.DefaultMaxDisorder, "how far back a line's time may go and still be sorted into place")
	fl.StringVar(&f.policyFile, "policy", "", "candidate policy YAML (default: the built-in policy)")
	fl.StringVar(&f.maxRefused, "max-refused", "0.1%", "target: the largest share of each tier's legitimate requests refused (0.1% or 0.001; 0 for none)")
	fl.StringVar(&f.maxPerKey, "max-refused-per-key", "", "also: the largest share of any one legitimate key's requests refused")
	fl.StringSliceVar(&f.abusiveKeys, "abusive-keys", nil, "keys whose traffic is abusive (comma-separated, or @FILE with one key a line)")
	fl.StringSliceVar(&f.abusiveStatus, "abusive-status", nil, "statuses that mark a request abusive (401,403 or 400-499)")
	fl.StringArrayVar(&f.compare, "compare", nil, "another limiter to replay on the same traffic: NAME:capacity=K,rate=R or NAME:limit=N,window=W (repeatable)")
	fl.StringVar(&f.timelineKey, "timeline-key", "", "the key whose arrivals and decisions the timeline shows (default: the one refused most)")
	fl.IntVar(&f.timelineRows, "timeline-rows", calibrate.DefaultTimelineMax, "rows of the timeline")
	fl.StringArrayVar(&f.reports, "report", []string{"text"}, "FORMAT (to stdout) or FORMAT=FILE: "+strings.Join(calibrate.ReportFormats(), ", ")+" (repeatable)")
	fl.StringVar(&f.writePolicy, "write-policy", "", "write the candidate policy with the recommended numbers to this YAML file")
	fl.BoolVar(&f.force, "force", false, "replace files given to --report and --write-policy that already exist")
	return c
}

func runCalibrate(f *calibrateFlags, stdin io.Reader, stdout io.Writer) error {
	if len(f.traffic) == 0 {
		return usageErr("calibrate: --traffic FILE is required (an access log, results or a history)")
	}
	o := rlverify.CalibrateOptions{Read: calibrate.ReadOptions{
		Format: f.format, KeyField: f.keyField, TierField: f.tierField, TimeField: f.timeField, StatusField: f.statusField, RouteField: f.routeField,
		TimeUnit: f.timeUnit, SkipMalformed: f.skipMalformed, MaxDisorder: f.maxDisorder, Hosts: f.hosts,
	}}
	o.Calibrate.TimelineKey, o.Calibrate.TimelineMax = f.timelineKey, f.timelineRows
	text := rlverify.CalibrateText{MaxRefused: f.maxRefused, MaxRefusedPerKey: f.maxPerKey, AbusiveKeys: f.abusiveKeys,
		AbusiveStatus: f.abusiveStatus, Compare: f.compare, KeyRegex: f.keyRegex, Reports: f.reports, WritePolicy: f.writePolicy, Force: f.force}
	if err := text.Apply(&o); err != nil {
		return fromLib(err)
	}
	stdinUsed := false
	for _, t := range f.traffic {
		if t == "-" {
			if stdinUsed {
				return usageErr("--traffic - is given twice")
			}
			stdinUsed = true
			o.Inputs = append(o.Inputs, calibrate.Input{Name: "stdin", R: stdin})
			continue
		}
		o.Files = append(o.Files, t)
	}
	var err error
	if o.Calibrate.Policy, err = loadPolicy(f.policyFile); err != nil {
		return err
	}
	outs, err := text.Outputs()
	if err != nil {
		return fromLib(err)
	}
	o.Calibrate.Curves = slices.ContainsFunc(outs, func(x rlverify.CalibrateOutput) bool { return x.Format == calibrate.FormatHTML })
	rep, err := rlverify.Calibrate(o)
	if err != nil {
		// Every failure here is about the input: a file that cannot be
		// opened or read, its content, or a policy that does not fit it.
		return usageWrap(err)
	}
	return runErr(text.WriteCalibration(rep, o, outs, stdout))
}
