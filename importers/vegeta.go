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
func parseVegeta(in *input, o *Options, emit func(*record) error) ([]string, error) {
	name := in.name
	if first, _ := in.r.Peek(1); len(first) == 0 || first[0] != '{' {
		return nil, parseVegetaBinary(in, o, emit)
	}
	err := in.eachLine(func(n int, line []byte) error {
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
		r := vegetaRecord(where, uint64(n), v.Attack, *v.Code, *v.Timestamp, time.Duration(*v.Latency), v.Error, *v.URL, v.Headers, o)
		return emit(&r)
	})
	return nil, err
}

// parseVegetaBinary reads gob or CSV results with vegeta's own decoders.
func parseVegetaBinary(in *input, o *Options, emit func(*record) error) error {
	name := in.name
	// Tell gob from CSV on the first bytes only (vegeta.DecoderFor keeps
	// all it reads while it tries, so /dev/zero grew without bound), then
	// decode the stream; a CSV line is capped like a JSON line.
	prefix, _ := in.r.Peek(vegetaSniff)
	var dec vegeta.Decoder
	switch {
	case vegeta.NewDecoder(bytes.NewReader(prefix)).Decode(&vegeta.Result{}) == nil:
		dec = vegeta.NewDecoder(in.r)
	case vegeta.NewCSVDecoder(bytes.NewReader(prefix)).Decode(&vegeta.Result{}) == nil:
		dec = vegeta.NewCSVDecoder(&lineCap{r: in.r, name: name})
	default:
		return inputErr("%s: not vegeta results: neither JSON lines (vegeta encode --to json), gob (vegeta attack's output) nor CSV (vegeta encode --to csv)", name)
	}
	for n := 1; ; n++ {
		var r vegeta.Result
		err := dec.Decode(&r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		where := fmt.Sprintf("%s: record %d", name, n)
		var ie *InputError
		if errors.As(err, &ie) {
			return err
		}
		if err != nil {
			return inputErr("%s: not a vegeta result: %v", where, err)
		}
		if r.Timestamp.IsZero() {
			return inputErr("%s: not a vegeta result: no timestamp", where)
		}
		if r.Latency < 0 {
			return inputErr("%s: latency %d is negative", where, r.Latency)
		}
		if err := vegetaRange(where, r.Timestamp, r.Latency); err != nil {
			return err
		}
		rec := vegetaRecord(where, uint64(n), r.Attack, int(r.Code), r.Timestamp, r.Latency, r.Error, r.URL, r.Headers, o)
		if err := emit(&rec); err != nil {
			return err
		}
	}
}

// vegetaSniff is how much of the input tells gob from CSV.
const vegetaSniff = 32 << 10

// lineCap fails a stream with a line longer than MaxLineBytes.
type lineCap struct {
	r    io.Reader
	name string
	run  int
}

func (l *lineCap) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.run = 0
		} else if l.run++; l.run > MaxLineBytes {
			return 0, inputErr("%s: a line longer than %d bytes: not a results file rlverify imports", l.name, MaxLineBytes)
		}
	}
	return n, err
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
