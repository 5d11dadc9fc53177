package rlverify_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/thresholds"
)

// streamHistories are generated histories for the differential tests of
// the two paths: one key, many keys, faults with several instances and
// errors, few events (the lanes drawn one by one), an oversold key.
func streamHistories() []struct {
	name string
	h    func() *history.History
} {
	sec := int64(time.Second)
	return []struct {
		name string
		h    func() *history.History
	}{
		{"one key", func() *history.History { return bench.Generate(3000, 1) }},
		{"many keys", func() *history.History { return bench.Generate(4000, 200) }},
		{"few events", func() *history.History { return bench.Generate(900, 3) }},
		{"faults, instances, errors", func() *history.History {
			h := bench.Generate(4000, 40)
			for i := range h.Events {
				e := &h.Events[i]
				e.Instance = i % 3
				switch i % 23 {
				case 4:
					e.Status, e.Err = 0, "timeout"
				case 9:
					e.Fallback = "open"
				case 11:
					e.Status = 503
				}
				if i%31 == 0 {
					e.XRemaining = "11" // beyond the quota
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 2 * sec, End: 4 * sec}, {Kind: "store-slow", Start: 9 * sec, End: 0}}
			h.Run.Instances = []string{"http://127.0.0.1:1/a", "http://127.0.0.1:2/a", "http://127.0.0.1:3/a"}
			return h
		}},
		{"completion order", func() *history.History {
			// Written as the engine writes: when each request completes,
			// so the file's order (errors' first examples, the key table's
			// order) is not the stream's.
			h := bench.Generate(3000, 20)
			for i := range h.Events {
				if i%17 == 3 {
					h.Events[i].Status, h.Events[i].Err, h.Events[i].Body = 0, "reset "+strconv.Itoa(i), "b"+strconv.Itoa(i%5)
				}
			}
			slices.SortStableFunc(h.Events, func(a, b history.Event) int { return cmp.Compare(a.Recv, b.Recv) })
			return h
		}},
		{"oversold", func() *history.History {
			h := bench.Generate(2000, 5)
			for i := range h.Events {
				if i%7 == 0 {
					h.Events[i].Status = 200 // admitted where the bucket was empty
				}
			}
			return h
		}},
	}
}

// TestCheckPathsGiveOneDocument: Check on the streaming path and on the
// in-memory path give the same results and the same document (every
// field) on generated histories, and byte-identical reports in every
// format (JSON, text, Markdown, JUnit, HTML) on the smaller two.
func TestCheckPathsGiveOneDocument(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	// The policy turning off every check that does not stream: every
	// check is selected, most of them skipped.
	off, err := policy.Parse("bench-off", []byte(bench.PolicyYAML+"checks_off: [instances, fail-mode, downstream, bypass, calibration, regions, delay]\n"))
	require.NoError(t, err)
	for _, tc := range streamHistories() {
		onlys := [][]string{checks.Streamable(), {"oversell"}}
		if tc.name == "faults, instances, errors" || tc.name == "oversold" {
			onlys = append(onlys, nil) // every check, under off
		}
		for _, only := range onlys {
			name := "checks_off"
			if only != nil {
				name = only[0] + "…"
			}
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				file := filepath.Join(t.TempDir(), "h.jsonl")
				writeHistory(t, file, tc.h())
				o := rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: only}}
				if only == nil {
					o.Policy = off
				}
				path, why := rlverify.ChoosePath(o)
				require.Equal(t, rlverify.Streaming, path, why)
				streamed, err := rlverify.Check(context.Background(), o)
				require.NoError(t, err)
				require.Equal(t, rlverify.Streaming, streamed.Path)
				whole := requireInMemoryGives(t, o, streamed)
				d := streamed.Document
				require.NotNil(t, d.Timeline)
				require.NotNil(t, d.Latency)
				require.NotEmpty(t, d.Keys)
				switch tc.name {
				case "oversold":
					if only == nil || only[0] == "oversell" {
						require.Equal(t, checks.Fail, d.Verdict)
					}
				case "faults, instances, errors":
					require.NotEmpty(t, d.PerSecond)
					require.NotEmpty(t, d.Errors)
					require.Len(t, d.Timeline.Traffic.Instances, 3)
					require.NotEmpty(t, d.Timeline.Keys[0].Instances)
					if only != nil && only[0] == "headers" {
						require.Equal(t, checks.Fail, d.Verdict)
					}
				case "few events":
					require.NotNil(t, d.Timeline.Traffic.Ops)
				}
				if tc.name != "few events" && tc.name != "oversold" {
					return // rendering the larger documents in every format would take most of a CI minute under -race
				}
				for _, f := range reports.FormatNames() {
					r, err := reports.Lookup(f)
					require.NoError(t, err)
					var a, b bytes.Buffer
					require.NoError(t, r.Render(&a, whole.Document))
					require.NoError(t, r.Render(&b, streamed.Document))
					require.Equal(t, a.String(), b.String(), "format %s", f)
				}
			})
		}
	}
}

