package discover

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// holds: the truth lies in n's stated range.
func holds(truth float64, n Number) bool { return n.Low <= truth && truth <= n.High }

// trickleTrace is the runs a trickle at q per second on an empty bucket
// refilling at r shows for d: one admission per refill, each answered lat
// after it was sent. slowFrom (when > 0) is where the refill speeds up ×1.7
// (a measurement that is not consistent over the trickle).
func trickleTrace(r, q float64, d, lat time.Duration, slowFrom float64) []run {
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ob := func(s float64, st int) obs { return obs{sent: at(s), recv: at(s).Add(lat), status: st} }
	var rs []run
	tokens, last := 0.0, 0.0
	for i := 0; float64(i)/q < d.Seconds(); i++ {
		s := float64(i) / q
		rate := r
		if slowFrom > 0 && s >= slowFrom {
			rate = 1.7 * r
		}
		tokens += rate * (s - last)
		last = s
		if tokens >= 1 {
			tokens--
			o := ob(s, 200)
			rs = append(rs, run{first: o, last: o, n: 1, before: ob(s-1/q, 429), closed: true})
		}
	}
	return rs
}

// TestTrickleRate: a trickle well above the refill pins r within a range
// holding the truth; one whose halves disagree, or probes barely above the
// rate, leave r open with the reason.
func TestTrickleRate(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		rs     []run
		q      float64
		truth  float64
		pinned bool
		why    string
	}{
		{"small bucket, probes 8× the rate", trickleTrace(2.5, 20, 4*time.Second, 2*ms, 0), 20, 2.5, true, ""},
		{"10000r/m, probes 12× the rate, 40 ms latency", trickleTrace(10_000.0/60, 2000, time.Second, 40*ms, 0), 2000, 10_000.0 / 60, true, ""},
		{"10000r/m, the refill speeding up halfway", trickleTrace(10_000.0/60, 2000, 2*time.Second, 2*ms, 1), 2000, 10_000.0 / 60, false, "halves disagree"},
		{"probes barely above the rate", trickleTrace(10, 15, 4*time.Second, 2*ms, 0), 15, 10, false, "not well above"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := trickleRate(tc.rs, tc.q)
			assert.Equal(t, tc.pinned, r.Pinned, r.Evidence)
			assert.Contains(t, r.Evidence, tc.why)
			if r.Pinned {
				assert.True(t, holds(tc.truth, r), "%s/s does not hold %g: %s", r.Range(), tc.truth, r.Evidence)
			}
		})
	}
}

// TestBurstCapacity: a fast burst pins K at what it admitted; a slow one
// (nginx at 10000r/m once took 12.5 s and admitted 12,081 for K 10,000)
// states a range for the refill during it that holds K, or leaves K open
// when the rate is open.
func TestBurstCapacity(t *testing.T) {
	r := func(v, lo, hi float64, pinned bool) Number {
		return Number{Value: v, Low: lo, High: hi, Pinned: pinned}
	}
	nginxRate := r(10_000.0/60, 150, 190, true)
	tests := []struct {
		name    string
		a       int
		span    time.Duration
		rate    Number
		truth   float64
		pinned  bool
		exact   bool
		evident string
	}{
		{"fast burst: K is what it admitted", 5, 3 * time.Millisecond, r(2.5, 2, 3, true), 5, true, true, "admitted 5"},
		{"slow burst, rate pinned: a range for the refill", 12_081, 12500 * time.Millisecond, nginxRate, 10_000, true, false, "refilled meanwhile"},
		{"slow burst, rate open: not pinned, the refill named", 12_081, 12500 * time.Millisecond, r(281, 150, 400, false), 10_000, false, false, "the burst took 12.5s; refill during it is up to 5000"},
		{"slow burst, rate unknown: not pinned", 12_081, 12500 * time.Millisecond, Number{Value: math.NaN()}, 10_000, false, false, "not pinned"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := burstCapacity(tc.a, tc.span, tc.rate)
			assert.Equal(t, tc.pinned, c.Pinned, c.Evidence)
			assert.Contains(t, c.Evidence, tc.evident)
			assert.Equal(t, float64(tc.a), c.High, "never more than admitted")
			assert.Equal(t, tc.exact, c.Low == c.High, "a range exactly when refill during the burst matters: %s", c.Range())
			if !math.IsInf(tc.rate.High, 1) && !math.IsNaN(tc.rate.Value) {
				assert.True(t, holds(tc.truth, c), "%s does not hold %g: %s", c.Range(), tc.truth, c.Evidence)
			}
			assert.True(t, c.Low <= c.Value && c.Value <= c.High, "the value lies in its range: %s", c.Range())
		})
	}
}
