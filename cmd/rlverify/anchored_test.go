package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
)

// judged runs plan against the given testsvc instances with the windowed
// service's honest policy and returns every check's verdict.
func judged(t *testing.T, plan string, urls []string) map[string]string {
	t.Helper()
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	args := []string{"attack", "--plan", plan, "--policy", writeFile(t, "windowed.yaml", string(pol)),
		"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json"}
	for _, u := range urls {
		args = append(args, "--target", u+"/search/x")
	}
	out, stderr, code := rl(t, args...)
	require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
	return verdicts(decodeDoc(t, out))
}

// requireOnly: the checks named in want have those verdicts ("a|b": either),
// every other check passes or has nothing to judge.
func requireOnly(t *testing.T, got, want map[string]string) {
	t.Helper()
	for name, v := range got {
		w, ok := want[name]
		if name == "retry-after" && want["under-admission"] == "fail" {
			// Refused where a token was due: the advice honoured there may
			// be judged unhonoured (explained) or lie within the tolerance.
			require.Contains(t, []string{"pass", "explained"}, v, "%s: %v", name, got)
			continue
		}
		if !ok {
			require.Contains(t, []string{"pass", "skip"}, v, "%s: %v", name, got)
			continue
		}
		require.Contains(t, strings.Split(w, "|"), v, "%s: %v", name, got)
	}
}

// TestFirstAnchoredEdge: the first-edge plan opens a fresh key's window
// with one request and bursts just before and just after its close, W
// later. testsvc windowed (anchor: first) keeps it; with extend-on-hit
// (every request pushes the close back, an EXPIRE on every hit) the burst
// after the close is refused and under-admission proves it; a limiter whose
// only defect is a remaining count one too high (another invariant) leaves
// oversell and under-admission quiet.
func TestFirstAnchoredEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: 2 s windows")
	}
	for _, tc := range []struct {
		name, quirk string
		want        map[string]string
	}{
		{"honest", "", nil},
		{"extend-on-hit", testsvc.QuirkExtendOnHit, map[string]string{"under-admission": "fail"}},
		{"remaining-off-by-one", testsvc.QuirkRemainingOffByOne, map[string]string{"token-bounds": "fail"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var q testsvc.Quirks
			if tc.quirk != "" {
				require.NoError(t, q.Set(tc.quirk))
			}
			w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Common: testsvc.Common{Quirks: q}})
			require.NoError(t, err)
			url, stop := testsvc.Serve(w)
			defer stop()
			requireOnly(t, judged(t, "first-edge", []string{url}), tc.want)
		})
	}
}

// TestCrossInstanceSequences: two testsvc windowed instances on one store.
// refill-elsewhere drains a key on one and bursts it on the other 700ms
// later (still inside the window); retry-elsewhere retries where the advice
// said on the other. With one clock both keep their promises; the second
// instance's clock 1.5 s ahead opens a new window early (oversell), 1.5 s
// behind keeps the window shut past its advice (the probe 300ms after
// the advice is a refusal under-admission proves wrong; that instance's
// reset headers are wrong too, a symptom the diagnosis links to it when
// their timing lets it); a remaining count one too
// high on both leaves the sequences' checks quiet.
func TestCrossInstanceSequences(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: runs of up to 8 s")
	}
	for _, tc := range []struct {
		name, plan, quirk string
		skew              time.Duration
		want              map[string]string
	}{
		{"refill one clock", "refill-elsewhere", "", 0, nil},
		{"refill clock ahead", "refill-elsewhere", "", 1500 * time.Millisecond, map[string]string{"instances": "fail", "oversell": "explained", "headers": "explained"}},
		{"refill remaining-off-by-one", "refill-elsewhere", testsvc.QuirkRemainingOffByOne, 0, map[string]string{"token-bounds": "fail"}},
		{"retry one clock", "retry-elsewhere", "", 0, nil},
		{"retry clock behind", "retry-elsewhere", "", -1500 * time.Millisecond, map[string]string{"under-admission": "fail", "headers": "explained|fail"}},
		{"retry remaining-off-by-one", "retry-elsewhere", testsvc.QuirkRemainingOffByOne, 0, map[string]string{"token-bounds": "fail"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var q testsvc.Quirks
			if tc.quirk != "" {
				require.NoError(t, q.Set(tc.quirk))
			}
			store, up := testsvc.NewStore(), testsvc.NewUpstream()
			clocks := []func() time.Time{time.Now, func() time.Time { return time.Now().Add(tc.skew) }}
			var hs []testsvc.Windowed
			for i := range clocks {
				w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Store: store, Common: testsvc.Common{Quirks: q, Now: clocks[i], Upstream: up}})
				require.NoError(t, err)
				hs = append(hs, *w)
			}
			urls, stop := testsvc.ServeN(&hs[0], &hs[1])
			defer stop()
			requireOnly(t, judged(t, tc.plan, urls), tc.want)
		})
	}
}
