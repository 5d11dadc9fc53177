package reports

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
)

// Reword reaches every piece of prose that may name an option field, and
// nothing else (names, verdicts, figures).
func TestReword(t *testing.T) {
	d := &Document{
		Reason:      "F reason",
		Run:         history.Run{Target: "F target", Notes: []string{"F run"}},
		Warnings:    []string{"F warning"},
		Phases:      []history.Phase{{Name: "F phase", Notes: []string{"F phase note"}}},
		Checks:      []checks.Result{{Name: "F check", Summary: "F summary", Warnings: []string{"F check warning"}, Slack: []checks.Slack{{Name: "F slack", Value: "F value"}}}},
		Defects:     []checks.Defect{{Check: "F defect", Summary: "F defect summary"}},
		NotVerified: []Unverified{{Check: "F unverified", Reason: "F why"}},
	}
	d.Reword(func(s string) string { return strings.Replace(s, "F ", "flag ", 1) })
	require.Equal(t, "flag reason", d.Reason)
	require.Equal(t, []string{"flag run"}, d.Run.Notes)
	require.Equal(t, []string{"flag warning"}, d.Warnings)
	require.Equal(t, []string{"flag phase note"}, d.Phases[0].Notes)
	c := d.Checks[0]
	require.Equal(t, []string{"flag summary", "flag check warning", "flag slack"}, []string{c.Summary, c.Warnings[0], c.Slack[0].Name})
	require.Equal(t, "flag defect summary", d.Defects[0].Summary)
	require.Equal(t, "flag why", d.NotVerified[0].Reason)
	for _, untouched := range []string{d.Run.Target, d.Phases[0].Name, c.Name, c.Slack[0].Value, d.Defects[0].Check, d.NotVerified[0].Check} {
		require.True(t, strings.HasPrefix(untouched, "F "), untouched)
	}
}
