package bench

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// AccessLogOptions shape a synthetic nginx access log.
type AccessLogOptions struct {
	// Lines is how many lines to write.
	Lines int
	// Keys is how many API keys send (a fifth paid-NNN, the rest free-NNNN).
	Keys int
	// PerSecond is the lines per second of log time.
	PerSecond int
	// Seed makes the log reproducible.
	Seed uint64
	// Scraper adds the abusive key free-scraper: every 10 minutes a
	// minute of 20 requests a second, answered 401.
	Scraper bool
}

// AccessLogStart is the first instant of AccessLog's logs.
var AccessLogStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

var routes = []string{"/v1/items", "/v1/user", "/v1/cart", "/v1/prices", "/v1/recommendations", "/v1/search?q=shoes", "/static/app.js"}

// AccessLog writes an nginx log in the combined format with the API key
// as the field after the user agent (log_format … "$http_x_api_key"), at
// nginx's one-second time resolution: page loads, each a burst of 3–9
// requests (free keys) or 10–30 (paid keys) within the same second, spread
// over the keys, time advancing a second every PerSecond lines (between
// bursts), and, with Scraper, 20 requests answered 401 in every second of
// the first minute of each ten.
func AccessLog(w io.Writer, o AccessLogOptions) error {
	if o.Lines <= 0 || o.Keys <= 0 || o.PerSecond <= 0 {
		return fmt.Errorf("bench: access log needs lines, keys and lines per second > 0")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	rng := rand.New(rand.NewPCG(o.Seed, 0xca1))
	paid := max(1, o.Keys/5)
	now := AccessLogStart
	stamp := now.Format("02/Jan/2006:15:04:05 -0700")
	inSecond := 0
	var line []byte
	// A page load's burst shares one second; the clock moves on between
	// bursts, one second per PerSecond lines written.
	tick := func(lines int) {
		inSecond += lines
		if inSecond >= o.PerSecond {
			now = now.Add(time.Duration(inSecond/o.PerSecond) * time.Second)
			inSecond %= o.PerSecond
			stamp = now.Format("02/Jan/2006:15:04:05 -0700")
		}
	}
	emit := func(ip int, key, route string, status int) error {
		line = append(line[:0], "10."...)
		line = strconv.AppendInt(line, int64(ip>>16&255), 10)
		line = append(line, '.')
		line = strconv.AppendInt(line, int64(ip>>8&255), 10)
		line = append(line, '.')
		line = strconv.AppendInt(line, int64(ip&255), 10)
		line = append(line, " - - ["...)
		line = append(line, stamp...)
		line = append(line, `] "GET `...)
		line = append(line, route...)
		line = append(line, ` HTTP/1.1" `...)
		line = strconv.AppendInt(line, int64(status), 10)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(200+rng.IntN(4000)), 10)
		line = append(line, ` "https://shop.example/" "Mozilla/5.0 (X11; Linux x86_64) Firefox/133.0" "`...)
		line = append(line, key...)
		line = append(line, "\"\n"...)
		_, err := bw.Write(line)
		return err
	}
	n := 0
	var lastScrape time.Time
	for n < o.Lines {
		if o.Scraper && now.Sub(AccessLogStart)%(10*time.Minute) < time.Minute && now != lastScrape {
			lastScrape = now
			for i := 0; i < 20 && n < o.Lines; i++ {
				if err := emit(0xfefefe, "free-scraper", routes[i%len(routes)], 401); err != nil {
					return err
				}
				n++
			}
		}
		k := rng.IntN(o.Keys)
		var key string
		burst := 3 + rng.IntN(7)
		if k < paid {
			key = fmt.Sprintf("paid-%03d", k)
			burst = 10 + rng.IntN(21)
		} else {
			key = fmt.Sprintf("free-%04d", k-paid)
		}
		for i := 0; i < burst && n < o.Lines; i++ {
			status := 200
			switch rng.IntN(50) {
			case 0:
				status = 404
			case 1, 2:
				status = 304
			}
			if err := emit(k, key, routes[i%len(routes)], status); err != nil {
				return err
			}
			n++
		}
		tick(burst)
	}
	return bw.Flush()
}

// CalibratePolicyYAML is the candidate policy the calibrate benchmarks
// replay AccessLog through: the example's guess (free 60/min with bursts
// of 5, paid 600/min with 20).
const CalibratePolicyYAML = `name: bench-calibrate
version: v1
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - {algorithm: token-bucket, capacity: 5, rate: 60/min}
  - name: paid
    key_prefix: "paid-"
    limits:
      - {algorithm: token-bucket, capacity: 20, rate: 600/min}
default_tier: free
`
