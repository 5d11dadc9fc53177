package console

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// redrawWriter is the progress bars' console writer (mpb.ConsoleWriter):
// each frame is drawn over the last by moving the cursor up over it and
// overwriting it line by line, each line's rest cleared (EL). mpb's own
// writer clears with "erase below" (ED) from the frame's first line; when
// that line is a tmux pane's top row, tmux takes ED from the home position
// for a screen clear and pushes the whole screen into its scrollback, so
// every redraw (five a second) left a copy there. A frame's lines end in
// newlines as mpb renders them; with the cursor back on the frame's first
// line, they scroll nothing unless the frame grew.
type redrawWriter struct {
	bytes.Buffer
	out io.Writer
	fd  int
	tty bool
	// up is the number of lines of the last frame, to move back over.
	up int
}

// newRedrawWriter draws on out; tty says to draw as on a terminal (mpb
// renders nothing otherwise), at out's width when it is one, else 160.
func newRedrawWriter(out io.Writer, tty bool) *redrawWriter {
	w := &redrawWriter{out: out, fd: -1, tty: tty}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		w.fd = int(f.Fd())
	}
	return w
}

// IsTerminal implements mpb.ConsoleWriter.
func (w *redrawWriter) IsTerminal() bool { return w.tty }

// GetTermSize implements mpb.ConsoleWriter.
func (w *redrawWriter) GetTermSize() (int, int, error) {
	if w.fd >= 0 {
		if cols, rows, err := term.GetSize(w.fd); err == nil && cols > 0 && rows > 0 {
			return cols, rows, nil
		}
	}
	return 160, 240, nil
}

var (
	newline      = []byte("\n")
	clearNewline = []byte("\x1b[K\n")
)

// Flush implements mpb.ConsoleWriter: it draws the buffered frame of lines
// lines over the last one.
func (w *redrawWriter) Flush(lines int) error {
	var b bytes.Buffer
	if w.up > 0 {
		fmt.Fprintf(&b, "\r\x1b[%dA", w.up)
	}
	b.Write(bytes.ReplaceAll(w.Bytes(), newline, clearNewline))
	if lines < w.up && lines > 0 {
		// The frame shrank: erase what is left of the last one below. The
		// cursor is under at least one line just drawn, never at home.
		b.WriteString("\x1b[J")
	}
	w.Reset()
	w.up = lines
	_, err := w.out.Write(b.Bytes())
	return err
}
