package history

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/headers"
)

// TestDecodeKnowsEveryField keeps the fast decoder's field table in step
// with Event's JSON tags: a field it does not know would send every line
// carrying it to encoding/json (correct, but slow).
func TestDecodeKnowsEveryField(t *testing.T) {
	var fields []reflect.StructField
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Event]()) {
		if !f.Anonymous { // the embedded headers.Fields' own are listed
			fields = append(fields, f)
		}
	}
	require.Len(t, eventFieldNames, len(fields))
	for _, f := range fields {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		_, ok := eventFieldNames[name]
		require.True(t, ok, "decode.go does not know Event field %q", name)
		require.Equal(t, eventFieldNames[name], lookupField([]byte(name)))
	}
}

// strictEvent is the reference: what encoding/json makes of a line.
func strictEvent(b []byte) (Event, error) {
	var e Event
	err := strict(b, &e)
	return e, err
}

func TestDecodeFastTakesWrittenLines(t *testing.T) {
	all := append(sample(), weightedSample()...)
	all = append(all, Event{ID: 1<<64 - 1, Key: "k", Variant: "v", Tier: "paid", Instance: -3, Phase: "p", Intended: -1 << 63, Sent: 1<<63 - 1, Recv: 1<<63 - 1,
		Status: 503, Err: "tab\there \\ / \"q\"", Fields: headers.Fields{RetryAfter: "Wed, 21 Oct 2026 07:28:00 GMT", RateLimitPolicy: `"free";q=10;w=2`, XLimit: "10", XRemaining: "0", XReset: "2", Fallback: "open", Scope: "global"}})
	for _, e := range all {
		e.T = TypeEvent
		line := AppendEvent(nil, &e)
		want, err := strictEvent(line)
		require.NoError(t, err)
		var got Event
		if strings.ContainsAny(e.Key, "<\u2028\x01") {
			// \u escapes: encoding/json's business.
			require.False(t, decodeEventFast(line, &got), "%s", line)
			continue
		}
		require.True(t, decodeEventFast(line, &got), "%s", line)
		require.Equal(t, want, got)
	}
}

func TestDecodeFastAgreesOnEdgeCases(t *testing.T) {
	for _, line := range []string{
		`{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":0,"sent":1,"recv":2,"status":200}`,
		` { "t" : "e" , "id" : 1 , "key":"k","sent":1,"recv":2 } `,
		`{"t":"e","id":1,"key":"a","key":"b"}`,
		`{"t":"e","key":"a","key":null}`,
		`{"t":"e","KEY":"a"}`,
		`{"t":"e","id":01}`,
		`{"t":"e","id":-1}`,
		`{"t":"e","id":1.0}`,
		`{"t":"e","id":1e3}`,
		`{"t":"e","sent":-0}`,
		`{"t":"e","sent":-}`,
		`{"t":"e","sent":9223372036854775807}`,
		`{"t":"e","sent":9223372036854775808}`,
		`{"t":"e","sent":-9223372036854775808}`,
		`{"t":"e","sent":-9223372036854775809}`,
		`{"t":"e","id":18446744073709551615}`,
		`{"t":"e","id":18446744073709551616}`,
		`{"t":"e","id":"1"}`,
		`{"t":"e","key":1}`,
		`{"t":"e","key":"\u00e9"}`,
		`{"t":"e","key":"é"}`,
		"{\"t\":\"e\",\"key\":\"\xff\"}",
		"{\"t\":\"e\",\"key\":\"a\tb\"}",
		`{"t":"e","key":"a\qb"}`,
		`{"t":"e","key":"a\/b\"\\\n"}`,
		`{"t":"e","bogus":1}`,
		`{"t":"e","cost":0}`,
		`{"t":"e","cost":1}`,
		`{"t":"e","cost":7}`,
		`{"t":"e","cost":-1}`,
		`{"t":"e","cost":2147483647}`,
		`{"t":"e","cost":2147483648}`,
		`{"t":"e","cost":1.5}`,
		`{"t":"e","cost":"2"}`,
		`{"t":"e","cost":null}`,
		`{"t":"e",}`,
		`{"t":"e"} trailing`,
		`{"t":"e"}}`,
		`{"t":"e"`,
		`{}`,
		`[]`,
		``,
	} {
		t.Run(line, func(t *testing.T) { compareDecoders(t, []byte(line)) })
	}
}

