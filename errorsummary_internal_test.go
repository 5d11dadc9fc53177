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
func TestCommonestErrGroupsByKind(t *testing.T) {
	h := &history.History{}
	for i := range 100 {
		msg := "unexpected EOF"
		if i%5 < 3 {
			msg = fmt.Sprintf("read tcp 127.0.0.1:%d->127.0.0.1:8080: read: connection reset by peer", 50000+i)
		}
		h.Events = append(h.Events, history.Event{ID: uint64(i + 1), Err: msg})
	}
	msg, n := commonestErr(h)
	require.Equal(t, 60, n)
	require.Equal(t, "read tcp 127.0.0.1:50000->127.0.0.1:8080: read: connection reset by peer", msg)
}
