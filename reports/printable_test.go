package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain key", "plain key"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"clear\x1b[2Jscreen", `clear\x1b[2Jscreen`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m", `c1 \x9b31m`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`},
		{"isolate \u2066x\u2069", `isolate \u2066x\u2069`},
		{"bad utf-8 \xff", `bad utf-8 \xff`},
		{"ünïcødé ✓", "ünïcødé ✓"},
	} {
		require.Equal(t, tc.want, Printable(tc.in), "%q", tc.in)
	}
}

// A history's strings reach the terminal escaped; the report's own
// colours still do.
func TestTextReportEscapesWhatItDidNotWrite(t *testing.T) {
	_, _, d := fixture(t)
	hostile := "\x1b[2J\x1b]0;owned\x07"
	d.Run.Plan = "plan" + hostile
	d.Run.Notes = append(d.Run.Notes, "note"+hostile)
	d.Reason = "reason" + hostile
	d.Interrupted = true
	d.Checks[1].Summary = "summary" + hostile
	if len(d.Keys) > 0 {
		d.Keys[0].Key = "key" + hostile
	}
	d.Checks[1].Figures = map[string]float64{"fig" + hostile: 1}
	before := d.Run.Notes[len(d.Run.Notes)-1]

	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		require.NoError(t, Text{Color: color}.Render(&b, d))
		out := b.String()
		require.NotContains(t, out, "\x1b[2J")
		require.NotContains(t, out, "\x1b]0;")
		require.NotContains(t, out, "\x07")
		require.Contains(t, out, `note\x1b[2J\x1b]0;owned\x07`)
		require.Contains(t, out, `plan\x1b[2J`)
		if color {
			require.Contains(t, out, "\x1b[31;1m"+strings.ToUpper(string(checks.Fail))+"\x1b[0m", "the report's own colours")
		} else {
			require.NotContains(t, out, "\x1b")
		}
	}
	require.Equal(t, "note"+hostile, before, "the document itself is not changed")
	require.Equal(t, "note"+hostile, d.Run.Notes[len(d.Run.Notes)-1], "the document itself is not changed (JSON keeps the bytes)")

	var b bytes.Buffer
	require.NoError(t, Text{}.RenderComparison(&b, Compare("p"+hostile, []Column{{Name: "col" + hostile, Document: d}})))
	require.NotContains(t, b.String(), "\x1b")
	require.Contains(t, b.String(), `col\x1b[2J`)
}
