package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapValue(t *testing.T) {
	long := strings.Repeat("a", 2<<20)
	for _, tc := range []struct {
		name, in string
		cut      bool
	}{
		{"empty", "", false},
		{"short", "10", false},
		{"exactly MaxValue", strings.Repeat("x", MaxValue), false},
		{"one byte over", strings.Repeat("x", MaxValue+1), true},
		{"2 MiB", long, true},
		{"multi-byte characters across the cut", strings.Repeat("é€", MaxValue), true},
		{"invalid UTF-8", strings.Repeat("\xff", MaxValue*2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CapValue(tc.in)
			require.LessOrEqual(t, len(got), MaxValue)
			if !tc.cut {
				require.Equal(t, tc.in, got)
				return
			}
			// What a JSON round trip makes of the value (U+FFFD for each
			// invalid byte) is what is cut.
			b, err := json.Marshal(tc.in)
			require.NoError(t, err)
			var read string
			require.NoError(t, json.Unmarshal(b, &read))
			head, marker, ok := strings.Cut(got, "…[truncated ")
			require.True(t, ok, "marker in %q", got[len(got)-40:])
			require.True(t, strings.HasPrefix(read, head))
			require.Equal(t, fmt.Sprintf("%d bytes]", len(read)-len(head)), marker)
			if utf8.ValidString(tc.in) {
				require.True(t, utf8.ValidString(got), "cut inside a character")
			}
			require.Greater(t, len(head), MaxValue-truncatedRoom-utf8.UTFMax)
			require.Equal(t, got, CapValue(got), "a capped value stays as it is")
		})
	}
}

// worstEvent has every string field far over MaxValue, made of the bytes
// JSON escapes the longest (\u00XX), and every number at its widest.
func worstEvent(fill string) Event {
	e := Event{ID: 1<<64 - 1, Instance: -1 << 63, Intended: -1 << 63, Sent: -1 << 63, Recv: -1 << 63, Status: -1 << 63}
	v := reflect.ValueOf(&e).Elem()
	for _, sf := range reflect.VisibleFields(v.Type()) { // with headers.Fields' own
		if f := v.FieldByIndex(sf.Index); f.Kind() == reflect.String && sf.Name != "T" {
			f.SetString(strings.Repeat(fill, 16*MaxValue/len(fill)))
		}
	}
	return e
}

// TestMaxEventLineIsTight: eventStrings counts Event's string fields, and
// an event at its widest fits MaxEventLine with less than the skeleton's
// room to spare.
func TestMaxEventLineIsTight(t *testing.T) {
	n := 0
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Event]()) { // with headers.Fields' own
		if f.Type.Kind() == reflect.String && f.Name != "T" {
			n++
		}
	}
	require.Equal(t, eventStrings, n, "update eventStrings in limits.go")
	e := worstEvent("\x01")
	line := AppendEvent(nil, &e)
	require.LessOrEqual(t, len(line), MaxEventLine)
	// Each cut value gives up at most truncatedRoom bytes to its marker.
	require.Greater(t, len(line), MaxEventLine-eventSkeleton-eventStrings*6*truncatedRoom)
	require.LessOrEqual(t, MaxEventLine, MaxLine)
	empty := AppendEvent(nil, &Event{ID: 1<<64 - 1, Instance: -1 << 63, Intended: -1 << 63, Sent: -1 << 63, Recv: -1 << 63, Status: -1 << 63})
	require.Less(t, len(empty)+eventStrings*len(`,"retry_after":`), eventSkeleton, "the skeleton covers names and numbers")
}

// fillStrings sets every string of the record *rec (but its type T) to
// long, its lists of strings and of records to two such entries; it
// returns how many strings it set.
func fillStrings(rec any, long string) int {
	var fill func(v reflect.Value) int
	fill = func(v reflect.Value) int {
		switch v.Kind() {
		case reflect.String:
			v.SetString(long)
			return 1
		case reflect.Struct:
			n := 0
			for i := range v.NumField() {
				if f := v.Type().Field(i).Name; f != "T" && f != "Digest" { // set by the writer
					n += fill(v.Field(i))
				}
			}
			return n
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return 0
			}
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			return fill(v.Index(0)) + fill(v.Index(1))
		}
		return 0
	}
	return fill(reflect.ValueOf(rec).Elem())
}

