package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as "1.5s", "100ms", "1m" or a
// plain number of seconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a Go duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if err := wantScalar(n, "a duration such as 500ms, 2s or 1m"); err != nil {
		return err
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// wantScalar rejects a list or mapping (or an alias to one) where a single
// value belongs; without it such a node reads as an empty string and the
// message ("empty duration") hides the mistake.
func wantScalar(n *yaml.Node, want string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.SequenceNode:
		return fmt.Errorf("line %d: want %s, not a list", n.Line, want)
	case yaml.MappingNode:
		return fmt.Errorf("line %d: want %s, not a mapping", n.Line, want)
	}
	return nil
}

// MarshalYAML writes d as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ParseDuration parses "1.5s", "100ms", "1m", "1d" (24h) or seconds as a number.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e9 {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
		// !(0 ≤ n ≤ 1e5) also rejects NaN, which compares false with anything.
		if err != nil || !(n >= 0 && n <= 1e5) {
			return 0, fmt.Errorf("duration %q: want e.g. 1d, 90s, 1m30s", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. 500ms, 2s, 1m", s)
	}
	return d, nil
}

// Rate is an amount per second, written in YAML as "5/s", "100/min",
// "10000/m", "1000/h", "50000/day" or a plain number per second.
type Rate float64

// UnmarshalYAML accepts "N/unit" or a number per second.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if err := wantScalar(n, "a rate such as 5/s or 100/min"); err != nil {
		return err
	}
	v, err := ParseRate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = Rate(v)
	return nil
}

// ParseRate parses "N/unit" (unit s, sec, second, m, min, minute, h, hour,
// d, day, or a duration such as 10s) or a plain number per second.
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, unit, found := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("rate %q: want e.g. 5/s, 100/min or a number per second", s)
	}
	if !found {
		return n, nil
	}
	var per time.Duration
	switch strings.TrimSpace(unit) {
	case "s", "sec", "second":
		per = time.Second
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	case "d", "day":
		per = 24 * time.Hour
	default:
		per, err = ParseDuration(unit)
		if err != nil || per <= 0 {
			return 0, fmt.Errorf("rate %q: unknown unit %q (use s, min, h, day or a duration)", s, unit)
		}
	}
	r := n / per.Seconds()
	if math.IsInf(r, 0) || math.IsNaN(r) {
		// A huge count over a tiny unit ("1e308/1ns") overflows.
		return 0, fmt.Errorf("rate %q is out of range", s)
	}
	return r, nil
}

// FormatRate writes r (per second) in the most readable unit.
func FormatRate(r float64) string {
	switch {
	case r == 0:
		return "0/s"
	case r >= 1 && math.Abs(r*100-math.Round(r*100)) < 1e-9:
		// Whole or with at most two decimals: as declared per second
		// (2.5/s, not 150/min).
		return strconv.FormatFloat(math.Round(r*100)/100, 'f', -1, 64) + "/s"
	case r*60 >= 1 && math.Abs(r*60-math.Round(r*60)) < 1e-9:
		return strconv.FormatFloat(math.Round(r*60), 'f', -1, 64) + "/min"
	case r*3600 >= 1 && math.Abs(r*3600-math.Round(r*3600)) < 1e-9:
		return strconv.FormatFloat(math.Round(r*3600), 'f', -1, 64) + "/h"
	case r*86400 >= 1 && math.Abs(r*86400-math.Round(r*86400)) < 1e-6:
		return strconv.FormatFloat(math.Round(r*86400), 'f', -1, 64) + "/day"
	}
	return strconv.FormatFloat(r, 'g', 6, 64) + "/s"
}
