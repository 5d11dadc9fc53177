package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

// The importers' samples: vegeta results recorded by vegeta's library, k6
// output and HAR files written after the formats' documentation.
const importSamples = "../../importers/testdata/"

func TestImportThenCheckGivesTheExpectedVerdict(t *testing.T) {
	for _, tc := range []struct {
		file, from string
		flags      []string
		// root is the defect the diagnosis names ("" for a correct limiter):
		// the bad vegeta and HAR samples oversell because two instances
		// keep their own state, so instances explains the oversell.
		root string
	}{
		{"vegeta-ok.json", "vegeta", []string{"--policy", importSamples + "policy-query.yaml"}, ""},
		{"vegeta-bad.json", "vegeta", []string{"--policy", importSamples + "policy-query.yaml"}, "instances"},
		{"k6-ok.json", "k6", []string{"--key-tag", "key"}, ""},
		{"k6-bad.json", "k6", []string{"--key-tag", "key"}, "oversell"},
		{"har-ok.har", "har", []string{"--policy", importSamples + "policy-har.yaml", "--instance", "127.0.0.1:8080=0"}, ""},
		{"har-bad.har", "har", []string{"--policy", importSamples + "policy-har.yaml"}, "instances"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			hist := filepath.Join(t.TempDir(), "history.jsonl")
			args := append([]string{"import", "--from", tc.from, importSamples + tc.file, "-o", hist}, tc.flags...)
			out, stderr, code := rl(t, args...)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, "judge it with: rlverify check --history "+hist)

			out, stderr, code = rl(t, "check", "--history", hist, "--format", "json")
			d := decodeDoc(t, out)
			v := verdicts(d)
			require.False(t, d.Interrupted, "an import is complete")
			if tc.root != "" {
				require.Equal(t, ExitFail, code, stderr)
				require.Equal(t, "fail", v[tc.root], "the root defect: %v", v)
				require.Contains(t, []string{"fail", "explained"}, v["oversell"], "a limiter that oversells")
				for check, verdict := range v {
					if check != tc.root {
						require.NotEqual(t, "fail", verdict, "only the root fails: %s", check)
					}
				}
				return
			}
			require.Equal(t, ExitPass, code, stderr)
			require.Equal(t, "pass", v["oversell"])
			require.Equal(t, "pass", v["evidence"])
			for check, verdict := range v {
				require.Contains(t, []string{"pass", "skip"}, verdict, "a correct limiter: %s", check)
			}
		})
	}
}

func TestImportReport(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	out, stderr, code := rl(t, "import", "--from", "har", importSamples+"har-ok.har", "-o", hist,
		"--policy", importSamples+"policy-har.yaml", "--instance", "127.0.0.1:8080=0")
	require.Equal(t, 0, code, stderr)
	golden(t, "import-har.golden", strings.ReplaceAll(out, hist, "H.jsonl"))

	// -o - writes the history to stdout and the report to stderr.
	out, stderr, code = rl(t, "import", "--from", "k6", importSamples+"k6-ok.json", "-o", "-", "--key-tag", "key")
	require.Equal(t, 0, code, stderr)
	h, err := history.Read("stdout", strings.NewReader(out))
	require.NoError(t, err)
	require.Len(t, h.Events, 19)
	require.Contains(t, stderr, "imported 19 requests")
	require.Contains(t, stderr, "k6 JSON output keeps no response headers")
}

func TestImportBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, "empty.json", "")
	k6 := importSamples + "k6-ok.json"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown --from", []string{"--from", "jmeter", k6}, []string{`--from "jmeter": want vegeta, k6, har`}},
		{"no --from", []string{k6}, []string{"--from is required"}},
		{"no -o", []string{"--from", "k6", k6, "--key-tag", "key", "-o", ""}, []string{"-o FILE is required"}},
		{"not that format", []string{"--from", "vegeta", k6}, []string{"k6-ok.json:1: not a vegeta result", `no "timestamp" field`}},
		{"not HAR", []string{"--from", "har", k6}, []string{"k6-ok.json: not a HAR file: line 2, column 1"}},
		{"empty file", []string{"--from", "har", empty}, []string{"empty.json: the file is empty: want HAR 1.2"}},
		{"missing file", []string{"--from", "k6", filepath.Join(dir, "nope.json")}, []string{"nope.json", "no such file"}},
		{"bad --instance", []string{"--from", "k6", k6, "--instance", "127.0.0.1:8080"}, []string{`--instance "127.0.0.1:8080": want HOST=N`}},
		{"--key-tag on HAR", []string{"--from", "har", importSamples + "har-ok.har", "--key-tag", "key"}, []string{"--key-tag does not apply to HAR 1.2"}},
		{"no key", []string{"--from", "k6", k6}, []string{"k6-ok.json:8: no key for this request", "give --key, or --key-tag TAG"}},
		{"unknown policy", []string{"--from", "k6", k6, "--policy", "nope"}, []string{`no policy file "nope"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "h.jsonl")
			args := append([]string{"import"}, tc.args...)
			if !slices.Contains(tc.args, "-o") {
				args = append(args, "-o", out)
			}
			_, stderr, code := rl(t, args...)
			require.Equal(t, ExitUsage, code, stderr)
			requireInOrder(t, stderr, tc.want)
			_, err := os.Stat(out)
			require.True(t, os.IsNotExist(err), "a failed import leaves no history behind")
		})
	}
}

// handHistory is a history converted by hand as docs/history.md describes:
// a run header naming its policy (no declared copy), events, no end.
func handHistory(t *testing.T, env, pol string, admitted int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"t":"run","version":1,"id":"hand","start":"2025-01-01T00:00:00Z","env":"` + env + `","policy":"` + pol + `","instances":["http://127.0.0.1:8080"]}` + "\n")
	for i := range admitted {
		b.WriteString(strings.NewReplacer("ID", string(rune('1'+i)), "SENT", string(rune('1'+i))).Replace(
			`{"t":"e","id":ID,"key":"free-a","inst":0,"phase":"p","intended":SENT000,"sent":SENT000,"recv":SENT500,"status":200}`) + "\n")
	}
	return writeFile(t, "hand.jsonl", b.String())
}

