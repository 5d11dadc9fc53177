package history

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary form of events.
//
// A check that judges a history as a stream may need its events a second
// time (checks.Streamer.Again). Decoding the JSON lines again is most of
// that pass's cost; the binary form, written during the first pass, is
// read back three to four times faster. It is a scratch form, not an
// interchange format: each record is relative to the one before it (the
// same string as the previous event's is not repeated, times and ids are
// differences), so a reader reads only what one EventEncoder wrote, from
// its first record, in order.
//
// A record is the mask of the string fields that differ from the previous
// event's, each of those as its length and bytes, then the varints of the
// file position, ID, instance, send time (as differences from the previous
// event's), the intended and receive times (as differences from the send
// time), status and cost.

// binaryStrings is the number of Event's string fields: binaryStringsOf lists
// them (TestEventBinaryRoundTripsEveryField fails when Event gains a field
// the binary form does not carry).
const binaryStrings = 20

// binaryStringsOf points at every string field of e, in the binary form's order.
func binaryStringsOf(e *Event) [binaryStrings]*string {
	return [binaryStrings]*string{
		&e.T, &e.Key, &e.Variant, &e.Tier, &e.Phase, &e.Path,
		&e.RetryAfter, &e.RateLimit, &e.RateLimitPolicy, &e.XLimit, &e.XRemaining, &e.XReset,
		&e.RateLimitLimit, &e.RateLimitRemaining, &e.RateLimitReset, &e.Fallback, &e.Scope,
		&e.Err, &e.Date, &e.Body,
	}
}

// EventEncoder writes events in the binary form, each relative to the one
// it wrote before.
type EventEncoder struct {
	prev    Event
	prevSeq uint64
}

// AppendEvent appends the record of e, the event at file position seq
// (Stream.Seq), to b.
func (w *EventEncoder) AppendEvent(b []byte, e *Event, seq uint64) []byte {
	cur, prev := binaryStringsOf(e), binaryStringsOf(&w.prev)
	var mask uint64
	for i := range cur {
		if *cur[i] != *prev[i] {
			mask |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, mask)
	for i := range cur {
		if mask&(1<<i) != 0 {
			b = binary.AppendUvarint(b, uint64(len(*cur[i])))
			b = append(b, *cur[i]...)
		}
	}
	// Differences wrap around like the values themselves: any int64 and
	// uint64 comes back exactly.
	b = binary.AppendVarint(b, int64(seq-w.prevSeq))
	b = binary.AppendVarint(b, int64(e.ID-w.prev.ID))
	b = binary.AppendVarint(b, int64(e.Instance))
	b = binary.AppendVarint(b, e.Sent-w.prev.Sent)
	b = binary.AppendVarint(b, e.Sent-e.Intended)
	b = binary.AppendVarint(b, e.Recv-e.Sent)
	b = binary.AppendVarint(b, int64(e.Status))
	b = binary.AppendVarint(b, int64(e.Cost))
	w.prev, w.prevSeq = *e, seq
	return b
}

// EventDecoder reads what one EventEncoder wrote, record by record, in
// the order written.
type EventDecoder struct {
	prev    Event
	prevSeq uint64
	// strs interns the strings that changed from one event to the next
	// (a key per event when keys alternate).
	strs *internCache
}

// NewEventDecoder returns a decoder of an EventEncoder's records from
// its first.
func NewEventDecoder() *EventDecoder { return &EventDecoder{strs: new(internCache)} }

// errBinaryRecord is the error of a record that is not what an
// EventEncoder wrote (cut short, or with bytes left over).
var errBinaryRecord = errors.New("not an event record")

// DecodeEvent sets e to the event of rec, one whole record of AppendEvent,
// and returns its file position. After an error the decoder reads no
// more records.
func (d *EventDecoder) DecodeEvent(rec []byte, e *Event) (seq uint64, err error) {
	mask, at := binary.Uvarint(rec)
	if at <= 0 || mask>>binaryStrings != 0 {
		return 0, fmt.Errorf("%w: a bad mask of strings", errBinaryRecord)
	}
	// The record changes the previous event in place (one copy of an Event
	// per record): after an error the decoder is of no further use.
	p := &d.prev
	cur := binaryStringsOf(p)
	for i := range cur {
		if mask&(1<<i) == 0 {
			continue
		}
		n, k := binary.Uvarint(rec[at:])
		if k <= 0 || n > uint64(len(rec)-at-k) {
			return 0, fmt.Errorf("%w: string %d cut short", errBinaryRecord, i)
		}
		at += k
		*cur[i] = d.strs.str(rec[at : at+int(n)])
		at += int(n)
	}
	var v [8]int64
	for i := range v {
		x, k := binary.Varint(rec[at:])
		if k <= 0 {
			return 0, fmt.Errorf("%w: number %d cut short", errBinaryRecord, i)
		}
		v[i], at = x, at+k
	}
	if at != len(rec) {
		return 0, fmt.Errorf("%w: %d bytes left over", errBinaryRecord, len(rec)-at)
	}
	d.prevSeq += uint64(v[0])
	p.ID += uint64(v[1])
	p.Instance = int(v[2])
	p.Sent += v[3]
	p.Intended = p.Sent - v[4]
	p.Recv = p.Sent + v[5]
	p.Status = int(v[6])
	p.Cost = Cost(v[7])
	*e = *p
	return d.prevSeq, nil
}
