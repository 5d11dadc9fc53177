package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// vegetaJSON is one line of `vegeta encode --to json` (vegeta's lib,
// results.go: the easyjson encoding of Result). Pointers tell a missing
// field from a zero one; the body is not read.
type vegetaJSON struct {
	Attack    string      `json:"attack"`
	Code      *int        `json:"code"`
	Timestamp *time.Time  `json:"timestamp"`
	Latency   *int64      `json:"latency"`
	Error     string      `json:"error"`
	URL       *string     `json:"url"`
	Headers   http.Header `json:"headers"`
}

// parseVegeta reads vegeta results: JSON lines (vegeta encode --to json),
// or vegeta's gob (the default output of vegeta attack) and CSV encodings,
// which its own decoders read.
func parseVegeta(name string, data []byte, o *Options) ([]record, []string, error) {
	if bytes.TrimLeft(data, " \t\r\n")[0] != '{' {
		recs, err := parseVegetaBinary(name, data, o)
		return recs, nil, err
	}
	var recs []record
	err := eachLine(data, func(n int, line []byte) error {
		where := fmt.Sprintf("%s:%d", name, n)
		var v vegetaJSON
		if err := json.Unmarshal(line, &v); err != nil {
			return inputErr("%s: not vegeta results (want the JSON lines of vegeta encode --to json): %v", where, err)
		}
		for _, f := range []struct {
			name    string
			missing bool
		}{{"timestamp", v.Timestamp == nil}, {"code", v.Code == nil}, {"latency", v.Latency == nil}, {"url", v.URL == nil}} {
			if f.missing {
				return inputErr("%s: not a vegeta result: no %q field (want the JSON lines of vegeta encode --to json)", where, f.name)
			}
		}
		if *v.Latency < 0 {
			return inputErr("%s: latency %d is negative", where, *v.Latency)
		}
		if err := vegetaRange(where, *v.Timestamp, time.Duration(*v.Latency)); err != nil {
			return err
		}
		recs = append(recs, vegetaRecord(where, uint64(n), v.Attack, *v.Code, *v.Timestamp, time.Duration(*v.Latency), v.Error, *v.URL, v.Headers, o))
		return nil
	})
	return recs, nil, err
}

// parseVegetaBinary reads gob or CSV results with vegeta's own decoders.
func parseVegetaBinary(name string, data []byte, o *Options) ([]record, error) {
	dec := vegeta.DecoderFor(bytes.NewReader(data))
	if dec == nil {
		return nil, inputErr("%s: not vegeta results: neither JSON lines (vegeta encode --to json), gob (vegeta attack's output) nor CSV (vegeta encode --to csv)", name)
	}
	var recs []record
	for n := 1; ; n++ {
		var r vegeta.Result
		err := dec.Decode(&r)
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		where := fmt.Sprintf("%s: record %d", name, n)
		if err != nil {
			return nil, inputErr("%s: not a vegeta result: %v", where, err)
		}
		if r.Timestamp.IsZero() {
			return nil, inputErr("%s: not a vegeta result: no timestamp", where)
		}
		if r.Latency < 0 {
			return nil, inputErr("%s: latency %d is negative", where, r.Latency)
		}
		if err := vegetaRange(where, r.Timestamp, r.Latency); err != nil {
			return nil, err
		}
		recs = append(recs, vegetaRecord(where, uint64(n), r.Attack, int(r.Code), r.Timestamp, r.Latency, r.Error, r.URL, r.Headers, o))
	}
}

// vegetaRange refuses a timestamp or latency a history cannot hold.
func vegetaRange(where string, ts time.Time, lat time.Duration) error {
	if lat > time.Duration(maxLatencyMs)*time.Millisecond {
		return inputErr("%s: latency %d ns: want at most %g ms", where, int64(lat), maxLatencyMs)
	}
	_, err := unixNano(where, "timestamp", ts)
	return err
}

func vegetaRecord(where string, id uint64, attack string, code int, ts time.Time, lat time.Duration, errMsg, u string, h http.Header, o *Options) record {
	r := record{where: where, id: id, sent: ts.UnixNano(), recv: ts.Add(lat).UnixNano(), status: code, err: errMsg,
		url: u, resp: h, phase: attack}
	if r.resp == nil {
		r.resp = http.Header{} // vegeta keeps response headers; a response without any had none
	}
	if o.KeyTag == "attack" {
		r.label = attack
	}
	if r.phase == "" {
		r.phase = Vegeta
	}
	return r
}

// eachLine calls f with every non-blank line of data and its number (from 1).
func eachLine(data []byte, f func(n int, line []byte) error) error {
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	return nil
}
