package checks

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamerMatchesRunOnFixtures runs the differential test of the
// streaming judgement on every fixture (each a case a check was written
// for): the streaming checks give Run's results, with all the evidence.
func TestStreamerMatchesRunOnFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	defer func(n, m int) { sweepAfter, compactAfter = n, m }(sweepAfter, compactAfter)
	for _, sweep := range []int{sweepAfter, 0} {
		// With sweeps after every event too (keys closed and judged by the
		// sweep rather than by their next admission), and the window
		// screens compacting their queues as often as they can.
		sweepAfter = sweep
		if sweep == 0 {
			compactAfter = 0
		}
		for _, file := range files {
			// (Fail-mode's recovery and bypass's unions are oversell's
			// streams too.)
			if base := filepath.Base(file); sweep == 0 && !strings.HasPrefix(base, "oversell-") && !strings.HasPrefix(base, "bypass-") && !strings.HasPrefix(base, "fail-mode-") {
				continue
			}
			t.Run(fmt.Sprintf("%s/sweep %d", filepath.Base(file), sweep), func(t *testing.T) {
				h, p, _, _ := loadFixture(t, file)
				o := Options{Only: StreamableUnder(p), MaxEvidence: 1 << 20}
				want := Run(h, p, o)
				s, pass := fileStreamer(t, file, p, o)
				pass(s.Add)
				if s.Again() {
					pass(s.AddAgain)
				}
				require.Equal(t, want, s.Results())
			})
		}
	}
}
