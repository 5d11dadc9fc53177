package history

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzReadHistory feeds arbitrary bytes to Read. It must never panic; when
// it accepts the input, writing what it read with Writer and reading that
// again gives the same history (its strings capped as the Writer caps
// them).
func FuzzReadHistory(f *testing.F) {
	var good bytes.Buffer
	w := NewWriter(&good)
	_ = w.WriteRun(Run{ID: "r", Start: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Declared: json.RawMessage(`{"name": "p"}`), Notes: []string{"n"}})
	for _, e := range sample() {
		_ = w.WriteEvent(&e)
	}
	_ = w.WritePhase(Phase{Name: "b", Kind: "burst", Requests: 3})
	_ = w.WriteFault(Fault{Kind: "store-down", Start: 1, End: 2})
	_ = w.WriteSink(Sink{Key: "k", Arrivals: 1})
	_ = w.WriteEnd(End{Elapsed: 40, Requests: 3, Interrupted: true, Reason: "signal"})
	_ = w.Flush()
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:good.Len()-7])
	f.Add([]byte(`{"t":"run","version":2}`))
	f.Add([]byte("\n{\"t\":\"e\",\"id\":1,\"key\":\"k\",\"inst\":0,\"phase\":\"p\",\"intended\":0,\"sent\":1,\"recv\":2,\"status\":200}\n"))
	f.Add([]byte(`{"t":"run","version":1}` + "\n{\"t\":\"e\",\"id\":1,\"sent\":5,\"recv\":2}\n"))
	f.Add([]byte{0xff, '\n', '{'})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Read("fuzz.jsonl", bytes.NewReader(data))
		if err != nil {
			if h != nil {
				t.Fatalf("error %v with a non-nil history", err)
			}
			return
		}
		if h.Run.T != TypeRun || h.Run.Version != Version {
			t.Fatalf("accepted a history without a valid run header: %+v", h.Run)
		}
		out := write(t, h)
		h2, err := Read("again.jsonl", bytes.NewReader(out))
		if err != nil {
			t.Fatalf("history written back does not read: %v\n%s", err, out)
		}
		if h2.Truncated {
			t.Fatalf("history written back reads as truncated")
		}
		if !sameHistory(capped(h), h2) {
			t.Fatalf("round trip changed the history:\n%+v\n%+v", h, h2)
		}
	})
}

// FuzzReadFile feeds arbitrary file contents to the chunked reader behind
// ReadFile, with arbitrary chunk sizes, goroutines and window lengths, and
// a known or unknown size. It must never panic and must read exactly what
// Read reads, or fail with exactly its error.
func FuzzReadFile(f *testing.F) {
	for _, in := range chunkedInputs() {
		if len(in) < 1<<16 {
			f.Add([]byte(in), uint16(7), uint8(1), uint8(3))
			f.Add([]byte(in), uint16(100), uint8(2), uint8(0x80|40))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, procs, window uint8) {
		defer func(n int) { maxWindowLines = n }(maxWindowLines)
		maxWindowLines = int(window&0x3f) + 1
		size := int64(len(data))
		if window&0x80 != 0 {
			size = 0 // not a regular file
		}
		want, wantErr := Read("f.jsonl", bytes.NewReader(data))
		got, gotErr := readSeeker("f.jsonl", bytes.NewReader(data), size, int(chunk)%4096+1, int(procs)%4+1)
		switch {
		case wantErr != nil:
			if gotErr == nil || gotErr.Error() != wantErr.Error() || got != nil {
				t.Fatalf("Read: %v\nchunked: %v (history %v)", wantErr, gotErr, got != nil)
			}
		case gotErr != nil:
			t.Fatalf("Read accepts, chunked: %v", gotErr)
		case !reflect.DeepEqual(want, got):
			t.Fatalf("chunked read differs:\n%+v\n%+v", want, got)
		}
	})
}

// capped is h with its strings capped as the Writer caps them.
func capped(h *History) *History {
	c := *h
	capRecord(&c.Run)
	c.Events = nil
	for _, e := range h.Events {
		c.Events = append(c.Events, capEvent(e))
	}
	c.Phases, c.Faults, c.Sink = nil, nil, nil
	for _, p := range h.Phases {
		capRecord(&p)
		c.Phases = append(c.Phases, p)
	}
	for _, f := range h.Faults {
		capRecord(&f)
		c.Faults = append(c.Faults, f)
	}
	for _, s := range h.Sink {
		capRecord(&s)
		c.Sink = append(c.Sink, s)
	}
	if h.End != nil {
		e := *h.End
		capRecord(&e)
		c.End = &e
	}
	return &c
}

// capEvent caps every string of e but T, by reflection, so a new field
// is capped here without being listed.
func capEvent(e Event) Event {
	v := reflect.ValueOf(&e).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.String && v.Type().Field(i).Name != "T" {
			f.SetString(CapValue(f.String()))
		}
	}
	return e
}

func write(t *testing.T, h *History) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	check := func(err error) {
		if err != nil {
			t.Fatalf("write back: %v", err)
		}
	}
	check(w.WriteRun(h.Run))
	for i := range h.Events {
		check(w.WriteEvent(&h.Events[i]))
	}
	for _, p := range h.Phases {
		check(w.WritePhase(p))
	}
	for _, f := range h.Faults {
		check(w.WriteFault(f))
	}
	for _, s := range h.Sink {
		check(w.WriteSink(s))
	}
	if h.End != nil {
		check(w.WriteEnd(*h.End))
	}
	check(w.Flush())
	return buf.Bytes()
}

// sameHistory compares what a history says: times as instants, the
// declared policy as compacted JSON, the Truncated flag not at all.
func sameHistory(a, b *History) bool {
	ra, rb := a.Run, b.Run
	if !ra.Start.Equal(rb.Start) {
		return false
	}
	ra.Start, rb.Start = time.Time{}, time.Time{}
	ra.Declared, rb.Declared = compact(ra.Declared), compact(rb.Declared)
	// Empty lists are omitted when written: nil and empty say the same.
	for _, r := range []*Run{&ra, &rb} {
		if len(r.Notes) == 0 {
			r.Notes = nil
		}
		if len(r.Instances) == 0 {
			r.Instances = nil
		}
	}
	if !reflect.DeepEqual(ra, rb) {
		return false
	}
	// The end record's digest is the writer's, over what it wrote: a
	// history read as modified (or with no digest) is written back with
	// the digest of its records, so it reads back intact; the reorder is
	// the writer's measure of what it wrote.
	ea, eb := a.End, b.End
	if ea != nil && eb != nil {
		x, y := *ea, *eb
		x.Digest, y.Digest = "", ""
		x.Reorder, y.Reorder = nil, nil
		ea, eb = &x, &y
	}
	return same(a.Events, b.Events) && same(a.Faults, b.Faults) && same(a.Sink, b.Sink) &&
		same(a.Phases, b.Phases) && reflect.DeepEqual(ea, eb)
}

// same is reflect.DeepEqual except that nil and empty slices are equal.
func same[T any](a, b []T) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func compact(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		return m
	}
	return buf.Bytes()
}
