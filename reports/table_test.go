package reports

import (
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
)

// TestTableMatchesTabwriterWithoutColour keeps the goldens: uncoloured, the
// table lays out exactly as text/tabwriter does.
func TestTableMatchesTabwriterWithoutColour(t *testing.T) {
	rows := "CHECK\tVERDICT\tSUMMARY\noversell\tFAIL\t1 proven interval\nunder-admission\tUNKNOWN\t2 rejections · µs\n"
	var a, b strings.Builder
	tw := tabwriter.NewWriter(&a, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, rows)
	require.NoError(t, tw.Flush())
	tb := newTable(&b)
	fmt.Fprint(tb, rows)
	require.NoError(t, tb.Flush())
	require.Equal(t, a.String(), b.String())
}

// TestColouredTableAligns checks that every coloured row's summary starts
// in the same terminal column as the header's.
func TestColouredTableAligns(t *testing.T) {
	tx := Text{Color: true}
	var b strings.Builder
	tb := newTable(&b)
	fmt.Fprintln(tb, "CHECK\tVERDICT\tSUMMARY")
	for _, v := range []checks.Verdict{checks.Pass, checks.Fail, checks.Unknown, checks.Skip} {
		fmt.Fprintf(tb, "%s\t%s\tsummary\n", "check-"+string(v), tx.paint(v))
	}
	require.NoError(t, tb.Flush())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 5)
	require.Contains(t, b.String(), "\x1b[", "the verdicts are coloured")
	want := strings.Index(lines[0], "SUMMARY")
	for _, l := range lines[1:] {
		plain := ansiSeq.ReplaceAllString(l, "")
		require.Equal(t, want, strings.Index(plain, "summary"), "%q", plain)
	}
}