// writeHistory writes h to file, its faults among the events.
func writeHistory(t *testing.T, file string, h *history.History) {
	t.Helper()
	w, err := history.Create(file)
	require.NoError(t, err)
	require.NoError(t, w.WriteRun(h.Run))
	for i := range h.Events {
		if i == len(h.Events)/2 {
			for _, f := range h.Faults {
				require.NoError(t, w.WriteFault(f))
			}
		}
		require.NoError(t, w.WriteEvent(&h.Events[i]))
	}
	require.NoError(t, w.WriteEnd(*h.End))
	require.NoError(t, w.Close())
}

// TestChoosePath: the rule of which path Check takes.
func TestChoosePath(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	off, err := policy.Parse("bench-off", []byte(bench.PolicyYAML+"checks_off: [instances, fail-mode, downstream, bypass, calibration, regions, delay]\n"))
	require.NoError(t, err)
	delaying, err := policy.Parse("bench-delay", []byte(bench.PolicyYAML+"delay: {max_wait: 1s}\n"))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, bench.WriteHistory(file, bench.Generate(300, 2)))
	streamable := checks.Options{Only: checks.Streamable()}
	th, err := thresholds.Parse("errors<1%")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		o    rlverify.CheckOptions
		want rlverify.Path
		why  string
	}{
		{"streamable checks", rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: streamable}, rlverify.Streaming, "every check judged streams: " + strings.Join(checks.Streamable(), ", ")},
		{"one streamable check", rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: []string{"headers"}}}, rlverify.Streaming, "every check judged streams: headers"},
		{"the rest turned off by the policy", rlverify.CheckOptions{Histories: []string{file}, Policy: off}, rlverify.Streaming, "every check judged streams: oversell, under-admission, token-bounds, retry-after, headers, isolation"},
		{"the rest turned off by the options", rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: []string{"oversell", "fail-mode"}, Off: []string{"fail-mode"}}}, rlverify.Streaming, "every check judged streams: oversell"},
		{"every check", rlverify.CheckOptions{Histories: []string{file}, Policy: pol}, rlverify.Streaming, "every check judged streams: "},
		{"one that does not stream", rlverify.CheckOptions{Histories: []string{file}, Policy: delaying, Checks: checks.Options{Only: []string{"oversell", "delay"}}}, rlverify.InMemory, "delay streams only when the policy declares no delay (this one does)"},
		{"stdin", rlverify.CheckOptions{Histories: []string{rlverify.Stdin}, Policy: pol, Checks: streamable}, rlverify.InMemory, "standard input cannot be read twice"},
		{"shards", rlverify.CheckOptions{Histories: []string{file, file}, Policy: pol, Checks: streamable}, rlverify.InMemory, "2 shards are merged in memory"},
		{"thresholds", rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: streamable, Thresholds: []thresholds.Threshold{th}}, rlverify.InMemory, "thresholds read the events in memory"},
		{"asked", rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: streamable, InMemory: true}, rlverify.InMemory, "asked for"},
		{"in memory already", rlverify.CheckOptions{History: bench.Generate(10, 1), Policy: pol, Checks: streamable}, rlverify.InMemory, "already in memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := rlverify.ChoosePath(tc.o)
			require.Equal(t, tc.want, got, why)
			require.Contains(t, why, tc.why)
		})
	}
	// Faults the streaming checks do not judge yet.
	for kind, why := range map[string]string{checks.LimitChangeFault: "changed a declared limit", "clock-skew": "stepped an instance's clock"} {
		h := bench.Generate(300, 2)
		h.Faults = []history.Fault{{Kind: kind, Start: 1e9, End: 2e9, Param: "x"}}
		f := filepath.Join(t.TempDir(), "h.jsonl")
		writeHistory(t, f, h)
		path, got := rlverify.ChoosePath(rlverify.CheckOptions{Histories: []string{f}, Policy: pol, Checks: streamable})
		require.Equal(t, rlverify.InMemory, path, kind)
		require.Contains(t, got, why)
	}
	// A history that cannot be read is left to the in-memory path, whose
	// error Check returns.
	o := rlverify.CheckOptions{Histories: []string{file + ".missing"}, Policy: pol, Checks: streamable}
	path, why := rlverify.ChoosePath(o)
	require.Equal(t, rlverify.InMemory, path)
	require.Contains(t, why, "h.jsonl.missing")
	_, err = rlverify.Check(context.Background(), o)
	require.ErrorContains(t, err, "h.jsonl.missing")
}

