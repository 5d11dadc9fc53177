package importers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// The parts of HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/)
// an import reads: log.version and each of log.entries.
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

// parseHAR reads a HAR 1.2 (or 1.1) file: one request per entry. It is
// decoded as a stream, one entry in memory at a time (a HAR holds every
// response body).
func parseHAR(in *input, _ *Options, emit func(*record) error) ([]string, error) {
	name := in.name
	tr := &lineTracker{r: in.r, lines: in.skippedLines}
	dec := json.NewDecoder(tr)
	bad := func(err error) error {
		var ie *InputError
		if errors.As(err, &ie) {
			return err
		}
		return inputErr("%s: not a HAR file: %s", name, tr.jsonErr(err))
	}
	delim := func(want json.Delim) (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, bad(err)
		}
		if tok == nil {
			return false, nil
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return false, inputErr("%s: not a HAR file: %s: want %q, not %v", name, tr.where(dec.InputOffset()), want, tok)
		}
		return true, nil
	}
	key := func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", bad(err)
		}
		k, _ := tok.(string)
		return k, nil
	}
	skip := func() error {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return bad(err)
		}
		return nil
	}
	if ok, err := delim('{'); err != nil || !ok {
		if err == nil {
			err = inputErr("%s: not a HAR file: no \"log\" object at the top", name)
		}
		return nil, err
	}
	sawLog, entries := false, 0
	var coarsest time.Duration
	for dec.More() {
		k, err := key()
		if err != nil {
			return nil, err
		}
		if k != "log" {
			if err := skip(); err != nil {
				return nil, err
			}
			continue
		}
		ok, err := delim('{')
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		sawLog = true
		for dec.More() {
			k, err := key()
			if err != nil {
				return nil, err
			}
			switch k {
			case "version":
				var v string
				if err := dec.Decode(&v); err != nil {
					return nil, bad(err)
				}
				switch v {
				case "", "1.1", "1.2":
				default:
					return nil, inputErr("%s: HAR version %q: want 1.2 (or 1.1)", name, v)
				}
			case "entries":
				ok, err := delim('[')
				if err != nil {
					return nil, err
				}
				for ok && dec.More() {
					var e harEntry
					if err := dec.Decode(&e); err != nil {
						var te *json.UnmarshalTypeError
						if errors.As(err, &te) {
							te.Field = "log.entries." + te.Field
						}
						return nil, bad(err)
					}
					r, q, err := harRecord(name, entries, &e)
					if err != nil {
						return nil, err
					}
					coarsest = max(coarsest, q)
					entries++
					if err := emit(&r); err != nil {
						return nil, err
					}
				}
				if ok {
					if _, err := delim(']'); err != nil {
						return nil, err
					}
				}
			default:
				if err := skip(); err != nil {
					return nil, err
				}
			}
		}
		if _, err := delim('}'); err != nil {
			return nil, err
		}
	}
	if _, err := delim('}'); err != nil {
		return nil, err
	}
	// Nothing may follow the top-level object.
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, bad(err)
		}
		what := fmt.Sprint(tok)
		if d, ok := tok.(json.Delim); ok {
			what = string(d)
		}
		return nil, inputErr("%s: not a HAR file: %s: invalid character %q after top-level value", name, tr.where(dec.InputOffset()), what)
	}
	if !sawLog {
		return nil, inputErr("%s: not a HAR file: no \"log\" object at the top", name)
	}
	if entries == 0 {
		return nil, inputErr("%s: the HAR file has no entries (log.entries is empty)", name)
	}
	return []string{fmt.Sprintf("startedDateTime is written to %s, so every interval is widened by %s on each side", coarsest, coarsest)}, nil
}

// harRecord is entry i as a record, and the resolution of its
// startedDateTime.
func harRecord(name string, i int, e *harEntry) (record, time.Duration, error) {
	where := fmt.Sprintf("%s: log.entries[%d]", name, i)
	switch {
	case e.Request == nil:
		return record{}, 0, inputErr("%s: no request", where)
	case e.Response == nil:
		return record{}, 0, inputErr("%s: no response", where)
	case e.Time == nil || !(*e.Time >= 0 && *e.Time <= maxLatencyMs):
		return record{}, 0, inputErr("%s: want \"time\" (total ms), 0 … %g", where, maxLatencyMs)
	}
	for _, tm := range []struct {
		name string
		v    *float64
	}{{"blocked", e.Timings.Blocked}, {"dns", e.Timings.DNS}, {"connect", e.Timings.Connect}} {
		if tm.v != nil && *tm.v > maxLatencyMs {
			return record{}, 0, inputErr("%s: timings.%s %g: want at most %g ms", where, tm.name, *tm.v, maxLatencyMs)
		}
	}
	t, err := time.Parse(time.RFC3339Nano, e.StartedDateTime)
	if err != nil {
		return record{}, 0, inputErr("%s: startedDateTime %q is not an ISO 8601 date and time such as 2009-07-24T19:20:30.45+01:00", where, e.StartedDateTime)
	}
	if _, err := unixNano(where, "startedDateTime", t); err != nil {
		return record{}, 0, err
	}
	q := resolution(e.StartedDateTime)
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
	return r, q, nil
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

// jsonErr says where in the stream a JSON decoding error is: "line 3,
// column 7: …".
func (t *lineTracker) jsonErr(err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		err = fmt.Errorf("%s is a JSON %s, want %s", te.Field, te.Value, te.Type)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of JSON input"
	}
	if off < 0 {
		return err.Error()
	}
	return fmt.Sprintf("%s: %v", t.where(off), err)
}