// stringsOf returns every string of the record *rec but its type T.
func stringsOf(rec any) []string {
	var out []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			out = append(out, v.String())
		case reflect.Struct:
			for i := range v.NumField() {
				if f := v.Type().Field(i).Name; f != "T" && f != "Digest" { // set by the writer
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Uint8 {
				for i := range v.Len() {
					walk(v.Index(i))
				}
			}
		}
	}
	walk(reflect.ValueOf(rec).Elem())
	return out
}

// TestWriterOutputAlwaysReads: a target answering huge header values and
// errors, a plan with huge names and keys, hooks with huge output: every
// record the Writer emits reads back (with Read and ReadFile), every
// string of every record cut to MaxValue and marked. The records are
// filled by reflection, so a string field added later is covered.
func TestWriterOutputAlwaysReads(t *testing.T) {
	for _, fill := range []string{"x", "\x01", "\xff", "é"} {
		t.Run(fmt.Sprintf("%q", fill), func(t *testing.T) {
			long := strings.Repeat(fill, 16*MaxValue/len(fill))
			run := Run{Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			ph, f, sk, end := Phase{}, Fault{}, Sink{}, End{}
			filled := fillStrings(&run, long) + fillStrings(&ph, long) + fillStrings(&f, long) + fillStrings(&sk, long) + fillStrings(&end, long)
			run.Declared = json.RawMessage(`{"name":"p"}`)
			e := worstEvent(fill)
			e.Status, e.Sent, e.Recv, e.Intended, e.Instance = 200, 1, 2, 0, 0
			var buf bytes.Buffer
			w := NewWriter(&buf)
			require.NoError(t, w.WriteRun(run))
			require.NoError(t, w.WriteEvent(&e))
			require.NoError(t, w.WritePhase(ph))
			require.NoError(t, w.WriteFault(f))
			require.NoError(t, w.WriteSink(sk))
			require.NoError(t, w.WriteSample(Sample{}))
			require.NoError(t, w.WriteEnd(end))
			require.NoError(t, w.Flush())
			require.Equal(t, long, run.Notes[0], "the caller's lists are left as they were")
			for i, line := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
				require.LessOrEqual(t, len(line), MaxLine, "line %d", i+1)
			}
			file := filepath.Join(t.TempDir(), "h.jsonl")
			require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
			h, err := Read(file, bytes.NewReader(buf.Bytes()))
			require.NoError(t, err)
			h2, err := ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, h.Integrity, h2.Integrity)
			require.True(t, reflect.DeepEqual(h, h2))
			require.Len(t, h.Events, 1)
			values := append(stringsOf(&h.Run), stringsOf(&h.Events[0])...)
			for _, rec := range []any{&h.Phases[0], &h.Faults[0], &h.Sink[0], h.End} {
				values = append(values, stringsOf(rec)...)
			}
			require.Len(t, values, filled+eventStrings)
			for i, v := range values {
				require.True(t, len(v) <= MaxValue && strings.Contains(v, "…[truncated "), "value %d: %d bytes, not cut and marked", i, len(v))
			}
		})
	}
}

func TestWriteRunRefusesALineTooLong(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	huge := json.RawMessage(`{"name":"` + strings.Repeat("p", MaxRunLine) + `"}`)
	err := w.WriteRun(Run{ID: "r", Declared: huge})
	require.ErrorContains(t, err, "the run header (declared policy, instances and notes) record would be a line of")
	require.ErrorContains(t, err, fmt.Sprintf("more than the %d a history line may be", MaxRunLine))
	require.NoError(t, w.Flush())
	require.Zero(t, buf.Len(), "nothing written")
}

