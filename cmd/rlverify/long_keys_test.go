package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
)

// TestLongKeysPastAStoresLimit: the long-keys plan's tenants have keys of
// 129, 256 and 1,024 bytes that differ only at their end. testsvc's
// windowed service (its policy declares no identity.max_length) keeps them
// apart; with quirk cut-keys=128 (a store that keys on the first 128 bytes)
// they share one window, and isolation names the keys.
func TestLongKeysPastAStoresLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: two 3 s runs")
	}
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	polFile := writeFile(t, "windowed.yaml", string(pol))
	for _, tc := range []struct {
		name, quirk, want string
	}{
		{"keys kept whole", "", "pass"},
		{"keys cut to 128 bytes", "cut-keys=128", "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q testsvc.Quirks
			if tc.quirk != "" {
				require.NoError(t, q.Set(tc.quirk))
			}
			w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Common: testsvc.Common{Quirks: q}})
			require.NoError(t, err)
			url, stop := testsvc.Serve(w)
			defer stop()
			out, stderr, code := rl(t, "attack", "--plan", "long-keys", "--target", url+"/search/x", "--policy", polFile,
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json")
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			v, sum := checkOf(t, out, "isolation")
			require.Equal(t, tc.want, v, sum)
			d := decodeDoc(t, out)
			lengths := map[int]bool{}
			for _, k := range d.Keys {
				lengths[len(k.Key)] = true
			}
			require.Equal(t, map[int]bool{129: true, 256: true, 1024: true}, lengths)
		})
	}
}
