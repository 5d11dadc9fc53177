package bench

import (
	"bytes"
	"fmt"
	"time"

	"github.com/rlverify/rlverify/importers"
)

// ImportInput returns the results file of n requests of one key that the
// other load tool format (importers.Vegeta, K6 or HAR) would write: a
// request every millisecond, 1 ms latency, every fourth one refused with
// 429 and Retry-After. The key is in the URL's api_key query parameter
// (vegeta and k6 keep no request headers); import with
// importers.Options{Key: ImportKey} and ImportPolicyYAML.
func ImportInput(format string, n int) ([]byte, error) {
	var b bytes.Buffer
	start := time.Unix(1_700_000_000, 0).UTC()
	const url = "http://127.0.0.1:8080/v1/items?api_key=" + ImportKey
	status := func(i int) int {
		if i%4 == 3 {
			return 429
		}
		return 200
	}
	switch format {
	case importers.Vegeta:
		for i := range n {
			ts := start.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
			fmt.Fprintf(&b, `{"attack":"bench","seq":%d,"code":%d,"timestamp":"%s","latency":1000000,"bytes_out":0,"bytes_in":11,"error":"","body":"eyJvayI6dHJ1ZX0=","method":"GET","url":"%s","headers":{"Content-Type":["text/plain; charset=utf-8"],"Retry-After":["1"]}}`+"\n",
				i, status(i), ts, url)
		}
	case importers.K6:
		b.WriteString(`{"type":"Metric","data":{"name":"http_req_duration","type":"trend","contains":"time","thresholds":[],"submetrics":null},"metric":"http_req_duration"}` + "\n")
		for i := range n {
			ts := start.Add(time.Duration(i+1) * time.Millisecond).Format(time.RFC3339Nano)
			fmt.Fprintf(&b, `{"metric":"http_req_duration","type":"Point","data":{"time":"%s","value":1,"tags":{"expected_response":"true","group":"","method":"GET","name":"%s","proto":"HTTP/1.1","scenario":"default","status":"%d","url":"%s"}}}`+"\n",
				ts, url, status(i), url)
		}
	case importers.HAR:
		b.WriteString(`{"log":{"version":"1.2","creator":{"name":"rlbench","version":"1"},"pages":[],"entries":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			ts := start.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
			ra := ""
			if status(i) == 429 {
				ra = `,{"name":"retry-after","value":"1"}`
			}
			fmt.Fprintf(&b, `{"startedDateTime":"%s","time":1,"request":{"method":"GET","url":"%s","httpVersion":"HTTP/1.1","headers":[{"name":"x-api-key","value":"%s"}],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":0},"response":{"status":%d,"statusText":"","httpVersion":"HTTP/1.1","headers":[{"name":"content-type","value":"text/plain"}%s],"cookies":[],"content":{"size":11,"mimeType":"text/plain"},"redirectURL":"","headersSize":-1,"bodySize":11},"cache":{},"timings":{"send":0.1,"wait":0.8,"receive":0.1}}`,
				ts, url, ImportKey, status(i), ra)
		}
		b.WriteString(`]}}`)
	default:
		return nil, fmt.Errorf("bench: no import input for format %q (want one of %v)", format, importers.Formats())
	}
	return b.Bytes(), nil
}

// ImportKey is the key of every request of ImportInput.
const ImportKey = "free-import"