// TestCheckFallsBackWhenTheFileIsTooFarOutOfOrder: an event written
// after events sent more than the stream's reorder bound later cannot be
// streamed with the default bound. A file whose end record says how far
// out of order its writer wrote it (history.End.Reorder) is streamed with
// that bound, and gives the in-memory document; one without the measure
// (written before it, or edited so the measure is gone) is judged in
// memory, saying why; one edited further out of order than its measure is
// streamed again with the default bound.
func TestCheckFallsBackWhenTheFileIsTooFarOutOfOrder(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	// More events than the reader's first window (65,536 lines), which it
	// reorders whole before passing any on.
	late := bench.Generate(66_000, 20)
	require.Greater(t, late.Events[len(late.Events)-1].Sent-late.Events[0].Sent, int64(history.DefaultReorderBound))
	first := late.Events[0]
	late.Events = append(late.Events[1:], first) // the first request written last
	inOrder := bench.Generate(66_000, 20)
	// swapped writes two events of inOrder's in each other's place, 2 s
	// apart: further out of order than the end record's measure (0), within
	// the default bound.
	swapped := func(b []byte) []byte {
		lines := bytes.Split(b, []byte("\n"))
		a, z := 1000, 0
		for i := a + 1; i < len(lines); i++ {
			if bytes.Contains(lines[i], []byte(`"t":"e"`)) && eventSent(t, lines[i])-eventSent(t, lines[a]) >= int64(2*time.Second) {
				z = i
				break
			}
		}
		require.NotZero(t, z)
		lines[a], lines[z] = lines[z], lines[a]
		return bytes.Join(lines, []byte("\n"))
	}
	noMeasure := regexp.MustCompile(`,"reorder":[0-9]+`)
	for _, c := range []struct {
		name    string
		h       *history.History
		edit    func([]byte) []byte
		path    rlverify.Path
		why     string
		reorder bool
		verdict checks.Verdict
	}{
		{"the writer's measure", late, nil, rlverify.Streaming, "every check judged streams", true, checks.Pass},
		// An edited file's verdict says so, whichever path judged it.
		{"no measure", late, func(b []byte) []byte { return noMeasure.ReplaceAll(b, nil) }, rlverify.InMemory, "out of order", false, checks.Modified},
		{"edited past its measure", inOrder, swapped, rlverify.Streaming, "every check judged streams", true, checks.Modified},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "h.jsonl")
			writeHistory(t, file, c.h)
			if c.edit != nil {
				b, err := os.ReadFile(file)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(file, c.edit(b), 0o644))
			}
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, c.reorder, bytes.Contains(b, []byte(`"reorder":`)))
			o := rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: []string{"headers"}}}
			got, err := rlverify.Check(context.Background(), o)
			require.NoError(t, err)
			require.Equal(t, c.path, got.Path)
			require.Contains(t, got.PathWhy, c.why)
			require.Equal(t, c.verdict, got.Document.Verdict)
			require.Equal(t, int64(66_000), got.Document.Stats.Requests)
			requireInMemoryGives(t, o, got)
		})
	}
}

