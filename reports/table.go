package reports

import (
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ansiSeq matches the colour sequences Text.paint writes.
var ansiSeq = regexp.MustCompile("\x1b\\[[0-9;]*m")

// visibleWidth is how many columns s takes on a terminal: its runes, less
// its colour sequences.
func visibleWidth(s string) int { return utf8.RuneCountInString(ansiSeq.ReplaceAllString(s, "")) }

// table lays out tab-separated cells like text/tabwriter with padding 2,
// but measures cells without their colour sequences, so coloured verdicts
// line up (tabwriter counts escape bytes as text). Every line's last cell is
// not padded. Cells are padded before they are coloured: a line's colour
// never changes where the next column starts.
type table struct {
	w   io.Writer
	buf strings.Builder
}

func newTable(w io.Writer) *table { return &table{w: w} }

// Write buffers p; lines are laid out at Flush.
func (t *table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush writes the buffered lines with their columns aligned.
func (t *table) Flush() error {
	text := t.buf.String()
	t.buf.Reset()
	trailing := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var widths []int
	cells := make([][]string, len(lines))
	for i, l := range lines {
		cells[i] = strings.Split(l, "\t")
		for j, c := range cells[i][:len(cells[i])-1] {
			if j == len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], visibleWidth(c))
		}
	}
	var out strings.Builder
	for i, row := range cells {
		for j, c := range row {
			out.WriteString(c)
			if j < len(row)-1 {
				out.WriteString(strings.Repeat(" ", widths[j]-visibleWidth(c)+2))
			}
		}
		if i < len(cells)-1 || trailing {
			out.WriteByte('\n')
		}
	}
	_, err := io.WriteString(t.w, out.String())
	return err
}
