// Package console is what the command shows on a terminal: standard error
// with control characters escaped (text a target, plan or policy chose is
// data), the attack's progress bars or log lines, and whether a writer is a
// terminal. Only cmd/ imports it (it holds the CLI's mpb dependency).
package console

import (
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/reports"
)

// safeWriter (Safe) is rlverify's standard error. Everything written there —
// progress, warnings, errors — may carry words a target, a policy or a plan
// chose (a phase name, a tier, an error a target provoked), so this is the
// one place where terminal control characters are shown escaped
// (reports.Printable: ESC as \x1b, CR, BEL, C1, bidirectional overrides,
// invalid UTF-8), whoever formatted the message. Newline and tab pass:
// messages have several lines; a name printed inside one line goes through
// OneLine as well. The progress bars' own escapes are drawn on the raw
// terminal (Raw).
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, reports.Printable(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Safe is w with control characters escaped (see safeWriter), wrapped once.
func Safe(w io.Writer) io.Writer {
	if _, ok := w.(safeWriter); ok {
		return w
	}
	return safeWriter{w}
}

// Raw is what w writes to, for the progress bars' cursor movements
// and for deciding whether it is a terminal.
func Raw(w io.Writer) io.Writer {
	if s, ok := w.(safeWriter); ok {
		return s.w
	}
	return w
}

// OneLine is s with every control character escaped, newline and tab
// included (strconv.Quote's escapes, without the quotes): a name from a
// plan, a policy or a target printed inside a line cannot start a line of
// its own ("ph\nfake line").
func OneLine(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || !strconv.IsPrint(r) && r != ' ' {
			q := strconv.Quote(s)
			return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
		}
	}
	return s
}

// IsTerminal reports whether w (or what a Safe writer wraps) is a terminal
// that takes cursor movements and colours (TERM is not dumb).
func IsTerminal(w io.Writer) bool {
	f, ok := Raw(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}
