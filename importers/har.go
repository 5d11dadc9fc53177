package importers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// The parts of HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/)
// an import reads.
type harFile struct {
	Log *struct {
		Version string     `json:"version"`
		Entries []harEntry `json:"entries"`
	} `json:"log"`
}

type harEntry struct {
	Pageref         string   `json:"pageref"`
	StartedDateTime string   `json:"startedDateTime"`
	Time            *float64 `json:"time"`
	Request         *struct {
		Method  string  `json:"method"`
		URL     string  `json:"url"`
		Headers []harNV `json:"headers"`
		Cookies []harNV `json:"cookies"`
	} `json:"request"`
	Response *struct {
		Status     int     `json:"status"`
		StatusText string  `json:"statusText"`
		Headers    []harNV `json:"headers"`
		// Error is Chromium's reason for a request that got no response
		// (status 0), e.g. "net::ERR_CONNECTION_REFUSED".
		Error string `json:"_error"`
	} `json:"response"`
	Timings struct {
		// Blocked, DNS and Connect are -1 when they do not apply.
		Blocked *float64 `json:"blocked"`
		DNS     *float64 `json:"dns"`
		Connect *float64 `json:"connect"`
	} `json:"timings"`
}

type harNV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// parseHAR reads a HAR 1.2 (or 1.1) file: one request per entry.
func parseHAR(name string, data []byte, _ *Options) ([]record, []string, error) {
	var f harFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, nil, inputErr("%s: not a HAR file: %s", name, jsonErr(data, err))
	}
	if f.Log == nil {
		return nil, nil, inputErr("%s: not a HAR file: no \"log\" object at the top", name)
	}
	switch f.Log.Version {
	case "", "1.1", "1.2":
	default:
		return nil, nil, inputErr("%s: HAR version %q: want 1.2 (or 1.1)", name, f.Log.Version)
	}
	if len(f.Log.Entries) == 0 {
		return nil, nil, inputErr("%s: the HAR file has no entries (log.entries is empty)", name)
	}
	recs := make([]record, 0, len(f.Log.Entries))
	var coarsest time.Duration
	for i := range f.Log.Entries {
		e := &f.Log.Entries[i]
		where := fmt.Sprintf("%s: log.entries[%d]", name, i)
		switch {
		case e.Request == nil:
			return nil, nil, inputErr("%s: no request", where)
		case e.Response == nil:
			return nil, nil, inputErr("%s: no response", where)
		case e.Time == nil || !(*e.Time >= 0 && *e.Time <= maxLatencyMs):
			return nil, nil, inputErr("%s: want \"time\" (total ms), 0 … %g", where, maxLatencyMs)
		}
		for _, tm := range []struct {
			name string
			v    *float64
		}{{"blocked", e.Timings.Blocked}, {"dns", e.Timings.DNS}, {"connect", e.Timings.Connect}} {
			if tm.v != nil && *tm.v > maxLatencyMs {
				return nil, nil, inputErr("%s: timings.%s %g: want at most %g ms", where, tm.name, *tm.v, maxLatencyMs)
			}
		}
		t, err := time.Parse(time.RFC3339Nano, e.StartedDateTime)
		if err != nil {
			return nil, nil, inputErr("%s: startedDateTime %q is not an ISO 8601 date and time such as 2009-07-24T19:20:30.45+01:00", where, e.StartedDateTime)
		}
		if _, err := unixNano(where, "startedDateTime", t); err != nil {
			return nil, nil, err
		}
		q := resolution(e.StartedDateTime)
		coarsest = max(coarsest, q)
		total := ms(*e.Time)
		// The request cannot reach the limiter before its connection is
		// there: queueing, DNS and connecting come first.
		pre := min(total, ms(nonNeg(e.Timings.Blocked))+ms(nonNeg(e.Timings.DNS))+ms(nonNeg(e.Timings.Connect)))
		r := record{where: where, id: uint64(i + 1), sent: t.UnixNano() - int64(q) + int64(pre),
			recv: t.UnixNano() + int64(q) + int64(total), status: e.Response.Status, url: e.Request.URL,
			reqHeader: harHeader(e.Request.Headers), resp: harHeader(e.Response.Headers), phase: e.Pageref}
		r.cookies = map[string][]string{}
		for _, c := range e.Request.Cookies {
			r.cookies[c.Name] = append(r.cookies[c.Name], c.Value)
		}
		if len(e.Request.Cookies) == 0 {
			for _, c := range (&http.Request{Header: r.reqHeader}).Cookies() {
				r.cookies[c.Name] = append(r.cookies[c.Name], c.Value)
			}
		}
		if r.status == 0 {
			r.err = e.Response.Error
			if r.err == "" {
				r.err = strings.TrimSpace("no response " + e.Response.StatusText)
			}
		}
		if r.phase == "" {
			r.phase = HAR
		}
		recs = append(recs, r)
	}
	return recs, []string{fmt.Sprintf("startedDateTime is written to %s, so every interval is widened by %s on each side", coarsest, coarsest)}, nil
}

func harHeader(nvs []harNV) http.Header {
	h := http.Header{}
	for _, nv := range nvs {
		h.Add(nv.Name, nv.Value)
	}
	return h
}

// resolution is the unit of the last fractional digit of an ISO 8601 time
// as written ("…:30.45Z" → 10ms; no fraction → 1s).
func resolution(s string) time.Duration {
	_, frac, ok := strings.Cut(s, ".")
	if !ok {
		return time.Second
	}
	d := 0
	for d < len(frac) && frac[d] >= '0' && frac[d] <= '9' {
		d++
	}
	q := time.Second
	for ; d > 0 && q > 1; d-- {
		q /= 10
	}
	return q
}

func nonNeg(p *float64) float64 {
	if p == nil || *p < 0 || math.IsNaN(*p) {
		return 0
	}
	return *p
}

// ms converts milliseconds to a duration, rounded to the nanosecond.
func ms(v float64) time.Duration { return time.Duration(math.Round(v * 1e6)) }

// jsonErr says where in data a JSON decoding error is: "line 3, column 7: …".
func jsonErr(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		err = fmt.Errorf("%s is a JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	// off is just past the byte where decoding stopped: name that byte.
	line, col := 1, 1
	for _, b := range data[:max(off-1, 0)] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}
