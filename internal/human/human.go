// Package human formats counts and rates for people to read: 11,870 and
// 1.2 k/s, never 1.187e+04. Every report and progress line prints numbers
// through it. It imports only go-humanize and the standard library.
package human

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Count formats n with thousands separators: 11870 → "11,870".
func Count(n int64) string { return humanize.Comma(n) }

// Number formats a measured figure: whole numbers as counts ("11,870"),
// others with at most four significant digits below 1,000 ("1.299",
// "0.25") and one decimal above ("12,345.7"). NaN and infinities print as
// Go does.
func Number(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return humanize.Comma(int64(v))
	case math.Abs(v) >= 1000:
		return humanize.Commaf(math.Round(v*10) / 10)
	case math.Abs(v) < 1e-4:
		return strconv.FormatFloat(v, 'e', 2, 64)
	}
	return trimFloat(v)
}

// trimFloat is v with four significant digits, trailing zeros dropped.
func trimFloat(v float64) string {
	digits := 4 - int(math.Floor(math.Log10(math.Abs(v)))) - 1
	return fixed(v, max(digits, 0))
}

// fixed is v rounded to digits decimals, trailing zeros dropped (go-humanize
// truncates instead of rounding).
func fixed(v float64, digits int) string {
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Rate formats a per-second rate: "0.5/s", "40/s", "1.2 k/s", "3.4 M/s".
func Rate(perSecond float64) string {
	if math.IsNaN(perSecond) || math.IsInf(perSecond, 0) {
		return strconv.FormatFloat(perSecond, 'g', -1, 64) + "/s"
	}
	if math.Abs(perSecond) < 1000 {
		if math.Abs(perSecond) >= 100 {
			return strconv.FormatFloat(math.Round(perSecond), 'f', -1, 64) + "/s"
		}
		return fixed(perSecond, 1) + "/s"
	}
	v, prefix := humanize.ComputeSI(perSecond)
	return fixed(v, 1) + " " + prefix + "/s"
}

// Duration formats a measured duration: microseconds below 1ms, 10µs
// steps below 1s, milliseconds above ("850µs", "4.21ms", "1.044s").
// It is total over int64: a negative d is rounded as it stands (Round
// saturates and rounds halves away from zero), never negated, because
// -math.MinInt64 is itself.
func Duration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d > -time.Millisecond && d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d > -time.Second && d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
