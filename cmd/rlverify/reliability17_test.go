package main

// Reliability, round two (issue 17): histories a hostile target cannot make
// unreadable, reading that never allocates from a guess, files read through
// a limit, panics that never look like usage errors, histories and shards
// that do not merge silently, and counts and bounds that are never cut or
// replaced. docs/reliability.md lists every case.

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

// generousPolicy admits everything the tests send, so only what they break
// decides the exit code.
const generousPolicy = "name: generous\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - capacity: 100000\n        rate: 10000/s\n"

// TestReliabilityHugeHeaderValues: a target answering 2 MiB RateLimit and
// Retry-After headers, let through by a raised --max-header-bytes. The run
// completes and judges its history (it used to write lines over the
// reader's limit and exit 2 with no report); every recorded value is at
// most history.MaxValue bytes, cut and marked.
func TestReliabilityHugeHeaderValues(t *testing.T) {
	huge := strings.Repeat("r", 2<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit", huge)
		w.Header().Set("RateLimit-Policy", huge)
		w.Header().Set("Retry-After", huge)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	pol := writeFile(t, "p.yaml", generousPolicy)
	plan := writeFile(t, "plan.yaml", "name: huge\nphases:\n  - kind: burst\n    key: free-h\n    requests: 5\n")
	dir := t.TempDir()
	// The engine refuses header sections over --max-header-bytes (64 KiB by
	// default); raised here so the values reach the history's writer.
	_, stderr, code := rl(t, "attack", "--plan", plan, "--env", "external", "--target", srv.URL,
		"--policy", pol, "--out", dir, "--quiet", "--max-header-bytes", fmt.Sprint(16<<20))
	require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
	require.NotContains(t, stderr, "token too long")
	_, err := os.Stat(filepath.Join(dir, "latest", "result.json"))
	require.NoError(t, err, "the run was judged and reported")
	file := filepath.Join(dir, "latest", "history.jsonl")
	h, err := history.ReadFile(file)
	require.NoError(t, err)
	require.Len(t, h.Events, 5)
	for _, e := range h.Events {
		if e.Status == 0 {
			require.NotEmpty(t, e.Err)
			require.LessOrEqual(t, len(e.Err), history.MaxValue)
			continue
		}
		for _, v := range []string{e.RateLimit, e.RateLimitPolicy, e.RetryAfter} {
			require.LessOrEqual(t, len(v), history.MaxValue)
			kept := strings.Index(v, "…[truncated ")
			require.Positive(t, kept, "cut and marked")
			require.Equal(t, huge[:kept]+fmt.Sprintf("…[truncated %d bytes]", len(huge)-kept), v)
		}
	}
	_, stderr, code = rl(t, "check", "--history", file, "--policy", pol)
	require.NotEqual(t, ExitUsage, code, "check reads what attack wrote: %s", stderr)
}

// TestReliabilityCheckBlankAndJunkLines: a history header followed by many
// MiB of blank lines, or of "0" lines, is judged (or refused at its first
// bad line) without allocating per line: `check` used to size its event
// slice from the first lines' density (29 GB for 100 MB of blank lines).
func TestReliabilityCheckBlankAndJunkLines(t *testing.T) {
	good := sampleHistory(t)
	header := string(good[:strings.IndexByte(string(good), '\n')+1])
	const size = 32 << 20
	for _, tc := range []struct {
		name, line string
		code       int
		want       string
	}{
		{"blank lines", "\n", ExitFail, "the run sent no requests: nothing was judged"},
		{"zeros", "0\n", ExitUsage, `h.jsonl:2: not a valid rlverify history: not a record: a line holds one JSON object such as {"t":"e",…}, not "0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "h.jsonl", header+strings.Repeat(tc.line, size/len(tc.line)))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			out, stderr, code := rl(t, "check", "--history", file)
			runtime.ReadMemStats(&after)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, out+stderr, tc.want)
			grown := int64(after.Sys) - int64(before.Sys)
			require.Less(t, grown, int64(96<<20), "took %d MiB from the system for a %d MiB file", grown>>20, size>>20)
		})
	}
}

// TestReliabilityFilesReadThroughALimit: a plan, policy or result that
// never ends (/dev/zero) is refused with the file and the limit named,
// quickly, as a usage error; a panic is an internal error (4), never 2.
func TestReliabilityFilesReadThroughALimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"--plan /dev/zero", []string{"attack", "--plan", "/dev/zero", "--quiet"}, []string{"/dev/zero", "more than the 1048576 bytes allowed"}},
		{"--policy /dev/zero", []string{"attack", "--plan", "concurrent-burst", "--policy", "/dev/zero", "--quiet"}, []string{"/dev/zero", "more than the 1048576 bytes allowed"}},
		{"check --policy /dev/zero", []string{"check", "--history", "x.jsonl", "--policy", "/dev/zero"}, []string{"/dev/zero", "more than the 1048576 bytes allowed"}},
		{"report --in /dev/zero", []string{"report", "--in", "/dev/zero"}, []string{"/dev/zero", "more than the 67108864 bytes allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireQuick(t, 10*time.Second, func() {
				_, stderr, code := rl(t, tc.args...)
				require.Equal(t, ExitUsage, code, stderr)
				requireInOrder(t, stderr, tc.want)
			})
		})
	}
	t.Run("a panic is an internal error", func(t *testing.T) {
		err := func() (err error) {
			defer recoverInternal(&err)
			var m map[string]int
			m["boom"]++ // a nil map: the kind of bug recoverInternal is for
			return nil
		}()
		var ee *exitError
		require.True(t, errors.As(err, &ee))
		require.Equal(t, ExitInternal, ee.ExitCode())
		require.NotEqual(t, ExitUsage, ExitInternal)
		msg := err.Error()
		require.True(t, strings.HasPrefix(msg, "internal error: assignment to entry in nil map"), msg)
		require.Contains(t, msg, "reliability17_test.go", "the stack says where")
		require.Contains(t, msg, "This is a bug in rlverify: please report it")
	})
}

// shardHistories runs a 20-request plan as shards 1/2 and 2/2 against one
// target that admits everything, and returns the two history files.
func shardHistories(t *testing.T) (string, string, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(srv.Close)
	pol := writeFile(t, "p.yaml", generousPolicy)
	plan := writeFile(t, "plan.yaml", "name: split\nphases:\n  - kind: burst\n    key: free-s\n    requests: 20\n")
	var files [2]string
	for i := range files {
		dir := t.TempDir()
		_, stderr, code := rl(t, "attack", "--plan", plan, "--env", "external", "--target", srv.URL,
			"--policy", pol, "--shard", fmt.Sprintf("%d/2", i+1), "--out", dir, "--quiet")
		require.Equal(t, ExitPass, code, stderr)
		files[i] = filepath.Join(dir, "latest", "history.jsonl")
	}
	return files[0], files[1], pol
}

// TestReliabilityHistoriesThatMustNotLoad: a record glued onto another,
// junk after a record, duplicate event ids, a start near year 1, and
// shards of different runs are errors naming the file and line, the ids
// or the fields; the shards of one run still merge.
func TestReliabilityHistoriesThatMustNotLoad(t *testing.T) {
	good := string(sampleHistory(t))
	lines := strings.SplitAfter(good, "\n")
	var evs []int // lines (from 0) holding events
	for i, l := range lines {
		if strings.HasPrefix(l, `{"t":"e",`) {
			evs = append(evs, i)
		}
	}
	require.Greater(t, len(evs), 3)
	at := func(i int, with string) string {
		c := append([]string(nil), lines...)
		c[i] = with
		return strings.Join(c, "")
	}
	e1, e2 := evs[1], evs[2]
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"a second record glued onto a line", at(e1, strings.TrimSuffix(lines[e1], "\n")+lines[e2]),
			[]string{fmt.Sprintf("h.jsonl:%d:", e1+1), "data after the record at column", "one record per line"}},
		{"junk after a record", at(e1, strings.TrimSuffix(lines[e1], "\n")+" trailing junk\n"),
			[]string{fmt.Sprintf("h.jsonl:%d:", e1+1), `data after the record at column`, `("trailing junk")`}},
		{"duplicate event ids", at(e2, lines[e1]), []string{"h.jsonl:", "event id", "appears more than once"}},
		{"a start near year 1", setStart(t, good, func(time.Time) time.Time { return time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC) }),
			[]string{"h.jsonl:1:", "run start 0001-01-01T00:00:01Z is out of range"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "h.jsonl", tc.content)
			_, stderr, code := rl(t, "check", "--history", file)
			require.Equal(t, ExitUsage, code, stderr)
			requireInOrder(t, stderr, tc.want)
		})
	}

	a, b, pol := shardHistories(t)
	t.Run("the shards of one run merge", func(t *testing.T) {
		_, stderr, code := rl(t, "check", "--history", a, "--history", b, "--policy", pol)
		require.Equal(t, ExitPass, code, stderr)
	})
	hb, err := os.ReadFile(b)
	require.NoError(t, err)
	first := strings.SplitN(string(hb), "\n", 2)
	for _, tc := range []struct {
		name     string
		old, new string
		want     []string
	}{
		{"another run id", `"id":"`, `"id":"x`, []string{"are not shards of one run", "run id"}},
		{"another plan", `"plan":"split"`, `"plan":"other"`, []string{"are not shards of one run", `plan "other" ≠ "split"`}},
		{"another policy", `"policy":"`, `"policy":"x`, []string{"are not shards of one run", "policy"}},
		{"the same shard twice", `"shard":"2/2"`, `"shard":"1/2"`, []string{"are both shard 1/2 of the run"}},
		{"a start a day earlier", `"start":"`, `"start":"`, []string{"apart: the shards of one run start within 1h0m0s of each other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, first[0], tc.old)
			header := strings.Replace(first[0], tc.old, tc.new, 1)
			if tc.name == "a start a day earlier" {
				header = setStart(t, first[0], func(s time.Time) time.Time { return s.Add(-24 * time.Hour) })
			}
			other := writeFile(t, "b.jsonl", header+"\n"+first[1])
			_, stderr, code := rl(t, "check", "--history", a, "--history", other, "--policy", pol)
			require.Equal(t, ExitUsage, code, stderr)
			requireInOrder(t, stderr, append([]string{"b.jsonl"}, tc.want...))
		})
	}
}

// setStart replaces the first "start" of a history (its run header) by
// what to makes of it.
func setStart(t *testing.T, history string, to func(time.Time) time.Time) string {
	t.Helper()
	i := strings.Index(history, `"start":"`) + len(`"start":"`)
	j := i + strings.IndexByte(history[i:], '"')
	start, err := time.Parse(time.RFC3339Nano, history[i:j])
	require.NoError(t, err)
	return history[:i] + to(start).Format(time.RFC3339Nano) + history[j:]
}

// TestReliabilityCountsAndBoundsAreNotCut: a non-whole count in a plan or
// policy, and a bound of zero or less, are usage errors naming the place;
// they used to be cut (12.9 → 12) or replaced by the defaults.
func TestReliabilityCountsAndBoundsAreNotCut(t *testing.T) {
	plan := writeFile(t, "bad.yaml", "name: bad\nphases:\n  - kind: burst\n    key: free-a\n    requests: 12.9\n")
	pol := writeFile(t, "bad.yaml", "name: p\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - capacity: 10.7\n        rate: 1/s\n")
	good := writeFile(t, "plan.yaml", "name: ok\nphases:\n  - kind: burst\n    key: free-a\n    requests: 2\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"requests: 12.9", []string{"attack", "--plan", plan}, []string{"bad.yaml:5: phases.0.requests: 12.9 is not a whole number"}},
		{"capacity: 10.7", []string{"attack", "--plan", good, "--policy", pol}, []string{"bad.yaml:6: tiers.0.limits.0.capacity: 10.7 is not a whole number"}},
		{"check --policy with capacity: 10.7", []string{"check", "--history", "x.jsonl", "--policy", pol}, []string{"bad.yaml:6: tiers.0.limits.0.capacity: 10.7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, tc.args...)
			require.Equal(t, ExitUsage, code, stderr)
			requireInOrder(t, stderr, tc.want)
		})
	}
	for _, cmd := range []string{"attack", "compare"} {
		for _, tc := range []struct {
			flag, value, want string
		}{
			{"--max-requests", "0", "--max-requests 0: want a positive number of requests"},
			{"--max-requests", "-5", "--max-requests -5: want a positive number"},
			{"--max-duration", "0s", "--max-duration 0s: want a positive duration"},
			{"--max-duration", "-1s", "--max-duration -1s: want a positive duration"},
			{"--timeout", "0s", "--timeout 0s: want a positive duration"},
			{"--timeout", "-5ms", "--timeout -5ms: want a positive duration"},
		} {
			t.Run(cmd+" "+tc.flag+" "+tc.value, func(t *testing.T) {
				args := []string{cmd, "--plan", good, tc.flag + "=" + tc.value, "--out", t.TempDir()}
				if cmd == "compare" {
					args = append(args, "--limiter", "token-bucket", "--limiter", "gcra")
				} else {
					args = append(args, "--quiet")
				}
				requireQuick(t, 5*time.Second, func() {
					_, stderr, code := rl(t, args...)
					require.Equal(t, ExitUsage, code, stderr)
					require.Contains(t, stderr, tc.want)
				})
			})
		}
	}
}