func TestCheckHandConvertedHistory(t *testing.T) {
	noHeaders := writeFile(t, "p.yaml", "name: plain\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\nheaders: {retry_after: false, ratelimit: false, x_ratelimit: false}\n")
	t.Run("an import without an end record is judged, not interrupted", func(t *testing.T) {
		out, stderr, code := rl(t, "check", "--history", handHistory(t, "import:locust", noHeaders, 5))
		require.Equal(t, ExitPass, code, stderr)
		require.Contains(t, out, "policy plain ("+noHeaders+")", "the policy named in the header, read from its file")
		require.Contains(t, out, "judged as complete as written")
		require.NotContains(t, out, "Interrupted")
	})
	t.Run("a live run without an end record was cut off", func(t *testing.T) {
		_, stderr, code := rl(t, "check", "--history", handHistory(t, "external", noHeaders, 5))
		require.Equal(t, ExitInterrupted, code, stderr)
	})
	t.Run("a shipped policy named alone", func(t *testing.T) {
		out, stderr, code := rl(t, "check", "--history", handHistory(t, "import:locust", "builtin:fail-closed", 3))
		require.NotEqual(t, ExitUsage, code, stderr)
		require.Contains(t, out, "policy fail-closed (builtin:fail-closed)")
	})
	t.Run("a policy that is neither shipped nor a file", func(t *testing.T) {
		_, stderr, code := rl(t, "check", "--history", handHistory(t, "import:locust", "mine.yaml", 3))
		require.Equal(t, ExitUsage, code)
		requireInOrder(t, stderr, []string{"--policy FILE is required", `the history's run header names policy "mine.yaml"`})
	})
	t.Run("an imported oversell still fails", func(t *testing.T) {
		_, stderr, code := rl(t, "check", "--history", handHistory(t, "import:locust", noHeaders, 9), "--policy", writeFile(t, "tight.yaml",
			"name: tight\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - {algorithm: token-bucket, capacity: 3, rate: 1/s}\nheaders: {retry_after: false, ratelimit: false, x_ratelimit: false}\n"))
		require.Equal(t, ExitFail, code, stderr)
	})
	t.Run("stdin given twice", func(t *testing.T) {
		_, stderr, code := rl(t, "check", "--history", "-", "--history", "-")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, stderr, "can be given once")
	})
}

func TestAttackHistoryFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "elsewhere.jsonl")
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--out", filepath.Join(dir, "out"), "--history", file, "--quiet")
	require.Equal(t, ExitPass, code, stderr)
	h, err := history.ReadFile(file)
	require.NoError(t, err)
	require.Len(t, h.Events, 100)
	_, err = os.Stat(filepath.Join(dir, "out", "latest", "history.jsonl"))
	require.True(t, os.IsNotExist(err), "--history FILE replaces DIR/history.jsonl")
	_, err = os.Stat(filepath.Join(dir, "out", "latest", "result.json"))
	require.NoError(t, err)
}

// TestAttackPipesIntoCheck runs `rlverify attack … --history - | rlverify
// check --history -` as two processes joined by a pipe.
func TestAttackPipesIntoCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := rlverifyBinary(t)
	dir := t.TempDir()
	attack := exec.Command(bin, "attack", "--plan", "concurrent-burst", "--limiter", "faulty/racy-token-bucket", "--history", "-", "--out", dir, "--quiet")
	check := exec.Command(bin, "check", "--history", "-")
	pipe, err := attack.StdoutPipe()
	require.NoError(t, err)
	check.Stdin = pipe
	var out, aErr, cErr bytes.Buffer
	check.Stdout, check.Stderr, attack.Stderr = &out, &cErr, &aErr
	require.NoError(t, check.Start())
	require.NoError(t, attack.Start())
	aWait := attack.Wait()
	cWait := check.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, cWait, &ee, "check fails the racy bucket: %s", cErr.String())
	require.Equal(t, ExitFail, ee.ExitCode(), cErr.String())
	require.ErrorAs(t, aWait, &ee, "attack judged it too: %s", aErr.String())
	require.Equal(t, ExitFail, ee.ExitCode())
	require.Contains(t, out.String(), "requests 100:")
	require.Regexp(t, `oversell\s+FAIL`, out.String())
	for _, f := range []string{"history.jsonl", "result.json"} {
		_, err := os.Stat(filepath.Join(dir, "latest", f))
		require.NoError(t, err, "the attack keeps %s in --out", f)
	}
}