// TestReadRefusesCorruptRecords: a record glued onto another, junk after a
// record, duplicate event ids, starts and offsets that would overflow.
func TestReadRefusesCorruptRecords(t *testing.T) {
	run := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n"
	ev := func(id int) string {
		return fmt.Sprintf(`{"t":"e","id":%d,"key":"k","inst":0,"phase":"p","intended":0,"sent":1,"recv":2,"status":200}`, id)
	}
	end := `{"t":"end","elapsed":5,"requests":2}` + "\n"
	for _, tc := range []struct{ name, in, want string }{
		{"two events glued", run + ev(1) + ev(2) + "\n" + end, `mem:2: not a valid rlverify history: invalid record: data after the record at column 92 ("{\"t\":\"e\",\"id\":2,\"key\":\"k…"): one record per line`},
		{"junk after an event", run + ev(1) + " xyz\n" + end, `mem:2: not a valid rlverify history: invalid record: data after the record at column 93 ("xyz")`},
		{"a closing brace too many", run + ev(1) + "}\n" + end, `mem:2: not a valid rlverify history: invalid record: data after the record at column 92 ("}")`},
		{"an event glued onto a phase", run + `{"t":"phase","name":"p","kind":"burst","start":0,"end":1,"requests":1}` + ev(1) + "\n" + end, "mem:2: not a valid rlverify history: invalid JSON: invalid character '{' after top-level value"},
		{"junk after the header", strings.TrimSuffix(run, "\n") + "junk\n" + ev(1) + "\n", "mem:1: not a valid rlverify history: invalid JSON"},
		{"duplicate id", run + ev(1) + "\n" + ev(2) + "\n" + ev(1) + "\n" + end, "mem: not a valid rlverify history: event id 1 appears more than once: every request needs its own id"},
		{"many duplicate ids", run + strings.Repeat(ev(3)+"\n"+ev(9)+"\n", 2) + end, "mem: not a valid rlverify history: event ids 3, 9 appear more than once"},
		{"start near year 1", strings.Replace(run, "2026-01-01T00:00:00Z", "0001-01-01T00:00:01Z", 1) + ev(1) + "\n", "mem:1: not a valid rlverify history: run start 0001-01-01T00:00:01Z is out of range: want an instant from 1970-01-01 to 2200-01-01"},
		{"start in year 9999", strings.Replace(run, "2026-01-01T00:00:00Z", "9999-12-31T23:59:59Z", 1) + ev(1) + "\n", "mem:1: not a valid rlverify history: run start 9999-12-31T23:59:59Z is out of range"},
		{"offset of 200 years", run + `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","sent":1,"recv":6311520000000000000,"status":200}` + "\n" + end, "mem:2: not a valid rlverify history: event 1: recv 6311520000000000000 ns is out of range"},
		{"negative intended offset far out", run + `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":-9000000000000000000,"sent":1,"recv":2,"status":200}` + "\n" + end, "event 1: intended -9000000000000000000 ns is out of range"},
		{"fault end far out", run + `{"t":"fault","kind":"store-down","start":0,"end":9223372036854775807}` + "\n" + end, "mem:2: not a valid rlverify history: fault: end 9223372036854775807 ns is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read("mem", strings.NewReader(tc.in))
			require.Error(t, err)
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, err, ErrFormat)
			file := filepath.Join(t.TempDir(), "mem")
			require.NoError(t, os.WriteFile(file, []byte(tc.in), 0o644))
			_, ferr := ReadFile(file)
			require.Error(t, ferr)
			require.Equal(t, strings.ReplaceAll(err.Error(), "mem", file), ferr.Error(), "ReadFile says the same")
		})
	}
	t.Run("no start and edges of the range are fine", func(t *testing.T) {
		for _, start := range []string{"", `,"start":"1970-01-01T00:00:00Z"`, `,"start":"2199-12-31T23:59:59Z"`} {
			h, err := Read("mem", strings.NewReader(`{"t":"run","version":1,"id":"x"`+start+"}\n"+ev(1)+"\n"+end))
			require.NoError(t, err, start)
			require.Len(t, h.Events, 1)
		}
	})
}

