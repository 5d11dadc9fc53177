package reports

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
)

// TestLargeNumbersPrintForPeople: counts and figures in the thousands
// print with separators in every text format, never in exponent form.
func TestLargeNumbersPrintForPeople(t *testing.T) {
	_, _, d := fixture(t)
	d.Stats = history.Stats{Requests: 11870, Admitted: 10500, Rejected: 1369, Errors: 1}
	d.Phases = []history.Phase{{Name: "steady", Kind: "rate", Requests: 11870, Rate: 1187.4, Wanted: 1200}}
	d.Checks = append([]checks.Result(nil), d.Checks...)
	d.Checks[0].Figures = map[string]float64{"admitted": 11870, "max_overrun": 1.299}
	for _, f := range []string{"text", "md", "junit", "html"} {
		r, err := Lookup(f)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, r.Render(&buf, d))
		out := buf.String()
		require.NotContains(t, out, "e+0", f)
		require.Contains(t, out, "11,870: admitted 10,500, rejected 1,369, errors 1", f)
		if f == "html" {
			require.Contains(t, out, `<div class="v">11,870</div>`)
			continue
		}
		if f != "junit" {
			require.Contains(t, out, "admitted=11,870", f)
			require.Contains(t, out, "1.2 k/s of 1.2 k/s", f)
		}
	}
}
