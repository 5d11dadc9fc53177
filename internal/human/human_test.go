package human

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{{0, "0"}, {999, "999"}, {11870, "11,870"}, {-1234567, "-1,234,567"}} {
		require.Equal(t, tc.want, Count(tc.in))
	}
}

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{11870, "11,870"}, {0, "0"}, {1.299, "1.299"}, {0.25, "0.25"}, {1.23456, "1.235"},
		{12345.67, "12,345.7"}, {10.01, "10.01"}, {0.00001234, "1.23e-05"}, {-3.5, "-3.5"},
		{math.NaN(), "NaN"},
	} {
		require.Equal(t, tc.want, Number(tc.in), "%v", tc.in)
	}
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0/s"}, {0.5, "0.5/s"}, {2.26, "2.3/s"}, {40, "40/s"}, {199.6, "200/s"},
		{1187, "1.2 k/s"}, {42600, "42.6 k/s"}, {3.4e6, "3.4 M/s"},
	} {
		require.Equal(t, tc.want, Rate(tc.in), "%v", tc.in)
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{{0, "0"}, {850 * time.Microsecond, "850µs"}, {4213 * time.Microsecond, "4.21ms"}, {1044 * time.Millisecond, "1.044s"}, {-2 * time.Millisecond, "-2ms"}} {
		require.Equal(t, tc.want, Duration(tc.in))
	}
}

// TestDurationIsTotal: every int64 formats without recursing forever
// (Duration(math.MinInt64) overflowed the stack: -MinInt64 is MinInt64).
func TestDurationIsTotal(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		// Rounding past the range saturates (time.Duration.Round).
		{math.MinInt64, "-2562047h47m16.854775808s"},
		{math.MinInt64 + 1, "-2562047h47m16.854775808s"},
		{math.MaxInt64, "2562047h47m16.854775807s"},
		{-850 * time.Microsecond, "-850µs"},
		{-4213 * time.Microsecond, "-4.21ms"},
		{-1044 * time.Millisecond, "-1.044s"},
		{-1, "0s"},
	} {
		require.Equal(t, tc.want, Duration(tc.in), "%d", int64(tc.in))
	}
}

// FuzzDuration: Duration is total, never empty, and its sign follows d's.
func FuzzDuration(f *testing.F) {
	for _, d := range []int64{0, 1, -1, 850_000, 4_213_000, math.MaxInt64, math.MinInt64, math.MinInt64 + 1} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d int64) {
		s := Duration(time.Duration(d))
		require.NotEmpty(t, s)
		if d > 0 {
			require.NotEqual(t, byte('-'), s[0], "%d → %s", d, s)
		}
	})
}
