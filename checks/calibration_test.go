package checks

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// calibrateBurst is a history of one calibrate burst of n requests on a
// paid key of the default policy (K=100 at 50/s) from a whole bucket, its
// decisions spread over spread, admitting admitted of them.
func calibrateBurst(spread time.Duration, n, admitted int) *history.History {
	const t0 = int64(time.Second)
	h := &history.History{
		Run:    history.Run{Start: time.Unix(1_700_000_000, 0), Policy: "default"},
		Phases: []history.Phase{{Name: "calibrate-paid", Kind: "calibrate", Start: t0, End: t0 + int64(spread) + int64(time.Millisecond), Target: t0, Requests: int64(n)}},
	}
	for i := range n {
		sent := t0 + int64(spread)*int64(i)/int64(n-1)
		e := history.Event{ID: uint64(i + 1), Key: "paid-precise", Phase: "calibrate-paid", Intended: t0, Sent: sent, Recv: sent + int64(100*time.Microsecond), Status: 200}
		if i >= admitted {
			e.Status, e.RetryAfter = 429, "1"
		}
		h.Events = append(h.Events, e)
	}
	return h
}

// A fast tier's burst outlasts a token: admissions beyond the capacity
// that the refill during the burst explains are consistent with it (the
// range says so); more than that is a capacity above the declared one.
func TestCalibrationCapacityOfABurstThatOutlastsAToken(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spread    time.Duration
		n, admits int
		want      Verdict
		measured  string
	}{
		{"exactly the capacity", 5 * time.Millisecond, 101, 100, Pass, "100"},
		{"one more, a token back during the burst", 40 * time.Millisecond, 101, 101, Pass, "100 … 101 (a burst of 40.1ms: 2.00 tokens may have come back during it)"},
		{"one more, no token back", 5 * time.Millisecond, 101, 101, Fail, ""},
		// 40ms at 50/s brings back 2 tokens: 103 admitted is one too many.
		{"more than the burst's refill explains", 40 * time.Millisecond, 104, 103, Fail, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := calibrateBurst(tc.spread, tc.n, tc.admits)
			rs := Run(h, policy.Default(), Options{Only: []string{"calibration"}})
			require.Len(t, rs, 1)
			var capM *Measurement
			for i, m := range rs[0].Measured {
				if m.Name == "capacity" {
					capM = &rs[0].Measured[i]
				}
			}
			require.NotNil(t, capM, "%v", rs[0].Measured)
			require.Equal(t, tc.want, capM.Verdict, fmt.Sprint(capM))
			if tc.want == Pass {
				require.Equal(t, tc.measured, capM.Measured)
			}
		})
	}
}
