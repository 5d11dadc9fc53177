package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/calibrate"
	"github.com/rlverify/rlverify/policy"
)

const calData = "testdata/calibrate/"

// TestCalibrateEachInputFormat: one golden report per input format, all
// read through the same command.
func TestCalibrateEachInputFormat(t *testing.T) {
	imp := "../../importers/testdata/"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"combined", []string{"--traffic", calData + "access.log", "--key-field", "extra1"}},
		{"combined-gzip", []string{"--traffic", calData + "access.log.gz", "--key-field", "extra1"}},
		{"combined-regex", []string{"--traffic", calData + "access.log", "--key-regex", `"((?:free|paid)-[a-z]+)"$`}},
		{"json", []string{"--traffic", calData + "access.jsonl", "--from", "json", "--key-field", "headers.x-api-key", "--route-field", "request.path"}},
		{"history", []string{"--traffic", imp + "vegeta-ok.golden.jsonl", "--from", "history"}},
		{"vegeta", []string{"--traffic", imp + "vegeta-ok.json", "--from", "vegeta", "--policy", imp + "policy-query.yaml"}},
		{"k6", []string{"--traffic", imp + "k6-ok.json", "--from", "k6", "--key-field", "key"}},
		{"har", []string{"--traffic", imp + "har-ok.har", "--from", "har", "--policy", imp + "policy-har.yaml", "--host", "127.0.0.1:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := rl(t, append([]string{"calibrate", "--timeline-rows", "8"}, tc.args...)...)
			require.Equal(t, ExitPass, code, stderr)
			golden(t, "calibrate-"+tc.name+".golden", out)
		})
	}
}

func TestCalibrateReadsTheSameRequestsFromEveryAccessLogFormat(t *testing.T) {
	var reps []calibrate.Report
	for _, args := range [][]string{
		{"--traffic", calData + "access.log", "--key-field", "extra1"},
		{"--traffic", calData + "access.log.gz", "--key-field", "extra1"},
		{"--traffic", calData + "access.jsonl", "--from", "json", "--key-field", "headers.x-api-key", "--route-field", "request.path"},
	} {
		out, stderr, code := rl(t, append([]string{"calibrate", "--report", "json"}, args...)...)
		require.Equal(t, ExitPass, code, stderr)
		var r calibrate.Report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		require.Equal(t, 1, r.Files[0].Keyless, "the line without a key is counted")
		r.Files = nil
		reps = append(reps, r)
	}
	require.Equal(t, reps[0], reps[1])
	require.Equal(t, reps[0], reps[2])
}

// TestCalibrateReproducesTheSeedsTable: a log of the seeds' 20 arrivals,
// the seeds' token bucket declared and their sliding log compared: the
// timeline is the seeds' table.
func TestCalibrateReproducesTheSeedsTable(t *testing.T) {
	out, stderr, code := rl(t, "calibrate", "--traffic", calData+"seeds.jsonl", "--from", "json", "--key-field", "api_key",
		"--policy", calData+"seeds-policy.yaml", "--compare", "sliding-log:limit=5,window=1s")
	require.Equal(t, ExitPass, code, stderr)
	start := strings.Index(out, "  timeline of seed")
	require.GreaterOrEqual(t, start, 0, out)
	rows := strings.Split(strings.TrimSpace(out[start:]), "\n")[2:]
	require.Len(t, rows, 20)
	word := map[string]string{"IZIN": "ALLOW", "TOLAK": "DENY"}
	for i, row := range seedTable {
		f := strings.Fields(rows[i])
		require.Len(t, f, 8, rows[i]) // t, declared, 5 families, the compared log
		require.Equal(t, word[row.bucket], f[1], "token bucket at t=%s", f[0])
		require.Equal(t, word[row.log], f[7], "sliding log at t=%s", f[0])
	}
	golden(t, "calibrate-seeds.golden", out)
	for _, f := range []string{"md", "html"} {
		out, stderr, code := rl(t, "calibrate", "--traffic", calData+"seeds.jsonl", "--from", "json", "--key-field", "api_key",
			"--policy", calData+"seeds-policy.yaml", "--compare", "sliding-log:limit=5,window=1s", "--report", f)
		require.Equal(t, ExitPass, code, stderr)
		golden(t, "calibrate-seeds."+f+".golden", out)
	}
}

func TestCalibrateWritesAPolicyThatLoadsAndNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "recommended.yaml")
	html := filepath.Join(dir, "calibrate.html")
	args := []string{"calibrate", "--traffic", "../../examples/calibrate/access.log.gz", "--key-field", "extra1",
		"--policy", "../../examples/calibrate/candidate.yaml", "--abusive-keys", "free-scraper",
		"--report", "json", "--report", "html=" + html, "--write-policy", pol}
	out, stderr, code := rl(t, args...)
	require.Equal(t, ExitPass, code, stderr)
	var r calibrate.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	p, err := policy.Load(pol)
	require.NoError(t, err)
	for _, tr := range r.Tiers {
		tier, ok := p.Tier(tr.Tier)
		require.True(t, ok)
		require.Equal(t, tr.Recommended[0].Limit.Capacity, tier.Limits[0].Capacity, tr.Tier)
		require.Equal(t, tr.Declared[0].Rate, tier.Limits[0].Rate, "the rate stays as declared")
		require.LessOrEqual(t, tr.Recommended[0].Refused.LegitShare, 0.001)
	}
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	require.Contains(t, string(page), "<svg")
	require.Contains(t, string(page), "Timeline of free-")
	for _, external := range []string{"src=", "<link", "@import", "url("} {
		require.NotContains(t, string(page), external, "no external assets")
	}
	before, err := os.ReadFile(pol)
	require.NoError(t, err)
	_, stderr, code = rl(t, args...)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "already exists: give another file, or --force to replace it")
	after, err := os.ReadFile(pol)
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, stderr, code = rl(t, append(args, "--force")...)
	require.Equal(t, ExitPass, code, stderr)
}

func TestCalibrateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, "bad.log", "192.0.2.1 - - [01/Dec/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\" \"free-a\"\nnot a log line\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no traffic", nil, "--traffic FILE is required"},
		{"no key field", []string{"--traffic", calData + "access.log"}, "combined logs need where the key is"},
		{"malformed line", []string{"--traffic", bad, "--key-field", "extra1"}, "bad.log:2: not a combined log line: no [time] after the user (--skip-malformed skips such lines, counted and listed)"},
		{"mixed formats", []string{"--traffic", calData + "access.jsonl", "--key-field", "extra1"}, "access.jsonl:1: not a combined log line: no address field; the line looks like json, not combined"},
		{"missing file", []string{"--traffic", filepath.Join(dir, "nope.log"), "--key-field", "ip"}, "no such file or directory"},
		{"a directory", []string{"--traffic", dir, "--key-field", "ip"}, "is a directory, not a log file"},
		{"bad target", []string{"--traffic", calData + "access.log", "--key-field", "ip", "--max-refused", "120%"}, `--max-refused "120%": want a share below 100%`},
		{"bad report", []string{"--traffic", calData + "access.log", "--key-field", "ip", "--report", "pdf"}, `--report "pdf": want FORMAT or FORMAT=FILE`},
		{"two to stdout", []string{"--traffic", calData + "access.log", "--key-field", "ip", "--report", "text", "--report", "json"}, "only one format can go to stdout"},
		{"faulty compared", []string{"--traffic", calData + "access.log", "--key-field", "ip", "--compare", "faulty/uncapped-refill:capacity=5,rate=1"}, "calibrate replays the reference algorithms"},
		{"no key matches a tier", []string{"--traffic", calData + "access.log", "--key-field", "ip", "--policy", "../../importers/testdata/policy-har.yaml"}, ""},
		{"timeline rows", []string{"--traffic", calData + "access.log", "--key-field", "ip", "--timeline-rows", "0"}, "--timeline-rows 0: want 1 … 100000"},
		{"tier field on a history", []string{"--traffic", "../../importers/testdata/vegeta-ok.golden.jsonl", "--from", "history", "--tier-field", "tier"}, "a tier field is read from combined and JSON logs only"},
		{"format unknown", []string{"--traffic", calData + "access.log", "--from", "w3c"}, `--from "w3c": want combined, json, history, vegeta, k6, har`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, append([]string{"calibrate"}, tc.args...)...)
			if tc.want == "" { // har-sample has a default tier: every key matches it
				require.Equal(t, ExitPass, code, stderr)
				return
			}
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

// readmeCommands returns the commands of the first sh block of README.md's
// section titled heading, continuation lines joined.
func readmeCommands(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, start, 0, "README.md has %q", heading)
	section := doc[start:]
	open := strings.Index(section, "```sh\n")
	require.GreaterOrEqual(t, open, 0)
	block := section[open+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	block = strings.ReplaceAll(block, "\\\n", " ")
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// TestReadmeChooseYourNumbers runs every command of the README's "Choose
// your numbers": calibrate the example log, serve the recommended policy
// (on a free port instead of 8080) and audit it.
func TestReadmeChooseYourNumbers(t *testing.T) {
	cmds := readmeCommands(t, "### Choose your numbers")
	require.Len(t, cmds, 3)
	examples, err := filepath.Abs("../../examples")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(examples, filepath.Join(dir, "examples")))
	t.Chdir(dir)
	addr := freeAddr(t)
	for _, cmd := range cmds {
		cmd = strings.ReplaceAll(cmd, "127.0.0.1:8080", addr)
		args := strings.Fields(cmd)
		require.Equal(t, "rlverify", args[0], cmd)
		args = args[1:]
		if args[len(args)-1] == "&" {
			require.Equal(t, "serve", args[0])
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, args[:len(args)-1], io.Discard, io.Discard) }()
			t.Cleanup(func() { cancel(); <-done })
			waitUp(t, addr)
			continue
		}
		out, stderr, code := rl(t, args...)
		require.Equal(t, ExitPass, code, "%s\nstdout:\n%s\nstderr:\n%s", cmd, out, stderr)
		if args[0] == "calibrate" {
			require.Contains(t, out, "refused by the declared policy: 650 of 2775 legitimate (23.42%)", "the README's figure")
			require.Contains(t, out, "token-bucket     capacity   5         12")
		}
		if args[0] == "audit" {
			require.Contains(t, out, "verdict: PASS")
		}
	}
	p, err := policy.Load(filepath.Join(dir, "recommended.yaml"))
	require.NoError(t, err)
	free, _ := p.Tier("free")
	require.Equal(t, int64(12), free.Limits[0].Capacity)
	_, err = os.Stat(filepath.Join(dir, "calibrate.html"))
	require.NoError(t, err)
}

func waitUp(t *testing.T, addr string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}

func TestCalibrateCompletesItsOwnFormats(t *testing.T) {
	require.Equal(t, []string{"json"}, complete(t, "calibrate", "--from", "j"))
	require.Equal(t, []string{"history", "har"}, complete(t, "calibrate", "--from", "h"))
	require.Equal(t, []string{"html"}, complete(t, "calibrate", "--report", "h"))
	require.Equal(t, []string{"text,json", "text,junit"}, complete(t, "attack", "--format", "text,j"), "other commands keep theirs")
}
