package attacks

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode"
)

// bodySampleBytes bounds the sample of an unexpected answer's body that a
// history keeps, and maxBodySamples how many answers of a run keep one:
// enough to show a user what the target said ("the API is POST
// /v1/orders"), never a copy of every body.
const (
	bodySampleBytes = 256
	maxBodySamples  = 20
)

// unexpected says whether an answer may be neither an admission nor a
// rejection under the default response contract (2xx, 429): only those
// keep a sample, so the common answers cost nothing.
func unexpected(resp *http.Response) bool {
	return resp.StatusCode >= 300 && resp.StatusCode != http.StatusTooManyRequests
}

// drainKeep reads resp's body to its end (at most limit bytes), closes it,
// and, for an unexpected answer, leaves the body's first bodySampleBytes
// readable as resp.Body for record to keep. It returns the bytes read.
func drainKeep(resp *http.Response, limit int64) (int64, error) {
	if !unexpected(resp) {
		n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, limit))
		resp.Body.Close()
		return n, err
	}
	head := make([]byte, bodySampleBytes)
	m, err := io.ReadFull(resp.Body, head)
	n := int64(m)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = nil
	case err == nil:
		var k int64
		k, err = io.Copy(io.Discard, io.LimitReader(resp.Body, max(limit-n, 0)))
		n += k
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(head[:m]))
	return n, err
}

// bodySample is the sample drainKeep left in resp, as one line of
// printable text: invalid UTF-8 replaced, control characters and runs of
// white space turned into one space. It is data from the target: readers
// print it escaped like every other recorded value.
func bodySample(resp *http.Response) string {
	if resp == nil || resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, bodySampleBytes))
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
