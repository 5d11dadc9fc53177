package importers

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// k6Line is one line of `k6 run --out json=FILE`: a metric declaration
// ({"type":"Metric",…}) or a sample ({"type":"Point","metric":NAME,
// "data":{"time":…,"value":…,"tags":{…}}}).
type k6Line struct {
	Type   string `json:"type"`
	Metric string `json:"metric"`
	Data   struct {
		Time  *time.Time        `json:"time"`
		Value *float64          `json:"value"`
		Tags  map[string]string `json:"tags"`
	} `json:"data"`
}

// k6Duration is the metric with one point per HTTP request: its time is
// the end of the response, its value sending + waiting + receiving in ms.
const k6Duration = "http_req_duration"

// parseK6 reads k6's JSON output. Every request is its http_req_duration
// point; the other points (http_reqs, the timing parts, checks, custom
// metrics) are ignored. k6 keeps neither request nor response headers.
func parseK6(in *input, o *Options, emit func(*record) error) ([]string, error) {
	name := in.name
	lines, recs := 0, 0
	err := in.eachLine(func(n int, line []byte) error {
		lines++
		where := fmt.Sprintf("%s:%d", name, n)
		var l k6Line
		if err := json.Unmarshal(line, &l); err != nil {
			return inputErr("%s: not k6 JSON output (want the lines of k6 run --out json=FILE): %v", where, err)
		}
		switch l.Type {
		case "Metric":
			return nil
		case "Point":
		default:
			return inputErr("%s: not k6 JSON output: \"type\" is %q, want \"Metric\" or \"Point\"", where, l.Type)
		}
		if l.Metric != k6Duration {
			return nil
		}
		d := &l.Data
		switch {
		case d.Time == nil:
			return inputErr("%s: %s point without \"time\"", where, k6Duration)
		case d.Value == nil || *d.Value < 0 || math.IsNaN(*d.Value) || *d.Value > maxLatencyMs:
			return inputErr("%s: %s point: want a \"value\" in ms, 0 or more", where, k6Duration)
		}
		status, ok := d.Tags["status"]
		if !ok {
			return inputErr("%s: %s point without a status tag (k6 --system-tags must keep status and url)", where, k6Duration)
		}
		code, err := strconv.Atoi(status)
		if err != nil {
			return inputErr("%s: status tag %q is not a number", where, status)
		}
		u, ok := d.Tags["url"]
		if !ok {
			return inputErr("%s: %s point without a url tag (k6 --system-tags must keep status and url)", where, k6Duration)
		}
		recv, err := unixNano(where, "time", *d.Time)
		if err != nil {
			return err
		}
		r := record{where: where, id: uint64(n), recv: recv, sent: recv - int64(math.Round(*d.Value*1e6)),
			status: code, url: u, phase: d.Tags["scenario"]}
		if r.phase == "" {
			r.phase = K6
		}
		if code == 0 {
			r.err = d.Tags["error"]
			if c := d.Tags["error_code"]; c != "" && r.err == "" {
				r.err = "k6 error_code " + c
			}
		}
		if o.KeyTag != "" {
			r.label = d.Tags[o.KeyTag]
		}
		recs++
		return emit(&r)
	})
	if err != nil {
		return nil, err
	}
	if recs == 0 {
		return nil, inputErr("%s: no %s points in %d lines: not the output of k6 run --out json=FILE with HTTP requests", name, k6Duration, lines)
	}
	return nil, nil
}
