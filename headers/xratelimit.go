package headers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// X-RateLimit-Limit, -Remaining and -Reset are no standard: plain decimal
// integers, the reset in one of three forms.

// ResetForm is how X-RateLimit-Reset states the reset; the values are those
// of the policy's x_ratelimit_reset.
type ResetForm string

// The forms of X-RateLimit-Reset.
const (
	// ResetGuess, the zero value, is for a response whose form nobody
	// declared (a discovery request): an integer of at least 10^9 is Unix
	// seconds (2001-09-09 or later), a smaller one delta seconds, anything
	// else an HTTP-date.
	ResetGuess ResetForm = ""
	// ResetRelative: delta seconds until the reset.
	ResetRelative ResetForm = "relative"
	// ResetEpoch: the reset instant in Unix seconds.
	ResetEpoch ResetForm = "epoch"
	// ResetDate: the reset instant as an HTTP-date.
	ResetDate ResetForm = "date"
)

// epochFloor is the smallest integer ResetGuess takes for Unix seconds.
const epochFloor = 1_000_000_000

// Reset is when an X-RateLimit-Reset says the quota resets: after Delta
// seconds (a relative reset) or at At (an absolute one).
type Reset struct {
	// Delta is the delay of a relative reset in seconds; -1 for an
	// absolute one.
	Delta int64
	// At is the instant of an absolute reset; zero for a relative one.
	At time.Time
}

// Absolute reports whether r names an instant rather than a delay.
func (r Reset) Absolute() bool { return r.Delta < 0 }

// ParseXInt parses an X-RateLimit-Limit or -Remaining value: a decimal
// integer, optionally signed, surrounding spaces and tabs ignored (range
// checks are the caller's: a negative remaining is a finding, not a syntax
// error).
func ParseXInt(v string) (int64, error) {
	if n, ok := digits(v); ok {
		return n, nil
	}
	return strconv.ParseInt(strings.Trim(v, " \t"), 10, 64)
}

// digits is the value of v when v is 1 to 18 decimal digits and nothing
// else (what a limiter sends almost always): strconv.ParseInt's value for
// it, without trimming first (a history judges millions of these).
func digits(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	return n, true
}

// ParseXReset parses an X-RateLimit-Reset value in the given form.
func ParseXReset(v string, form ResetForm) (Reset, error) {
	if n, ok := digits(v); ok && form == ResetRelative {
		return Reset{Delta: n}, nil
	}
	s := strings.Trim(v, " \t")
	switch form {
	case ResetRelative, ResetEpoch:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			what := "a non-negative number of seconds"
			if form == ResetEpoch {
				what = "epoch seconds"
			}
			return Reset{}, fmt.Errorf("headers: X-RateLimit-Reset %q is not %s", v, what)
		}
		if form == ResetEpoch {
			return Reset{Delta: -1, At: time.Unix(n, 0)}, nil
		}
		return Reset{Delta: n}, nil
	case ResetDate:
		t, err := http.ParseTime(s)
		if err != nil {
			return Reset{}, fmt.Errorf("headers: X-RateLimit-Reset %q is not an HTTP-date", v)
		}
		return Reset{Delta: -1, At: t}, nil
	case ResetGuess:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
			if n >= epochFloor {
				return Reset{Delta: -1, At: time.Unix(n, 0)}, nil
			}
			return Reset{Delta: n}, nil
		}
		if t, err := http.ParseTime(s); err == nil {
			return Reset{Delta: -1, At: t}, nil
		}
		return Reset{}, fmt.Errorf("headers: X-RateLimit-Reset %q: want seconds, epoch seconds or an HTTP-date", v)
	}
	return Reset{}, fmt.Errorf("headers: unknown X-RateLimit-Reset form %q: want relative, epoch or date", form)
}

// FormatXReset writes X-RateLimit-Reset for a quota that resets after
// reset (rounded up to whole seconds, see Seconds) from now.
func FormatXReset(reset time.Duration, form ResetForm, now time.Time) (string, error) {
	sec := Seconds(reset)
	switch form {
	case ResetRelative, ResetGuess:
		return strconv.FormatInt(sec, 10), nil
	case ResetEpoch:
		return strconv.FormatInt(now.Add(time.Duration(sec)*time.Second).Unix(), 10), nil
	case ResetDate:
		return now.Add(time.Duration(sec) * time.Second).UTC().Format(http.TimeFormat), nil
	}
	return "", fmt.Errorf("headers: unknown X-RateLimit-Reset form %q: want relative, epoch or date", form)
}
