package rlverify

// relay hands items from one goroutine to another in batches: the
// producer fills a slot at a time (slot, unslot) and ends with close; the
// consumer has every item in order (each). A few batches circulate, so the
// producer runs at most that many batches ahead of the consumer, and both
// reuse the same memory: a slot keeps what it held last (the producer
// overwrites it). The spill uses it to encode and write, and to read and
// decode, on a goroutine of its own while the judging goroutine, the one a
// pass waits on, does nothing else.
type relay[T any] struct {
	full, free chan []T
	cur        []T // nil until the first slot
}

// relayBatch items make a batch, relayBatches batches circulate.
const (
	relayBatch   = 1024
	relayBatches = 3
)

func newRelay[T any]() *relay[T] {
	r := &relay[T]{full: make(chan []T, relayBatches), free: make(chan []T, relayBatches)}
	for range relayBatches {
		r.free <- make([]T, 0, relayBatch)
	}
	return r
}

// slot is the producer's next item, handed over in order; a full batch is
// handed over first.
func (r *relay[T]) slot() *T {
	if r.cur == nil {
		r.cur = <-r.free
	}
	if len(r.cur) == cap(r.cur) {
		r.full <- r.cur
		r.cur = (<-r.free)[:0]
	}
	r.cur = r.cur[:len(r.cur)+1]
	return &r.cur[len(r.cur)-1]
}

// unslot takes back the item slot gave last.
func (r *relay[T]) unslot() { r.cur = r.cur[:len(r.cur)-1] }

// close hands over the items not handed over yet and ends the relay: each
// returns once it has had them.
func (r *relay[T]) close() {
	if len(r.cur) > 0 {
		r.full <- r.cur
	}
	r.cur = nil
	close(r.full)
}

// each calls f with every item the producer handed over, in order, until
// the producer closes the relay.
func (r *relay[T]) each(f func(*T)) {
	for b := range r.full {
		for i := range b {
			f(&b[i])
		}
		r.free <- b[:0]
	}
}