// openFiles counts the process's open files (-1 where /proc cannot say).
func openFiles(t *testing.T) int {
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(names)
}

// requireInMemoryGives judges o's history in memory and requires the
// results and document got (from another path) to be those; it returns
// the in-memory outcome.
func requireInMemoryGives(t *testing.T, o rlverify.CheckOptions, got *rlverify.Outcome) *rlverify.Outcome {
	t.Helper()
	o.InMemory = true
	whole, err := rlverify.Check(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, rlverify.InMemory, whole.Path)
	require.Equal(t, whole.Results, got.Results)
	require.Equal(t, whole.Document, got.Document)
	return whole
}

// eventSent is the send time of an event's line.
func eventSent(t *testing.T, line []byte) int64 {
	var e history.Event
	require.NoError(t, json.Unmarshal(line, &e))
	return e.Sent
}

// TestCheckStreamsWithOrWithoutASpill: the streaming path's second pass
// reads the first pass's events back from a spill of whole events (checks
// that ask for the events again: every check), or of compact records (the
// document's alone: oversell and headers), or, where the spill cannot be
// made (no temporary directory), decodes the history a second time; each
// way gives the in-memory document.
func TestCheckStreamsWithOrWithoutASpill(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "h.jsonl")
	// More events than reports.MaxLaneOps: the spill is what the second
	// pass would have read.
	writeHistory(t, file, bench.Generate(reports.MaxLaneOps+100, 20))
	for _, c := range []struct {
		name    string
		only    []string
		noSpill bool
	}{
		{"events", checks.Streamable(), false},
		{"compact", []string{"oversell", "headers"}, false},
		{"none, every check", checks.Streamable(), true},
		{"none, oversell and headers", []string{"oversell", "headers"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.noSpill {
				t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
			}
			o := rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: c.only}}
			fds := openFiles(t)
			streamed, err := rlverify.Check(context.Background(), o)
			require.NoError(t, err)
			require.Equal(t, rlverify.Streaming, streamed.Path)
			require.Equal(t, fds, openFiles(t), "the check closes every file it opened (its spill too)")
			requireInMemoryGives(t, o, streamed)
		})
	}
}

// TestCheckJudgesInMemoryWhenAKeySpreadsOverInstances: instances streams
// only while no key's requests go to two instances; on a run where one's
// did, Check judges the history in memory after the first pass, saying
// why, with the in-memory document. A run of keys pinned to instances
// streams.
func TestCheckJudgesInMemoryWhenAKeySpreadsOverInstances(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		inst func(i int, key string) int
		path rlverify.Path
		why  string
	}{
		{"round robin", func(i int, _ string) int { return i % 3 }, rlverify.InMemory, "needs the in-memory path: instances: key "},
		{"pinned", func(_ int, key string) int { return len(key) % 3 }, rlverify.Streaming, "every check judged streams"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := bench.Generate(4000, 40)
			for i := range h.Events {
				h.Events[i].Instance = c.inst(i, h.Events[i].Key)
			}
			h.Run.Instances = []string{"http://127.0.0.1:1/a", "http://127.0.0.1:2/a", "http://127.0.0.1:3/a"}
			file := filepath.Join(t.TempDir(), "h.jsonl")
			writeHistory(t, file, h)
			o := rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: []string{"oversell", "headers", "instances"}}}
			path, _ := rlverify.ChoosePath(o)
			require.Equal(t, rlverify.Streaming, path, "chosen before the first pass")
			got, err := rlverify.Check(context.Background(), o)
			require.NoError(t, err)
			require.Equal(t, c.path, got.Path)
			require.Contains(t, got.PathWhy, c.why)
			requireInMemoryGives(t, o, got)
		})
	}
}
