package history

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strings"
)

// The end record's digest detects a history edited after the run (events
// deleted, checks_off added to the declared policy, recv widened): it is
// the CRC-32C (Castagnoli) of every byte of the file before the end
// record's line, followed by the end record's line as written without its
// "digest" field (and its newline). It is a check against edits, not a
// defence against a forger, who can recompute it. CRC-32C is computed in
// hardware (SSE 4.2, ARMv8 CRC), so reading a history stays as fast as
// before (docs/history.md).
const digestAlgo = "crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Integrity is what the end record's digest says about a history as read.
type Integrity string

const (
	// Intact: the digest matches: the file is as the run wrote it.
	Intact Integrity = "intact"
	// Modified: the digest does not match: the file was edited after the
	// run (or damaged).
	Modified Integrity = "modified"
	// NoDigest: an end record without a digest (written by an rlverify
	// from before digests, or by hand): nothing can be said.
	NoDigest Integrity = "no-digest"
	// NoEnd: no end record (a run killed or still going): nothing to check
	// against.
	NoEnd Integrity = "no-end"
)

// digester hashes a history's lines as they are read, holding back the
// last line that holds anything but white space: when the file ends that
// line is the end record, which the digest covers without its own digest
// field. Each non-blank line counts as its bytes without surrounding white
// space, and a newline; blank lines count for nothing (the writer writes
// none). So the memory it keeps is one line, whatever the file holds.
type digester struct {
	sum uint32
	// held is the last non-blank line (with its newline), into the caller's
	// buffer while heldInW, else into buf.
	held    []byte
	heldInW bool
	buf     []byte
}

func newDigester() *digester { return &digester{} }

func (d *digester) write(b []byte) { d.sum = crc32.Update(d.sum, castagnoli, b) }

// take holds t (a trimmed, non-blank line), hashing the line held before.
func (d *digester) take(t []byte) {
	d.write(d.held)
	d.buf = append(append(d.buf[:0], t...), '\n')
	d.held, d.heldInW = d.buf, false
}

// line takes one line without its line ending (Read's path).
func (d *digester) line(b []byte) {
	if t := bytes.TrimSpace(b); len(t) > 0 {
		d.take(t)
	}
}

// lines takes w, whole lines (the last may lack its newline at the end of
// the file): the chunked reader's path. Runs of clean lines ({…} and a
// newline, as the writer writes them) are hashed as they lie in w.
func (d *digester) lines(w []byte) {
	runA, runC, runB := -1, 0, 0 // clean lines [runA, runB), the last from runC
	endRun := func() {
		if runA < 0 {
			return
		}
		d.write(d.held)
		d.write(w[runA:runC])
		d.held, d.heldInW = w[runC:runB], true
		runA = -1
	}
	for off := 0; off < len(w); {
		end, next := len(w), len(w)
		if i := bytes.IndexByte(w[off:], '\n'); i >= 0 {
			end, next = off+i, off+i+1
		}
		line := w[off:end]
		if end < next && len(line) > 1 && line[0] == '{' && line[len(line)-1] == '}' {
			if runA < 0 {
				runA = off
			}
			runC, runB = off, next
		} else {
			endRun()
			if t := bytes.TrimSpace(line); len(t) > 0 {
				d.take(t)
			}
		}
		off = next
	}
	endRun()
	if d.heldInW {
		// w is the reader's buffer, reused for the next window.
		d.buf = append(d.buf[:0], d.held...)
		d.held, d.heldInW = d.buf, false
	}
}

// integrity judges the file against its end record e (nil: none).
func (d *digester) integrity(e *End) Integrity {
	switch {
	case e == nil:
		return NoEnd
	case e.Digest == "":
		return NoDigest
	}
	line := d.held
	field := []byte(`,"digest":"` + e.Digest + `"`)
	i := bytes.LastIndex(line, field)
	if i < 0 {
		return Modified
	}
	sum := crc32.Update(d.sum, castagnoli, line[:i])
	sum = crc32.Update(sum, castagnoli, line[i+len(field):])
	if formatDigest(sum) != e.Digest {
		return Modified
	}
	return Intact
}

func formatDigest(sum uint32) string { return fmt.Sprintf("%s:%08x", digestAlgo, sum) }

// IntegrityNote says, in a sentence, what h's Integrity means for a
// verdict drawn from it ("" when intact or when there is no end record).
func (h *History) IntegrityNote() string {
	switch h.Integrity {
	case Modified:
		return fmt.Sprintf("the history was modified after the run: its end record's digest (%s) does not match its content", strings.TrimSpace(h.End.Digest))
	case NoDigest:
		return "the history's end record carries no digest (written by an rlverify from before digests, or by hand): edits cannot be detected"
	}
	return ""
}
