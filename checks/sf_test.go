package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRateLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []RateLimitItem
		err  string
	}{
		{in: `"free";r=0;t=1`, want: []RateLimitItem{{Policy: "free", Remaining: 0, Reset: 1}}},
		{in: ` "a";r=5, "b";r=50;t=30;pk=:Y2xpZW50:`, want: []RateLimitItem{{Policy: "a", Remaining: 5, Reset: -1}, {Policy: "b", Remaining: 50, Reset: 30, PartitionKey: "Y2xpZW50"}}},
		{in: `"free";r=3;t=1;ext=?1;x="y"`, want: []RateLimitItem{{Policy: "free", Remaining: 3, Reset: 1}}},
		{in: `"e\"q";r=1`, want: []RateLimitItem{{Policy: `e"q`, Remaining: 1, Reset: -1}}},
		{in: `"free";r=2;r=4`, want: []RateLimitItem{{Policy: "free", Remaining: 4, Reset: -1}}},
		{in: `free;r=1`, err: "must be a String"},
		{in: `"free";t=1`, err: "no r"},
		{in: `"free";r=-1`, err: "negative"},
		{in: `"free";r=1.5`, err: "Integer"},
		{in: `"free";r=1,`, err: "trailing comma"},
		{in: ``, err: "empty"},
		{in: `"free";R=1`, err: "key"},
		{in: `"free";r=1234567890123456`, err: "15 digits"},
		{in: `"unterminated`, err: "unterminated"},
		{in: `("a" "b");r=1`, err: "inner list"},
		{in: `"free" ;r=1`, err: "want ','"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseRateLimit(c.in)
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

func TestParseRateLimitPolicy(t *testing.T) {
	got, err := ParseRateLimitPolicy(`"free";q=10;w=2, "day";q=1000;qu="requests";w=86400`)
	require.NoError(t, err)
	assert.Equal(t, []RateLimitPolicyItem{
		{Policy: "free", Quota: 10, Window: 2, QuotaUnit: "requests"},
		{Policy: "day", Quota: 1000, Window: 86400, QuotaUnit: "requests"},
	}, got)
	for _, bad := range []string{`"free";w=2`, `"free";q=10;w=0`, `"free";q=10;qu=requests`, `"free";q=?1`, `"free";q=10;w=2.0`} {
		_, err := ParseRateLimitPolicy(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{in: "0", want: 0},
		{in: " 120 ", want: 2 * time.Minute},
		{in: "Wed, 01 Jan 2025 00:00:30 GMT", want: 30 * time.Second},
		{in: "Wednesday, 01-Jan-25 00:01:00 GMT", want: time.Minute},
		{in: "Wed Jan  1 00:00:05 2025", want: 5 * time.Second},
		{in: "Tue, 31 Dec 2024 23:59:00 GMT", want: 0},
		{in: "-1", err: true},
		{in: "1.5", err: true},
		{in: "", err: true},
		{in: "soon", err: true},
		{in: "99999999999999999999", err: true},
	} {
		got, err := ParseRetryAfter(c.in, now)
		if c.err {
			assert.Error(t, err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"free";r=0;t=1`, `"a";r=5, "b";r=50;t=30;pk=:Y2xpZW50:`, `("a" 1);r=1`, `"x";r=?1;d=@123;s=%"caf%c3%a9"`, `"f";r=1.25`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseRateLimit(s)
		if err == nil {
			for _, it := range items {
				if it.Remaining < 0 {
					t.Fatalf("%q: negative remaining accepted", s)
				}
			}
		}
	})
}

func FuzzParseRateLimitPolicy(f *testing.F) {
	for _, s := range []string{`"free";q=10;w=2`, `"day";q=1000;qu="requests";w=86400, "m";q=1`, `"p";q=1;pk=:AA==:`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseRateLimitPolicy(s)
		if err == nil {
			for _, it := range items {
				if it.Quota < 0 || it.Window == 0 {
					t.Fatalf("%q: invalid item accepted: %+v", s, it)
				}
			}
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Wed, 01 Jan 2025 00:00:30 GMT", "Wednesday, 01-Jan-25 00:01:00 GMT", "Wed Jan  1 00:00:05 2025", "-1"} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseRetryAfter(s, now)
		if err == nil && d < 0 {
			t.Fatalf("%q: negative delay %s", s, d)
		}
	})
}
