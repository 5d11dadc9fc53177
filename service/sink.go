package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/history"
)

// Sink is the downstream: it counts the admitted requests that reach it,
// per key, with their arrival times, so the downstream check can compare
// them with what the attacker saw admitted. Safe for concurrent use; the zero
// value is not usable, build it with NewSink.
type Sink struct {
	// Now is the sink's clock (time.Now when nil).
	Now  func() time.Time
	mu   sync.Mutex
	keys map[string][]int64 // unix ns
	all  []int64
}

// MaxSinkArrivals bounds the arrivals a sink keeps times for; past it,
// arrivals are still counted but the peak rate is computed on the first ones.
const MaxSinkArrivals = 10_000_000

// NewSink returns an empty sink.
func NewSink(now func() time.Time) *Sink {
	if now == nil {
		now = time.Now
	}
	return &Sink{Now: now, keys: map[string][]int64{}}
}

// Reset forgets everything.
func (s *Sink) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = map[string][]int64{}
	s.all = nil
}

// Forward implements Forwarder by recording an arrival.
func (s *Sink) Forward(_ context.Context, key string) error {
	s.Record(key)
	return nil
}

// Record counts one arrival for key.
func (s *Sink) Record(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := s.Now().UnixNano()
	if len(s.all) < MaxSinkArrivals {
		s.keys[key] = append(s.keys[key], off)
		s.all = append(s.all, off)
	}
}

// Describe implements SinkReader.
func (s *Sink) Describe() string { return "the stack's sink" }

// Read implements SinkReader.
func (s *Sink) Read(_ context.Context, start time.Time) ([]history.Sink, error) {
	return s.Snapshot(start), nil
}

// Snapshot returns the arrivals since start, offsets from start.
func (s *Sink) Snapshot(start time.Time) []history.Sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := start.UnixNano()
	out := make([]history.Sink, 0, len(s.keys)+1)
	for k, ts := range s.keys {
		if r := summarize(k, ts, base); r.Arrivals > 0 {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	out = append(out, summarize("*", s.all, base))
	return out
}

func summarize(key string, all []int64, base int64) history.Sink {
	var ts []int64
	for _, t := range all {
		if t >= base {
			ts = append(ts, t-base)
		}
	}
	sorted := ts
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	r := history.Sink{Key: key, Arrivals: int64(len(ts))}
	if len(sorted) == 0 {
		return r
	}
	r.First, r.Last = sorted[0], sorted[len(sorted)-1]
	// Most arrivals in any rolling one-second window.
	j := 0
	for i := range sorted {
		for sorted[i]-sorted[j] >= int64(time.Second) {
			j++
		}
		if n := int64(i - j + 1); n > r.PeakPerSecond {
			r.PeakPerSecond = n
		}
	}
	return r
}

// SinkKeyHeader carries the key of a forwarded request to an HTTP sink.
const SinkKeyHeader = "X-RL-Key"

// ServeHTTP makes the sink an HTTP downstream: any request records an arrival
// for the key in X-RL-Key (or the X-API-Key); GET /_sink/stats?since=UNIXNANO
// returns the snapshot as JSON and POST /_sink/reset clears it.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_sink/stats":
		w.Header().Set("Content-Type", "application/json")
		since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
		_ = json.NewEncoder(w).Encode(s.Snapshot(time.Unix(0, since)))
		return
	case "/_sink/reset":
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	case "/healthz":
		w.WriteHeader(http.StatusOK)
		return
	}
	key := r.Header.Get(SinkKeyHeader)
	if key == "" {
		key = strings.ToLower(strings.TrimSpace(r.Header.Get("X-API-Key")))
	}
	if key == "" {
		key = "(anonymous)"
	}
	s.Record(key)
	w.WriteHeader(http.StatusOK)
}

// HTTPForwarder forwards admitted requests to a sink over HTTP.
type HTTPForwarder struct {
	URL    string
	Client *http.Client
}

// Forward implements Forwarder.
func (f *HTTPForwarder) Forward(ctx context.Context, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, nil)
	if err != nil {
		return fmt.Errorf("downstream %s: %w", f.URL, err)
	}
	req.Header.Set(SinkKeyHeader, key)
	c := f.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("downstream %s: %w", f.URL, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("downstream %s: status %d", f.URL, resp.StatusCode)
	}
	return nil
}