func TestMergeRefusesShardsOfOtherRuns(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shard := func(source, shard string, start time.Time, id uint64) *History {
		return &History{Source: source, Run: Run{ID: "r", Plan: "p", Policy: "builtin:default", Declared: json.RawMessage(`{"name": "d"}`), Seed: 1, Start: start, Shard: shard},
			Events: []Event{{ID: id, Sent: 1, Recv: 2}}, End: &End{Requests: 1}}
	}
	a := shard("a.jsonl", "1/2", t0, 1)
	for _, tc := range []struct {
		name string
		b    func(*History)
		want string
	}{
		{"other run id", func(h *History) { h.Run.ID = "other" }, `history: b.jsonl and a.jsonl are not shards of one run: run id "other" ≠ "r"`},
		{"other plan and policy", func(h *History) { h.Run.Plan, h.Run.Policy = "q", "x.yaml" },
			`history: b.jsonl and a.jsonl are not shards of one run: plan "q" ≠ "p", policy "x.yaml" ≠ "builtin:default"`},
		{"other declared policy", func(h *History) { h.Run.Declared = json.RawMessage(`{"name":"e"}`) }, "the declared policies differ"},
		{"other seed", func(h *History) { h.Run.Seed = 2 }, "seed 2 ≠ 1"},
		{"other split", func(h *History) { h.Run.Shard = "2/3" }, `shard "2/3" ≠ "1/2"`},
		{"not a shard", func(h *History) { h.Run.Shard = "" }, `shard "" ≠ "1/2"`},
		{"same shard twice", func(h *History) { h.Run.Shard = "1/2" }, "history: a.jsonl and b.jsonl are both shard 1/2 of the run: give each shard once"},
		{"a day apart", func(h *History) { h.Run.Start = t0.Add(24 * time.Hour) },
			"history: a.jsonl starts at 2026-01-01T00:00:00Z and b.jsonl at 2026-01-02T00:00:00Z, 24h0m0s apart: the shards of one run start within 1h0m0s of each other"},
		{"no start beside a start", func(h *History) { h.Run.Start = time.Time{} }, "history: b.jsonl starts at 0001-01-01T00:00:00Z and a.jsonl at 2026-01-01T00:00:00Z"},
		{"start near year 1", func(h *History) { h.Run.Start = time.Time{}.Add(time.Second) }, "history: b.jsonl: run start 0001-01-01T00:00:01Z is out of range"},
		{"an event id in both", func(h *History) { h.Events[0].ID = 1 }, "history: event id 1 appears in a.jsonl and b.jsonl: were they produced by one split into shards (Shard, Shards) of the same plan?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := shard("b.jsonl", "2/2", t0.Add(time.Minute), 2)
			tc.b(b)
			_, err := Merge(a, b)
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("shards of one run merge", func(t *testing.T) {
		b := shard("b.jsonl", "2/2", t0.Add(59*time.Minute), 2)
		b.Run.Declared = json.RawMessage(`{"name":"d"}`) // the same policy, other spacing
		m, err := Merge(a, b)
		require.NoError(t, err)
		require.Len(t, m.Events, 2)
		assert.Equal(t, int64(59*time.Minute)+1, m.Events[1].Sent)
	})
}

func TestDuplicateIDs(t *testing.T) {
	evs := func(ids ...uint64) []Event {
		out := make([]Event, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ids  []uint64
		want []uint64
	}{
		{"none", nil, nil},
		{"one", []uint64{5}, nil},
		{"dense, unique", []uint64{3, 1, 2, 4}, nil},
		{"dense, one twice", []uint64{3, 1, 2, 3}, []uint64{3}},
		{"dense, thrice", []uint64{7, 7, 7, 8}, []uint64{7}},
		{"sparse, unique", []uint64{1, 1 << 40, 1<<64 - 1}, nil},
		{"sparse, twice", []uint64{1<<64 - 1, 0, 1<<64 - 1, 0, 5}, []uint64{0, 1<<64 - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, duplicateIDs(evs(tc.ids...)))
		})
	}
}

// TestReadFileMemoryFollowsRealEvents: blank lines, junk and lines that
// look like events but are not cost no memory per line (the reader used to
// size its event slice from the first lines' density: 29 GB for a header
// and 100 MB of blank lines).
func TestReadFileMemoryFollowsRealEvents(t *testing.T) {
	run := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n"
	const size = 12 << 20 // more than one read of 2 × 4 MiB
	for _, tc := range []struct {
		name, line, want string
	}{
		{"blank lines", "\n", ""},
		{"spaces", "  \n", ""},
		{"zeros", "0\n", `h.jsonl:2: not a valid rlverify history: not a record: a line holds one JSON object such as {"t":"e",…}, not "0"`},
		{"event prefixes", `{"t":"e",` + "\n", "h.jsonl:2: not a valid rlverify history: invalid record: unexpected EOF"},
		{"empty objects", "{}\n", "h.jsonl:2: not a valid rlverify history: unknown record type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "h.jsonl")
			body := run + strings.Repeat(tc.line, size/len(tc.line))
			require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			h, err := ReadFile(file)
			runtime.ReadMemStats(&after)
			if tc.want == "" {
				require.NoError(t, err)
				require.Empty(t, h.Events)
			} else {
				require.ErrorContains(t, err, tc.want)
			}
			// The read buffer, and one window's slots and records; lines
			// the decoders reject leave garbage.
			bound := runtime.GOMAXPROCS(0)*chunkBytes + maxWindowLines*int(unsafe.Sizeof(Event{})+64) + 8<<20
			if alloc := after.TotalAlloc - before.TotalAlloc; tc.want == "" {
				require.Less(t, alloc, uint64(bound), "allocated %d MiB", alloc>>20)
			}
			grown := int64(after.Sys) - int64(before.Sys)
			require.Less(t, grown, int64(bound), "took %d MiB more from the system", grown>>20)
		})
	}
}
