package headers

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
		past bool
	}{
		{in: "0", want: 0},
		{in: " 120 ", want: 2 * time.Minute},
		{in: "\t3", want: 3 * time.Second},
		{in: "00000000000000000000010", want: 10 * time.Second},
		{in: "Wed, 01 Jan 2025 00:00:30 GMT", want: 30 * time.Second},
		{in: "Wednesday, 01-Jan-25 00:01:00 GMT", want: time.Minute},
		{in: "Wed Jan  1 00:00:05 2025", want: 5 * time.Second},
		{in: "Wed, 01 Jan 2025 00:00:00 GMT", want: 0}, // this second: retry now
		{in: "Tue, 31 Dec 2024 23:59:59 GMT", err: "in the past", past: true},
		{in: "Tue, 31 Dec 2024 23:59:00 GMT", err: "in the past", past: true},
		{in: "Sun, 06 Nov 1994 08:49:37 GMT", err: "in the past", past: true},
		{in: "-1", err: "delay-seconds"},
		{in: "1.5", err: "delay-seconds"},
		{in: "1 s", err: "delay-seconds"},
		{in: "", err: "empty"},
		{in: " \t", err: "empty"},
		{in: "soon", err: "HTTP-date"},
		{in: "Wed, 01 Jan 2025 00:00:30", err: "HTTP-date"},
		{in: "99999999999999999999", err: "out of range"},
		{in: "9223372037", err: "out of range"}, // > MaxInt64 ns
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseRetryAfter(c.in, now)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				assert.Contains(t, err.Error(), "Retry-After")
				assert.Equal(t, c.past, errors.Is(err, ErrDateInPast))
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	// A date half a second ahead of a receive time inside its second.
	d, err := ParseRetryAfter("Wed, 01 Jan 2025 00:00:01 GMT", now.Add(500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, d)
}

func TestSecondsAndSetRetryAfter(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want int64
	}{{-time.Second, 0}, {0, 0}, {time.Nanosecond, 1}, {200 * time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {time.Hour, 3600}} {
		assert.Equal(t, c.want, Seconds(c.in), c.in)
		h := http.Header{}
		assert.Equal(t, c.want > 0, SetRetryAfter(h, c.in), c.in)
		if c.want > 0 {
			d, err := ParseRetryAfter(h.Get(RetryAfter), now)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, d, c.in, "the advice is never shorter than the wait")
		} else {
			assert.Empty(t, h.Get(RetryAfter))
		}
	}
}

func TestParseRateLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Item
		err  string
	}{
		{in: `"free";r=0;t=1`, want: []Item{{Name: "free", Remaining: 0, Reset: 1}}},
		{in: ` "a";r=5, "b";r=50;t=30;pk=:Y2xpZW50:`, want: []Item{{Name: "a", Remaining: 5, Reset: -1}, {Name: "b", Remaining: 50, Reset: 30, PartitionKey: []byte("client")}}},
		{in: "\"a\";r=1,\t\"b\";r=2", want: []Item{{Name: "a", Remaining: 1, Reset: -1}, {Name: "b", Remaining: 2, Reset: -1}}},
		{in: `"free";r=3;t=1;ext=?1;x="y"`, want: []Item{{Name: "free", Remaining: 3, Reset: 1}}},
		{in: `"e\"q";r=1`, want: []Item{{Name: `e"q`, Remaining: 1, Reset: -1}}},
		{in: `"free";r=2;r=4`, want: []Item{{Name: "free", Remaining: 4, Reset: -1}}},
		{in: `%"caf%c3%a9";r=1`, want: []Item{{Name: "café", Remaining: 1, Reset: -1}}},
		{in: `"";r=1`, want: []Item{{Name: "", Remaining: 1, Reset: -1}}},
		{in: `free;r=1`, err: "must be a String, not a Token"},
		{in: `1;r=1`, err: "must be a String, not an Integer"},
		{in: `"free";t=1`, err: "no r (remaining)"},
		{in: `"free";r=-1`, err: "negative"},
		{in: `"free";r=1.5`, err: "Integer, not a Decimal"},
		{in: `"free";r=?1`, err: "Integer, not a Boolean"},
		{in: `"free";r=1;t=-2`, err: "t must not be negative"},
		{in: `"free";r=1;pk=abc`, err: "pk must be a Byte Sequence"},
		{in: `"free";r=1,`, err: "list"},
		{in: ``, err: "empty"},
		{in: `"free";R=1`, err: "key"},
		{in: `"free";r=1234567890123456`, err: "out of range"},
		{in: `"unterminated`, err: "string"},
		{in: `("a" "b");r=1`, err: "inner list"},
		{in: `"free" ;r=1`, err: "list"},
		{in: `"caf` + "\xc3\xa9" + `";r=1`, err: "string"},
		{in: `limit=10, remaining=1, reset=2`, err: "list"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseRateLimit(c.in)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				assert.Contains(t, err.Error(), "RateLimit")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestParseRateLimitPolicy(t *testing.T) {
	got, err := ParseRateLimitPolicy(`"free";q=10;w=2, "day";q=1000;qu="requests";w=86400, "bytes";q=5;qu="content-bytes";pk=:AA==:;acme-burst=3`)
	require.NoError(t, err)
	assert.Equal(t, []PolicyItem{
		{Name: "free", Quota: 10, Window: 2, QuotaUnit: "requests"},
		{Name: "day", Quota: 1000, Window: 86400, QuotaUnit: "requests"},
		{Name: "bytes", Quota: 5, Window: -1, QuotaUnit: "content-bytes", PartitionKey: []byte{0}},
	}, got)
	for in, want := range map[string]string{
		`"free";w=2`:              "no q (quota)",
		`"free";q=10;w=0`:         "w must be positive",
		`"free";q=10;w=-1`:        "w must not be negative",
		`"free";q=10;qu=requests`: "qu must be a String, not a Token",
		`"free";q=?1`:             "q must be an Integer",
		`"free";q=10;w=2.0`:       "w must be an Integer, not a Decimal",
		`10;w=2`:                  "must be a String, not an Integer",
		``:                        "empty",
	} {
		_, err := ParseRateLimitPolicy(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.Contains(t, err.Error(), "RateLimit-Policy", in)
	}
}

func TestParseRateLimitDictionary(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Counters
		err  string
	}{
		{in: `limit=10, remaining=5, reset=3`, want: Counters{10, 5, 3}},
		{in: `reset=3, remaining=0, limit=10`, want: Counters{10, 0, 3}},
		{in: `limit=10, reset=3`, want: Counters{10, -1, 3}},
		{in: `limit=1;x=2, reset=2, acme-burst=7, foo`, want: Counters{1, -1, 2}},
		{in: `limit=10, limit=20, reset=1`, want: Counters{20, -1, 1}},
		{in: `limit=10`, err: "no reset key"},
		{in: `remaining=1, reset=1`, err: "no limit key"},
		{in: `limit=-1, reset=1`, err: "limit must not be negative"},
		{in: `limit=10, remaining=1.5, reset=1`, err: "remaining must be an Integer, not a Decimal"},
		{in: `limit="10", reset=1`, err: "limit must be an Integer, not a String"},
		{in: `limit=(1 2), reset=1`, err: "inner list"},
		{in: `limit=10,reset=1,`, err: "dictionary"},
		{in: `"free";r=1`, err: "key"},
		{in: ``, err: "no limit key"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseRateLimitDictionary(c.in)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestParseQuotaPolicies(t *testing.T) {
	got, err := ParseQuotaPolicies(`10;w=1, 50;w=60;comment="sliding window", 1000;w=3600;burst=1000`)
	require.NoError(t, err)
	assert.Equal(t, []PolicyItem{{Quota: 10, Window: 1, QuotaUnit: "requests"}, {Quota: 50, Window: 60, QuotaUnit: "requests"}, {Quota: 1000, Window: 3600, QuotaUnit: "requests"}}, got)
	for in, want := range map[string]string{
		`10`:              "no w (window)",
		`10;w=0`:          "w must be positive",
		`10;w=1, 10;w=60`: "member 2: two quota policies of quota 10",
		`"free";q=10;w=1`: "the quota must be an Integer, not a String",
		`-5;w=1`:          "the quota must not be negative",
		`10;w=1,`:         "list",
		``:                "empty",
	} {
		_, err := ParseQuotaPolicies(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

func TestParseSplit(t *testing.T) {
	n, pol, err := ParseRateLimitLimit(" 10 ")
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
	assert.Empty(t, pol)
	n, pol, err = ParseRateLimitLimit("10, 10;w=1, 50;w=60")
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
	assert.Equal(t, []PolicyItem{{Quota: 10, Window: 1, QuotaUnit: "requests"}, {Quota: 50, Window: 60, QuotaUnit: "requests"}}, pol)
	for in, want := range map[string]string{
		"":           "empty",
		"ten":        "the limit must be an Integer, not a Token",
		"-1":         "negative",
		"10, 5":      "member 2: no w (window)",
		"10, 5;w=1,": "list",
	} {
		_, _, err := ParseRateLimitLimit(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.Contains(t, err.Error(), "RateLimit-Limit", in)
	}
	for _, f := range []struct {
		name  string
		parse func(string) (int64, error)
	}{{RateLimitRemaining, ParseRateLimitRemaining}, {RateLimitReset, ParseRateLimitReset}} {
		v, err := f.parse("7")
		require.NoError(t, err)
		assert.Equal(t, int64(7), v)
		v, err = f.parse(" 7;x=1")
		require.NoError(t, err, "parameters are ignored")
		assert.Equal(t, int64(7), v)
		for _, bad := range []string{"", "-1", "1.5", "7, 8", "x", `"7"`} {
			_, err := f.parse(bad)
			require.Error(t, err, "%s %q", f.name, bad)
			assert.Contains(t, err.Error(), f.name)
		}
	}
}

func TestParseX(t *testing.T) {
	for in, want := range map[string]int64{"10": 10, " 10\t": 10, "-3": -3, "+4": 4, "0": 0} {
		got, err := ParseXInt(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "abc", "1.5", "99999999999999999999"} {
		_, err := ParseXInt(bad)
		assert.Error(t, err, bad)
	}
	at := time.Date(2025, 1, 1, 0, 0, 30, 0, time.UTC)
	for _, c := range []struct {
		in   string
		form ResetForm
		want Reset
		err  string
	}{
		{"3", ResetRelative, Reset{Delta: 3}, ""},
		{" 0 ", ResetRelative, Reset{Delta: 0}, ""},
		{"-1", ResetRelative, Reset{}, "non-negative number of seconds"},
		{"soon", ResetRelative, Reset{}, "non-negative number of seconds"},
		{"1735689630", ResetEpoch, Reset{Delta: -1, At: at}, ""},
		{"3", ResetEpoch, Reset{Delta: -1, At: time.Unix(3, 0)}, ""},
		{"x", ResetEpoch, Reset{}, "epoch seconds"},
		{"Wed, 01 Jan 2025 00:00:30 GMT", ResetDate, Reset{Delta: -1, At: at}, ""},
		{"Wednesday, 01-Jan-25 00:00:30 GMT", ResetDate, Reset{Delta: -1, At: at}, ""},
		{"1735689630", ResetDate, Reset{}, "HTTP-date"},
		{"3", ResetGuess, Reset{Delta: 3}, ""},
		{"1735689630", ResetGuess, Reset{Delta: -1, At: at}, ""},
		{"Wed, 01 Jan 2025 00:00:30 GMT", ResetGuess, Reset{Delta: -1, At: at}, ""},
		{"later", ResetGuess, Reset{}, "want seconds, epoch seconds or an HTTP-date"},
		{"3", "weekly", Reset{}, "unknown X-RateLimit-Reset form"},
	} {
		got, err := ParseXReset(c.in, c.form)
		if c.err != "" {
			require.Error(t, err, "%q %s", c.in, c.form)
			assert.Contains(t, err.Error(), c.err)
			continue
		}
		require.NoError(t, err, "%q %s", c.in, c.form)
		assert.Equal(t, c.want.Delta, got.Delta, "%q %s", c.in, c.form)
		assert.True(t, c.want.At.Equal(got.At), "%q %s: %s", c.in, c.form, got.At)
		assert.Equal(t, c.want.Delta < 0, got.Absolute())
	}
	for form, want := range map[ResetForm]string{ResetRelative: "2", ResetGuess: "2", ResetEpoch: "1735689602", ResetDate: "Wed, 01 Jan 2025 00:00:02 GMT"} {
		got, err := FormatXReset(1500*time.Millisecond, form, now)
		require.NoError(t, err, form)
		assert.Equal(t, want, got, form)
	}
	_, err := FormatXReset(time.Second, "weekly", now)
	assert.Error(t, err)
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		f    Fields
		want Generation
	}{
		{Fields{}, None},
		{Fields{RetryAfter: "1", XLimit: "10"}, None},
		{Fields{RateLimit: `"free";r=1;t=1`}, Structured},
		{Fields{RateLimit: `garbage;;`}, Structured},
		{Fields{RateLimit: `limit=10, remaining=1, reset=1`}, Dictionary},
		{Fields{RateLimit: `remaining=1`}, Dictionary},
		{Fields{RateLimitLimit: "10"}, Split},
		{Fields{RateLimitReset: "1", RateLimit: `"free";r=1`}, Split},
	} {
		assert.Equal(t, c.want, Detect(c.f), "%+v", c.f)
	}
}

func TestFromHTTP(t *testing.T) {
	h := http.Header{}
	h.Add(RateLimitPolicy, `"a";q=1`)
	h.Add(RateLimitPolicy, `"b";q=2`)
	h.Set(RateLimit, `"a";r=0`)
	h.Add(RetryAfter, "1")
	h.Add(RetryAfter, "2")
	h.Set(RateLimitRemaining, "3")
	h.Add(RateLimitRemaining, "4")
	h.Set(XRateLimitLimit, "10")
	h.Set(Fallback, "open")
	h.Set(Scope, "global")
	f := FromHTTP(h)
	assert.Equal(t, Fields{RetryAfter: "1", RateLimit: `"a";r=0`, RateLimitPolicy: `"a";q=1, "b";q=2`, RateLimitRemaining: "3, 4", XLimit: "10", Fallback: "open", Scope: "global"}, f)
	pol, err := ParseRateLimitPolicy(f.RateLimitPolicy)
	require.NoError(t, err, "a list split over field lines is one list")
	assert.Len(t, pol, 2)
	_, err = ParseRateLimitRemaining(f.RateLimitRemaining)
	assert.Error(t, err, "an Integer sent twice is invalid")
}
