package attacks

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/rlverify/rlverify/history"
)

// Defaults of the bounds on what one response may make the engine read.
const (
	DefaultMaxHeaderBytes = 64 << 10
	DefaultMaxHeaders     = 100
)

// Ceilings of those bounds: net/http adds its own margin to the header
// byte limit, so math.MaxInt64 overflowed and made every response an error;
// a gigabyte of headers is far past anything a limiter sends.
const (
	MaxHeaderBytesCeiling = 1 << 30
	MaxHeadersCeiling     = 1 << 20
)

// errCancelled marks a request cut off because the run stopped (Ctrl-C,
// SIGTERM, --max-duration): recorded as cancelled, not as the target's
// error.
var errCancelled = errors.New(history.ErrCancelled)

// errHeadersTooLarge is a response whose header section exceeds n bytes.
func errHeadersTooLarge(n int64) error {
	return fmt.Errorf("response headers larger than %d bytes (MaxHeaderBytes)", n)
}

// checkHeaderCount fails a response with more than max header fields.
func checkHeaderCount(resp *http.Response, max int) error {
	n := 0
	for _, vs := range resp.Header {
		n += len(vs)
	}
	if max > 0 && n > max {
		return fmt.Errorf("response has %d header fields, more than %d (MaxHeaders)", n, max)
	}
	return nil
}

func (e *Engine) maxHeaderBytes() int64 {
	if e.o.MaxHeaderBytes > 0 {
		return e.o.MaxHeaderBytes
	}
	return DefaultMaxHeaderBytes
}

func (e *Engine) maxHeaders() int {
	if e.o.MaxHeaders > 0 {
		return e.o.MaxHeaders
	}
	return DefaultMaxHeaders
}
