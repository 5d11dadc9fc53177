package rlverify

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

// Issue 26, item 18: "no request got a response (N of M: …)" counts
// messages that differ only in the local port as one (60 resets from 60
// ports were 60 kinds of 1, and 40 identical EOFs won), and shows the first
// message of the largest kind verbatim.
//
// The attack's streaming path hands the events over in send order, not
// file order: the tally keeps the first message by file position, so any
// order gives the same answer.
func TestCommonestErrGroupsByKind(t *testing.T) {
	var events []history.Event
	for i := range 100 {
		msg := "unexpected EOF"
		if i%5 < 3 {
			msg = fmt.Sprintf("read tcp 127.0.0.1:%d->127.0.0.1:8080: read: connection reset by peer", 50000+i)
		}
		events = append(events, history.Event{ID: uint64(i + 1), Err: msg})
	}
	for _, tc := range []struct {
		name  string
		order func(i int) int
	}{
		{"file order", func(i int) int { return i }},
		{"reversed", func(i int) int { return len(events) - 1 - i }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReachTally()
			for i := range events {
				j := tc.order(i)
				r.add(&events[j], uint64(j))
			}
			require.True(t, r.none())
			msg, n := r.commonest()
			require.Equal(t, 60, n)
			require.Equal(t, 100, r.events)
			require.Equal(t, "read tcp 127.0.0.1:50000->127.0.0.1:8080: read: connection reset by peer", msg)
		})
	}
}
