package checks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Counts in summaries read like the reports' other counts: "13,709
// requests judged", never "13709" beside "13,709".
func TestPluralGroupsThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0 requests", 1: "1 request", 999: "999 requests", 1000: "1,000 requests", 13709: "13,709 requests", 1234567: "1,234,567 requests", -1500: "-1,500 requests"} {
		require.Equal(t, want, plural(n, "request", "requests"))
	}
}