// compareDecoders checks decodeEvent (fast path with fallback) against
// encoding/json alone: the same Event, or both an error.
func compareDecoders(t *testing.T, line []byte) {
	t.Helper()
	want, werr := strictEvent(line)
	var fast Event
	if decodeEventFast(line, &fast) {
		if werr != nil {
			t.Fatalf("fast decoder accepted %q; encoding/json: %v", line, werr)
		}
		if !reflect.DeepEqual(want, fast) {
			t.Fatalf("fast decoder differs on %q:\n got %+v\nwant %+v", line, fast, want)
		}
	}
	var got Event
	gerr := decodeEvent(line, &got)
	if werr != nil {
		if gerr == nil {
			t.Fatalf("decodeEvent accepted %q; encoding/json: %v", line, werr)
		}
		return
	}
	if verr := checkEvent(&want); (gerr == nil) != (verr == nil) {
		// Declining the fast path is allowed; refusing a line encoding/json
		// reads is not, unless the event itself is refused.
		t.Fatalf("decodeEvent on %q: %v; encoding/json's event checked: %v", line, gerr, verr)
	}
	if gerr != nil {
		return
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("decodeEvent differs on %q:\n got %+v\nwant %+v", line, got, want)
	}
}

// FuzzDecodeEvent: the fast decoder gives what encoding/json gives, or
// declines the line.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range append(sample(), weightedSample()...) {
		e.T = TypeEvent
		f.Add(AppendEvent(nil, &e))
	}
	f.Add([]byte(`{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":0,"sent":1,"recv":2,"status":200}`))
	f.Add([]byte(` { "t" : "e" , "id" : 01 , "key":"k\"\\","sent":-0,"recv":2e1 } `))
	f.Add([]byte(`{"t":"e","key":"a","key":null,"Key":"b"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		compareDecoders(t, line)
	})
}

func benchLines(n int) []byte {
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		e := Event{T: TypeEvent, ID: uint64(i + 1), Key: fmt.Sprintf("free-k%d", i%10000), Tier: "free", Phase: "rate", Intended: int64(i) * 1000,
			Sent: int64(i)*1000 + 37, Recv: int64(i)*1000 + 1234567, Status: 200, Fields: headers.Fields{XLimit: "10", XRemaining: fmt.Sprint(i % 10), XReset: "1", RateLimit: fmt.Sprintf(`"free";r=%d;t=1`, i%10), RateLimitPolicy: `"free";q=10;w=2`}}
		if i%3 == 0 {
			e.Status, e.RetryAfter, e.XRemaining, e.RateLimit = 429, "1", "0", `"free";r=0;t=1`
		}
		buf.Write(AppendEvent(nil, &e))
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkDecodeEvent compares the fast decoder with encoding/json on
// event lines with full rate-limit headers.
func BenchmarkDecodeEvent(b *testing.B) {
	lines := bytes.Split(bytes.TrimSpace(benchLines(10_000)), []byte{'\n'})
	var size int
	for _, l := range lines {
		size += len(l)
	}
	for _, bc := range []struct {
		name string
		dec  func([]byte, *Event) error
	}{
		{"fast", decodeEvent},
		{"encoding-json", func(b []byte, e *Event) error { return strict(b, e) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(size / len(lines)))
			b.ReportAllocs()
			var e Event
			for i := 0; i < b.N; i++ {
				e = Event{}
				if err := bc.dec(lines[i%len(lines)], &e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkRead reads a 100,000-event history (scanner, dispatch, decode).
func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n")
	buf.Write(benchLines(100_000))
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h, err := Read("bench", bytes.NewReader(data))
		if err != nil || len(h.Events) != 100_000 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func TestDecodeBenchLinesAgree(t *testing.T) {
	for _, l := range bytes.Split(bytes.TrimSpace(benchLines(100)), []byte{'\n'}) {
		var got Event
		require.True(t, decodeEventFast(l, &got))
		want, err := strictEvent(l)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestDecodeReadsEachLineAsItIs: the decoder reads a line against the
// previous one's field names and values (internCache.next, last, lastAt);
// lines that differ from the one before in order, spelling, escapes,
// whitespace and values of every length around its 16-byte patterns are
// still read as encoding/json reads them, whatever came before.
func TestDecodeReadsEachLineAsItIs(t *testing.T) {
	var lines []string
	for _, v := range []string{"", "a", "1234567", "12345678", "123456789012345", "1234567890123456", "12345678901234567", "free-k187"} {
		q := `"` + v + `"`
		lines = append(lines,
			`{"t":"e","id":1,"key":`+q+`,"inst":0,"phase":"rate","intended":5,"sent":5,"recv":9,"status":200,"x_limit":`+q+`}`,
			`{"t":"e","id":2,"key":`+q+`,"inst":0,"phase":"rate","intended":5,"sent":5,"recv":9,"status":429,"retry_after":`+q+`,"x_limit":"10"}`,
			`{"t":"e","key":`+q+`,"id":3,"sent":5,"recv":9,"status":200}`,
			`{ "t" : "e" , "id" : 4 , "key" : `+q+` , "sent" : 5 , "recv" : 9 }`,
			`{"t":"e","id":5,"key":"\/`+v+`","x_limit":"\"`+v+`\""}`,
			`{"t":"e","id":6,"key":`+q+`,"ratelimit_policy":`+q+`,"ratelimit":`+q+`}`,
			`{"t":"e","id":7,"key":`+q+`,"sent":1234567890123456789,"recv":12345678901234567,"intended":-123456789012345}`,
			`{"t":"e","id":8,"key":`+q+`,"Key":"other"}`,
			`{"t":"e","id":9,"key":`+q+`,"key":null}`,
			`{"t":"e","id":10,"key":`+q+`}  `,
			`{"t":"e","id":11,"key":`+q+`,"sent":007}`,
			`{"t":"e","id":12,"key":`+q+`,"sent":1.5}`,
			`{"t":"e","id":13,"key":`+q+`,"x_limit":"`+v+`\u0041"}`,
			`{"t":"e","id":14,"key":`+q[:len(q)-1],
		)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	c := new(internCache)
	for range 20 {
		rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
		for _, line := range lines {
			want, werr := strictEvent([]byte(line))
			var got, alone Event
			took := c.decode([]byte(line), &got)
			require.Equal(t, new(internCache).decode([]byte(line), &alone), took, "a decoder with no past takes %s, or declines it, alike", line)
			if !took {
				continue // declined: encoding/json reads it
			}
			require.NoError(t, werr, "the decoder took %s", line)
			require.Equal(t, want, got, "%s", line)
		}
	}
}

// TestPatternFindsItsBytes: a pattern is found exactly where a slice starts
// with its bytes, for patterns of every length it takes and slices shorter
// and longer than its 16 bytes.
func TestPatternFindsItsBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20_000 {
		p := make([]byte, 1+rng.IntN(16))
		b := make([]byte, rng.IntN(24))
		for i := range p {
			p[i] = "ab\"\x00\xff"[rng.IntN(5)]
		}
		for i := range b {
			b[i] = "ab\"\x00\xff"[rng.IntN(5)]
		}
		if rng.IntN(2) == 0 && len(b) >= len(p) {
			copy(b, p)
		}
		pat := newPattern(p)
		require.Equal(t, len(p), pat.n)
		require.Equal(t, bytes.HasPrefix(b, p), pat.at(b), "pattern %q in %q", p, b)
	}
	require.Zero(t, newPattern(make([]byte, 17)).n, "longer than 16 bytes: no pattern")
	require.False(t, new(pattern).at([]byte("anything")), "no pattern is found nowhere")
}
