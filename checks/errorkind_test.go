package checks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 26, item 18: errors that differ only in a local port, an address or
// the key in a URL are one kind (the summary counted "1 of 100" of each).
func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"read tcp 127.0.0.1:54321->127.0.0.1:8080: read: connection reset by peer", "read tcp 127.0.0.1:54322->127.0.0.1:8080: read: connection reset by peer", true},
		{`Get "http://127.0.0.1:8080/?api_key=free-9b57c9-0": context deadline exceeded`, `Get "http://127.0.0.1:8080/?api_key=paid-77aa01-3": context deadline exceeded`, true},
		{"dial tcp 127.0.0.1:1: connect: connection refused", "dial tcp [::1]:1: connect: connection refused", false},
		{"read tcp 127.0.0.1:54321->127.0.0.1:8080: read: connection reset by peer", "unexpected EOF", false},
		{"response headers larger than 65536 bytes (MaxHeaderBytes)", "response has 300 header fields, more than 100 (MaxHeaders)", false},
	} {
		require.Equal(t, tc.same, ErrorKind(tc.a) == ErrorKind(tc.b), "%q vs %q: %q, %q", tc.a, tc.b, ErrorKind(tc.a), ErrorKind(tc.b))
	}
	require.Equal(t, "read tcp N.N.N.N:N->N.N.N.N:N: read: connection reset by peer", ErrorKind("read tcp 127.0.0.1:54321->127.0.0.1:8080: read: connection reset by peer"))
}
