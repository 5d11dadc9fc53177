package headers

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrDateInPast is wrapped by the error ParseRetryAfter returns for an
// HTTP-date whose second was over before the response arrived: it advises
// nothing (issue 16 counts it invalid). A lenient client may retry at once.
var ErrDateInPast = errors.New("the HTTP-date is in the past")

// maxDelaySeconds is the longest delay a time.Duration holds.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses a Retry-After value (RFC 9110 §10.2.3):
// delay-seconds (one or more decimal digits) or an HTTP-date (IMF-fixdate
// or the obsolete RFC 850 and asctime forms a recipient must accept), the
// date taken relative to now, the wall time the response was received.
// Surrounding spaces and tabs are ignored.
//
// A date whose second ended before now returns 0 and an error wrapping
// ErrDateInPast; a date within the current second is a zero wait.
func ParseRetryAfter(v string, now time.Time) (time.Duration, error) {
	s := strings.Trim(v, " \t")
	if s == "" {
		return 0, errors.New("headers: Retry-After is empty")
	}
	if s[0] >= '0' && s[0] <= '9' {
		n, err := delaySeconds(s)
		if err != nil {
			return 0, fmt.Errorf("headers: Retry-After %q: %w", v, err)
		}
		return time.Duration(n) * time.Second, nil
	}
	t, err := http.ParseTime(s)
	if err != nil {
		return 0, fmt.Errorf("headers: Retry-After %q: want delay-seconds (digits) or an HTTP-date", v)
	}
	if !t.Add(time.Second).After(now) {
		return 0, fmt.Errorf("headers: Retry-After %q: %w (received %s)", v, ErrDateInPast, now.UTC().Format(http.TimeFormat))
	}
	return max(t.Sub(now), 0), nil
}

// delaySeconds parses delay-seconds: digits only, within a Duration.
func delaySeconds(s string) (int64, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("want delay-seconds (digits) or an HTTP-date")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxDelaySeconds {
		return 0, errors.New("delay out of range")
	}
	return n, nil
}

// Seconds rounds a wait up to whole seconds, as delay-seconds must be sent
// (advising too short a wait would be wrong): a positive wait is at least
// 1, a wait ≤ 0 is 0.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// SetRetryAfter sets Retry-After to d in delay-seconds, rounded up (see
// Seconds). A wait ≤ 0 sets nothing and returns false.
func SetRetryAfter(h http.Header, d time.Duration) bool {
	s := Seconds(d)
	if s <= 0 {
		return false
	}
	h.Set(RetryAfter, strconv.FormatInt(s, 10))
	return true
}
