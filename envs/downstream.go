package envs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/rlverify/rlverify/history"
)

// MaxDownstreamBytes bounds one read of a downstream source.
const MaxDownstreamBytes = 32 << 20

// JSONCounter reads what reached a service's upstream from a JSON endpoint
// that counts it: the number at TotalPath and the object of key → count at
// ByKeyPath (dotted paths such as "forwarded.total", "forwarded.by_key").
// Counts are cumulative; the engine subtracts the first reading. Either
// path may be empty, but not both.
type JSONCounter struct {
	URL       string
	TotalPath string
	ByKeyPath string
	Client    *http.Client
}

// Describe implements DownstreamReader.
func (j *JSONCounter) Describe() string {
	return fmt.Sprintf("JSON counter %s (total %q, per key %q)", j.URL, j.TotalPath, j.ByKeyPath)
}

// Read implements DownstreamReader: the counts as they stand now.
func (j *JSONCounter) Read(ctx context.Context, _ time.Time) ([]history.Sink, error) {
	if j.TotalPath == "" && j.ByKeyPath == "" {
		return nil, fmt.Errorf("downstream %s: give the path of the total or of the per-key counts", j.URL)
	}
	body, err := fetch(ctx, j.Client, j.URL)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("downstream %s: not JSON: %w", j.URL, err)
	}
	var out []history.Sink
	var sum int64
	if j.ByKeyPath != "" {
		v, err := lookupPath(doc, j.ByKeyPath)
		if err != nil {
			return nil, fmt.Errorf("downstream %s: %w", j.URL, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("downstream %s: %s is %s, want an object of key: count", j.URL, j.ByKeyPath, jsonKind(v))
		}
		for k, c := range m {
			n, err := count(c)
			if err != nil {
				return nil, fmt.Errorf("downstream %s: %s.%s: %w", j.URL, j.ByKeyPath, k, err)
			}
			out = append(out, history.Sink{Key: k, Arrivals: n})
			sum += n
		}
	}
	total := sum
	if j.TotalPath != "" {
		v, err := lookupPath(doc, j.TotalPath)
		if err != nil {
			return nil, fmt.Errorf("downstream %s: %w", j.URL, err)
		}
		if total, err = count(v); err != nil {
			return nil, fmt.Errorf("downstream %s: %s: %w", j.URL, j.TotalPath, err)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return append(out, history.Sink{Key: "*", Arrivals: total}), nil
}

// lookupPath follows a dotted path through decoded JSON.
func lookupPath(doc any, path string) (any, error) {
	cur := doc
	for i, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("path %s: %s is %s, not an object", path, strings.Join(strings.Split(path, ".")[:i], "."), jsonKind(cur))
		}
		next, ok := m[part]
		if !ok {
			return nil, fmt.Errorf("path %s matches nothing: no %q (there: %s)", path, part, someNames(m))
		}
		cur = next
	}
	return cur, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// count reads a non-negative whole count.
func count(v any) (int64, error) {
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("%s is not a count", jsonKind(v))
	}
	if f < 0 || f != math.Trunc(f) || f > 1e15 {
		return 0, fmt.Errorf("%g is not a whole count", f)
	}
	return int64(f), nil
}

// PromCounter reads what reached a service's upstream from a Prometheus
// text endpoint: the samples of Metric, per value of Label (the key).
// Counts are cumulative; the engine subtracts the first reading.
type PromCounter struct {
	URL    string
	Metric string
	Label  string
	Client *http.Client

	// read is set after the first reading. A counter vector without samples
	// is not exposed at all, so the metric may be absent before anything
	// was counted: the first reading then counts zero; later ones must
	// find it.
	read bool
}

// Describe implements DownstreamReader.
func (p *PromCounter) Describe() string {
	return fmt.Sprintf("Prometheus metric %s{%s} at %s", p.Metric, p.Label, p.URL)
}

// Read implements DownstreamReader.
func (p *PromCounter) Read(ctx context.Context, _ time.Time) ([]history.Sink, error) {
	body, err := fetch(ctx, p.Client, p.URL)
	if err != nil {
		return nil, err
	}
	var parser expfmt.TextParser
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("downstream %s: not Prometheus text: %w", p.URL, err)
	}
	fam, ok := fams[p.Metric]
	first := !p.read
	p.read = true
	if !ok && first {
		return []history.Sink{{Key: "*"}}, nil
	}
	if !ok {
		return nil, fmt.Errorf("downstream %s: no metric %s after requests were sent (there: %s)", p.URL, p.Metric, someNames(fams))
	}
	per := map[string]int64{}
	var total int64
	for _, m := range fam.GetMetric() {
		var v float64
		switch {
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		default:
			return nil, fmt.Errorf("downstream %s: %s is a %s, want a counter", p.URL, p.Metric, strings.ToLower(fam.GetType().String()))
		}
		key, found := "", false
		for _, l := range m.GetLabel() {
			if l.GetName() == p.Label {
				key, found = l.GetValue(), true
			}
		}
		if !found {
			return nil, fmt.Errorf("downstream %s: a sample of %s has no label %s", p.URL, p.Metric, p.Label)
		}
		n, err := count(v)
		if err != nil {
			return nil, fmt.Errorf("downstream %s: %s{%s=%q}: %w", p.URL, p.Metric, p.Label, key, err)
		}
		per[key] += n
		total += n
	}
	out := make([]history.Sink, 0, len(per)+1)
	for k, n := range per {
		out = append(out, history.Sink{Key: k, Arrivals: n})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return append(out, history.Sink{Key: "*", Arrivals: total}), nil
}

// fetch GETs url with a bounded body; any status but 200 is an error.
func fetch(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("downstream %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("downstream %s is unreachable: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDownstreamBytes+1))
	if err != nil {
		return nil, fmt.Errorf("downstream %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("downstream %s: status %d", url, resp.StatusCode)
	}
	if len(body) > MaxDownstreamBytes {
		return nil, fmt.Errorf("downstream %s: more than %d bytes", url, MaxDownstreamBytes)
	}
	return body, nil
}

// RemoteSink reads a sink served by `rlverify sink` over HTTP.
type RemoteSink struct {
	URL    string
	Client *http.Client
}

// Describe implements SinkReader.
func (r *RemoteSink) Describe() string { return "rlverify sink " + r.URL }

// Read implements SinkReader.
func (r *RemoteSink) Read(ctx context.Context, start time.Time) ([]history.Sink, error) {
	body, err := fetch(ctx, r.Client, strings.TrimRight(r.URL, "/")+"/_sink/stats?since="+strconv.FormatInt(start.UnixNano(), 10))
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	var out []history.Sink
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("sink %s: this is not an rlverify sink's stats: %w", r.URL, err)
	}
	return out, nil
}

// someNames lists the first ten of m's keys in order, for an error that
// says what was there instead.
func someNames[V any](m map[string]V) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 10 {
		names = append(names[:10], "…")
	}
	return strings.Join(names, ", ")
}
