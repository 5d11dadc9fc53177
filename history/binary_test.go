package history

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// roundTrip encodes evs (at file positions seqs) with one encoder and
// decodes them with one decoder, record by record.
func roundTrip(t testing.TB, evs []Event, seqs []uint64) []Event {
	var w EventEncoder
	var recs [][]byte
	for i := range evs {
		recs = append(recs, w.AppendEvent(nil, &evs[i], seqs[i]))
	}
	d := NewEventDecoder()
	out := make([]Event, len(evs))
	for i, rec := range recs {
		seq, err := d.DecodeEvent(rec, &out[i])
		require.NoError(t, err, "record %d", i)
		require.Equal(t, seqs[i], seq, "record %d's file position", i)
	}
	return out
}

// TestEventBinaryRoundTripsEveryField sets every field of Event (found
// by reflection, so a field added later is covered) to a value of its
// own, one field at a time and all together, and reads back the same
// events: a field the binary form does not carry fails here.
func TestEventBinaryRoundTripsEveryField(t *testing.T) {
	typ := reflect.TypeFor[Event]()
	var strs int
	var evs []Event
	all := Event{}
	for _, f := range reflect.VisibleFields(typ) {
		if f.Anonymous {
			continue
		}
		var e Event
		for _, ev := range []*Event{&e, &all} {
			v := reflect.ValueOf(ev).Elem().FieldByIndex(f.Index)
			switch v.Kind() {
			case reflect.String:
				v.SetString("v-" + f.Name)
			case reflect.Int, reflect.Int64, reflect.Int32:
				v.SetInt(int64(len(f.Name))*1_000_003 - 7)
			case reflect.Uint64:
				v.SetUint(uint64(len(f.Name)) * 1_000_003)
			default:
				t.Fatalf("Event.%s is a %s: teach binary.go to carry it", f.Name, v.Kind())
			}
		}
		if f.Type.Kind() == reflect.String {
			strs++
		}
		evs = append(evs, e, Event{}) // and back to the zero value
	}
	require.Equal(t, binaryStrings, strs, "binaryStringsOf must list every string field of Event")
	evs = append(evs, all, all, Event{}, all)
	seqs := make([]uint64, len(evs))
	for i := range seqs {
		seqs[i] = uint64(len(evs) - i) // out of file order, as a reordered stream
	}
	require.Equal(t, evs, roundTrip(t, evs, seqs))
}

// TestEventBinaryExtremes: values of any sign and size, and differences
// that overflow, come back exactly; strings that repeat, change and go
// back to empty too.
func TestEventBinaryExtremes(t *testing.T) {
	evs := []Event{
		{T: "e", ID: math.MaxUint64, Key: "free-a", Sent: math.MaxInt64, Recv: math.MinInt64, Intended: math.MinInt64, Status: -1, Instance: math.MinInt32, Cost: CostPeek},
		{T: "e", ID: 0, Key: "free-a", Sent: math.MinInt64, Recv: math.MaxInt64, Intended: math.MaxInt64, Status: 429, Cost: MaxEventCost},
		{T: "e", ID: 5, Key: "", Sent: 0, Recv: 0, Body: string(bytes.Repeat([]byte("é"), 300))},
		{T: "e", ID: 4, Key: "free-a", Err: "dial tcp: refused"},
	}
	evs[1].RetryAfter = "1"
	seqs := []uint64{math.MaxUint64, 0, 7, 6}
	require.Equal(t, evs, roundTrip(t, evs, seqs))
}

// TestEventBinaryRejectsBadRecords: a record cut short or with bytes left
// over is an error that says so, not an event.
func TestEventBinaryRejectsBadRecords(t *testing.T) {
	var w EventEncoder
	rec := w.AppendEvent(nil, &Event{T: "e", ID: 3, Key: "free-a", Sent: 1e9, Recv: 1e9 + 5e6, Status: 200}, 2)
	for _, tc := range []struct {
		name string
		rec  []byte
		want string
	}{
		{"empty", nil, "mask"},
		{"mask of no field", binary.AppendUvarint(nil, 1<<binaryStrings), "mask"},
		{"cut in a string", rec[:4], "string"},
		{"cut in a number", rec[:len(rec)-1], "number"},
		{"left over", append(append([]byte{}, rec...), 0), "left over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Event
			_, err := NewEventDecoder().DecodeEvent(tc.rec, &e)
			require.ErrorIs(t, err, errBinaryRecord)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzEventBinary: any event survives the binary form, also after another.
func FuzzEventBinary(f *testing.F) {
	f.Add("e", uint64(1), "free-a", "x", int64(5), int64(9), 200, "1", uint64(3))
	f.Add("", uint64(math.MaxUint64), "", "\x00\xff", int64(math.MinInt64), int64(math.MaxInt64), -3, "", uint64(0))
	f.Fuzz(func(t *testing.T, typ string, id uint64, key, hdr string, sent, recv int64, status int, ra string, seq uint64) {
		evs := []Event{
			{T: typ, ID: id, Key: key, Sent: sent, Recv: recv, Intended: recv - sent, Status: status},
			{T: typ, ID: id + 1, Key: hdr, Sent: recv, Recv: sent, Status: status + 1, Cost: Cost(status)},
			{T: typ, ID: id, Key: key, Sent: sent, Recv: recv},
		}
		evs[1].XLimit, evs[1].RetryAfter = hdr, ra
		require.Equal(t, evs, roundTrip(t, evs, []uint64{seq, seq + 1, seq - 1}))
	})
}

// BenchmarkEventBinary compares reading the binary form of events with
// decoding their JSON lines (the second streaming pass's two ways), on
// the event lines of BenchmarkDecodeEvent.
func BenchmarkEventBinary(b *testing.B) {
	lines := bytes.Split(bytes.TrimSpace(benchLines(10_000)), []byte{'\n'})
	evs := make([]Event, len(lines))
	var w EventEncoder
	var recs [][]byte
	for i, l := range lines {
		require.NoError(b, decodeEvent(l, &evs[i]))
		recs = append(recs, w.AppendEvent(nil, &evs[i], uint64(i)))
	}
	b.Run("binary", func(b *testing.B) {
		var e Event
		d := NewEventDecoder()
		for i := 0; i < b.N; i++ {
			if i%len(recs) == 0 {
				d = NewEventDecoder()
			}
			if _, err := d.DecodeEvent(recs[i%len(recs)], &e); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("json", func(b *testing.B) {
		var e Event
		for i := 0; i < b.N; i++ {
			e = Event{}
			if err := decodeEvent(lines[i%len(lines)], &e); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("encode", func(b *testing.B) {
		var w EventEncoder
		buf := make([]byte, 0, 256)
		for i := 0; i < b.N; i++ {
			buf = w.AppendEvent(buf[:0], &evs[i%len(evs)], uint64(i))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
