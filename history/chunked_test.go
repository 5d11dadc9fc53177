package history

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/headers"
)

// chunkedInputs are histories, good and bad, whose interesting lines sit in
// the middle of many plain event lines, so that with small chunks they land
// at chunk and window edges, in a middle chunk, or at the very end.
func chunkedInputs() map[string]string {
	run := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}`
	ev := func(i int) string {
		e := Event{T: TypeEvent, ID: uint64(i), Key: fmt.Sprintf("k%d", i%7), Phase: "p", Sent: int64(i), Recv: int64(i + 3), Status: 200 + 229*(i%2)}
		if i%2 == 1 {
			e.RetryAfter = "1"
		}
		return string(AppendEvent(nil, &e))
	}
	body := func(n int, at map[int]string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			if s, ok := at[i]; ok {
				b.WriteString(s)
				continue
			}
			b.WriteString(ev(i) + "\n")
		}
		return b.String()
	}
	end := `{"t":"end","elapsed":5,"requests":40}` + "\n"
	phase := `{"t":"phase","name":"p","kind":"rate","start":0,"end":5,"requests":40}` + "\n"
	in := map[string]string{
		"good":                run + "\n" + body(40, nil) + end,
		"good no final eol":   run + "\n" + body(40, nil) + strings.TrimSuffix(end, "\n"),
		"events no final eol": run + "\n" + strings.TrimSuffix(body(40, nil), "\n"),
		"crlf":                strings.ReplaceAll(run+"\n"+body(40, nil)+end, "\n", "\r\n"),
		"records in the middle": run + "\n" + body(40, map[int]string{3: phase, 17: `{"t":"fault","kind":"store-down","start":1,"end":2}` + "\n",
			25: `{"t":"sink","key":"k1","arrivals":3}` + "\n", 30: "\n", 31: "   \n"}) + end,
		"odd event lines": run + "\n" + body(40, map[int]string{5: `{ "t":"e","id":5,"key":"k","inst":0,"phase":"p","sent":1,"recv":2,"status":200}` + "\n",
			19: `{"t":"e","id":19,"key":"\u0041","inst":0,"phase":"p","sent":1,"recv":2,"status":200}` + "\n"}) + end,
		"blank lines first":          "\n\n" + run + "\n" + body(40, nil),
		"no header":                  body(40, nil),
		"blank then event":           "\n \n" + body(40, nil),
		"empty":                      "",
		"only blank lines":           "\n\n  \n",
		"garbage middle":             run + "\n" + body(40, map[int]string{21: "not json\n"}),
		"bad event middle":           run + "\n" + body(40, map[int]string{21: `{"t":"e","id":21,"key":"k","inst":0,"phase":"p","sent":5,"recv":2,"status":200}` + "\n"}),
		"bad then blank":             run + "\n" + body(40, map[int]string{40: "{\"t\":\"e\",\"id\":3\n\n"}),
		"second header":              run + "\n" + body(40, map[int]string{33: run + "\n"}),
		"unknown type":               run + "\n" + body(40, map[int]string{12: `{"t":"zzz"}` + "\n"}),
		"truncated last":             run + "\n" + body(40, nil) + ev(41)[:30],
		"truncated last eol":         run + "\n" + body(40, nil) + ev(41)[:30] + "\n",
		"cut after end":              run + "\n" + body(40, nil) + end + ev(41)[:30],
		"bad valid json last":        run + "\n" + body(40, nil) + `{"t":"e","id":1,"sent":5}`,
		"header only":                run + "\n",
		"cut header":                 run[:20],
		"long line":                  run + "\n" + body(10, map[int]string{5: `{"t":"sink","key":"` + strings.Repeat("x", MaxLine+5) + `","arrivals":1}` + "\n"}),
		"long line at end":           run + "\n" + body(10, nil) + strings.Repeat("y", MaxLine+1),
		"longish line":               run + "\n" + body(10, map[int]string{5: `{"t":"sink","key":"` + strings.Repeat("x", MaxLine-100) + `","arrivals":1}` + "\n"}),
		"glued events":               run + "\n" + body(40, map[int]string{22: strings.TrimSuffix(ev(22), "\n") + ev(99)}),
		"junk after event":           run + "\n" + body(40, map[int]string{9: ev(9)[:len(ev(9))-1] + " x\n"}),
		"duplicate id":               run + "\n" + body(40, map[int]string{31: ev(4)}) + end,
		"start out of range":         strings.Replace(run, "2026", "0001", 1) + "\n" + body(5, nil),
		"blank runs":                 run + "\n" + body(40, map[int]string{2: "\n\n\n", 3: " \n\t\n", 20: "\n", 21: "\n", 40: "\n\n"}) + end,
		"events then blank then bad": run + "\n" + body(40, map[int]string{38: "\n", 39: "0\n", 40: "\n"}),
		"blank lines then no header": "\n\n\n" + body(10, nil),
		"many records":               run + "\n" + body(40, manySinks(1, 40)) + end,
	}
	return in
}

// manySinks puts sink records on lines from … to of a body.
func manySinks(from, to int) map[int]string {
	at := map[int]string{}
	for i := from; i <= to; i += 2 {
		at[i] = fmt.Sprintf(`{"t":"sink","key":"k%d","arrivals":%d}`+"\n", i, i)
	}
	return at
}

// TestReadFileMatchesRead: ReadFile, with chunks of many sizes and windows
// of a few lines (so chunk and window edges fall on every line), reads
// exactly what Read reads, or fails with exactly its error.
func TestReadFileMatchesRead(t *testing.T) {
	defer func(n int) { maxWindowLines = n }(maxWindowLines)
	for _, n := range []int{1, 3, 1 << 16} {
		maxWindowLines = n
		t.Run(fmt.Sprintf("maxWindowLines=%d", n), testReadFileMatchesRead)
	}
}

func testReadFileMatchesRead(t *testing.T) {
	dir := t.TempDir()
	for name, in := range chunkedInputs() {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
		require.NoError(t, os.WriteFile(file, []byte(in), 0o644))
		want, wantErr := Read(file, strings.NewReader(in))
		sizes := []int{1, 2, 3, 5, 8, 13, 50, 97, 131, 200, 500, 1000, 4096, 1 << 20}
		if maxWindowLines < 1<<16 {
			// Short windows put their edges on every line already.
			sizes = []int{1, 7, 131, 4096}
		}
		if len(in) > MaxLine/2 {
			sizes = []int{1000, 1 << 19, 1 << 20}
			if maxWindowLines < 1<<16 {
				continue // long, and nothing new for short windows
			}
		}
		for _, procs := range []int{1, 2, 3, 8} {
			for _, cs := range sizes {
				f, err := os.Open(file)
				require.NoError(t, err)
				got, gotErr := readSeeker(file, f, int64(len(in)), cs, procs)
				f.Close()
				what := fmt.Sprintf("%s, chunks of %d bytes on %d goroutines", name, cs, procs)
				if wantErr != nil {
					require.Error(t, gotErr, what)
					require.Equal(t, wantErr.Error(), gotErr.Error(), what)
					require.Nil(t, got, what)
					continue
				}
				require.NoError(t, gotErr, what)
				require.True(t, reflect.DeepEqual(want, got), "%s:\nwant %+v\ngot  %+v", what, want, got)
			}
		}
		got, gotErr := ReadFile(file)
		if wantErr != nil {
			require.EqualError(t, gotErr, wantErr.Error(), name)
		} else {
			require.NoError(t, gotErr, name)
			require.True(t, reflect.DeepEqual(want, got), name)
		}
	}
}

// TestReadFileErrorLines names the line of an error in a middle chunk, and
// tolerates a cut last line, when the file spans many windows.
func TestReadFileErrorLines(t *testing.T) {
	in := chunkedInputs()
	dir := t.TempDir()
	defer func(n int) { chunkBytes = n }(chunkBytes)
	chunkBytes = 64
	for _, tc := range []struct{ name, want string }{
		{"garbage middle", ":22: not a valid rlverify history: invalid JSON"},
		{"bad event middle", ":22: not a valid rlverify history: event 21: recv 2 is before sent 5"},
		{"second header", ":34: not a valid rlverify history: a second run header"},
		{"unknown type", ":13: not a valid rlverify history: unknown record type"},
		{"no header", ":1: not a valid rlverify history: the first line must be the run header"},
		{"blank then event", ":3: not a valid rlverify history: the first line must be the run header"},
		{"bad then blank", ":41: not a valid rlverify history: invalid record: unexpected EOF"},
		{"bad valid json last", ":42: not a valid rlverify history: event 1: recv 0 is before sent 5"},
		{"cut after end", ":43: not a valid rlverify history: invalid record: unexpected EOF"},
		{"long line", ":6: bufio.Scanner: token too long"},
	} {
		file := filepath.Join(dir, "h.jsonl")
		require.NoError(t, os.WriteFile(file, []byte(in[tc.name]), 0o644))
		_, err := ReadFile(file)
		require.ErrorContains(t, err, file+tc.want, tc.name)
	}
	for _, name := range []string{"truncated last", "truncated last eol"} {
		file := filepath.Join(dir, "h.jsonl")
		require.NoError(t, os.WriteFile(file, []byte(in[name]), 0o644))
		h, err := ReadFile(file)
		require.NoError(t, err, name)
		require.True(t, h.Truncated, name)
		require.Len(t, h.Events, 40, name)
		require.Equal(t, uint64(40), h.Events[39].ID)
	}
}

// TestReadFileLarge reads a history of many windows with the default
// chunk size and compares it with Read.
func TestReadFileLarge(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteRun(Run{ID: "r", Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}))
	for i := 0; i < 200_000; i++ {
		e := Event{ID: uint64(i + 1), Key: fmt.Sprintf("free-k%d", i%1000), Phase: "rate", Sent: int64(i), Recv: int64(i + 10), Status: 200, Fields: headers.Fields{XLimit: "10", XRemaining: fmt.Sprint(i % 10)}}
		require.NoError(t, w.WriteEvent(&e))
		if i%50_000 == 7 {
			require.NoError(t, w.WritePhase(Phase{Name: "p", Kind: "rate", Requests: int64(i)}))
		}
	}
	require.NoError(t, w.WriteEnd(End{Requests: 200_000}))
	require.NoError(t, w.Flush())
	file := filepath.Join(t.TempDir(), "big.jsonl")
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
	defer func(n int) { chunkBytes = n }(chunkBytes)
	chunkBytes = 1 << 20
	got, err := ReadFile(file)
	require.NoError(t, err)
	want, err := Read(file, bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	require.True(t, reflect.DeepEqual(want, got))
	require.Len(t, got.Events, 200_000)
	require.Len(t, got.Phases, 4)
}

// BenchmarkReadFile reads a 100,000-event history file with ReadFile (the
// chunked reader), beside BenchmarkRead.
func BenchmarkReadFile(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n")
	buf.Write(benchLines(100_000))
	file := filepath.Join(b.TempDir(), "h.jsonl")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := ReadFile(file)
		if err != nil || len(h.Events) != 100_000 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestLineCut agrees with counting line ends one by one, on short, long
// and mixed lines.
func TestLineCut(t *testing.T) {
	naive := func(data []byte, n int) int {
		at := 0
		for i := 0; i < n; i++ {
			j := bytes.IndexByte(data[at:], '\n')
			if j < 0 {
				return 0
			}
			at += j + 1
		}
		if at == len(data) {
			return 0
		}
		return at
	}
	inputs := [][]byte{
		[]byte(""), []byte("\n"), []byte("a"), []byte(strings.Repeat("\n", 100)),
		[]byte(strings.Repeat("\n", 99) + "x"), []byte(strings.Repeat("abc\n", 50)),
		[]byte(strings.Repeat("\n\n\nlong line of text\n", 40) + "tail"),
	}
	for _, in := range inputs {
		for _, n := range []int{1, 2, 3, 16, 17, 18, 50, 99, 100, 101, 200} {
			require.Equal(t, naive(in, n), lineCut(in, n), "%q, n=%d", in, n)
		}
	}
}
