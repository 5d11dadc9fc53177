package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Serve answers every request on ln with 200 and an empty body: the one
// trivial server all load tools are measured against.
func Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusOK)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	return srv.Serve(ln)
}

// Median returns the median of xs (the mean of the middle two when even).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// CPU returns the process' user+system CPU time so far.
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Row is one line of the result table.
type Row struct {
	Area, What, Value, Target, Status string
}

// Table collects rows and prints them as Markdown.
type Table struct{ Rows []Row }

// Add appends a row; status is "ok", "BELOW" or "" (informational).
func (t *Table) Add(area, what, value, target, status string) {
	t.Rows = append(t.Rows, Row{area, what, value, target, status})
}

// Check adds a row whose status compares got with want (higher is better
// unless lower is set).
func (t *Table) Check(area, what, value, target string, got, want float64, lower bool) {
	st := "ok"
	if (!lower && got < want) || (lower && got > want) {
		st = "BELOW"
	}
	t.Add(area, what, value, target, st)
}

// Write prints the table.
func (t *Table) Write(w io.Writer) {
	fmt.Fprintln(w, "| area | measurement | value | target | |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.Area, r.What, r.Value, r.Target, r.Status)
	}
}

// Rate formats a per-second figure.
func Rate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2f M/s", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1f k/s", x/1e3)
	}
	return fmt.Sprintf("%.0f /s", x)
}

// Dur formats a duration in ms or µs.
func Dur(ns float64) string {
	if ns >= 1e6 {
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.0f µs", ns/1e3)
}

// Join formats three runs for the table.
func Join(xs []float64, f func(float64) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f(x)
	}
	return strings.Join(s, ", ")
}
