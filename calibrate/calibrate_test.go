package calibrate

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

func mustPolicy(t testing.TB, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	return p
}

func onePolicy(t testing.TB, limit string) *policy.Policy {
	return mustPolicy(t, "name: t\nversion: v1\ntiers:\n  - name: all\n    key_prefix: \"\"\n    limits:\n      - "+limit+"\n")
}

func read(t testing.TB, format, text string, o ReadOptions) (*Traffic, error) {
	t.Helper()
	o.Format = format
	return Read([]Input{{Name: "log", R: strings.NewReader(text)}}, o)
}

// The seeds' 20 request times and their table (IZIN = ALLOW, TOLAK = DENY):
// token bucket K=5 r=2/s, sliding log 5 per 1 s.
var seedTimes = []string{"0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.8", "1.0", "1.2", "2.0", "2.1", "2.5", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6"}

var seedTable = [][2]string{
	{"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"},
	{"IZIN", "TOLAK"}, {"TOLAK", "TOLAK"}, {"TOLAK", "TOLAK"}, {"IZIN", "IZIN"}, {"TOLAK", "IZIN"},
	{"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"TOLAK", "IZIN"},
	{"TOLAK", "IZIN"}, {"TOLAK", "IZIN"}, {"TOLAK", "TOLAK"}, {"IZIN", "IZIN"}, {"TOLAK", "TOLAK"},
}

// seedLog is the seeds' arrivals as a JSON access log, times in Unix
// seconds with a decimal fraction (read exactly: 1700000001.0 − 1.0 s is
// 1700000000.0 to the nanosecond, which the sliding log's edge needs).
func seedLog() string {
	var b strings.Builder
	for _, s := range seedTimes {
		whole, frac, _ := strings.Cut(s, ".")
		var w int
		fmt.Sscan(whole, &w)
		fmt.Fprintf(&b, `{"time": %d.%s, "status": 200, "path": "/api", "api_key": "seed"}`+"\n", 1_700_000_000+w, frac)
	}
	return b.String()
}

func TestSeedsTableFromALogOfItsArrivals(t *testing.T) {
	tr, err := read(t, JSON, seedLog(), ReadOptions{KeyField: "api_key"})
	require.NoError(t, err)
	log, err := normalized(policy.Limit{Algorithm: policy.SlidingLog, Count: 5, Window: policy.Duration(time.Second)})
	require.NoError(t, err)
	r, err := Calibrate(tr, Options{Policy: onePolicy(t, "{algorithm: token-bucket, capacity: 5, rate: 2/s}"), Compare: []policy.Limit{log}})
	require.NoError(t, err)
	require.Len(t, r.Tiers, 1)
	tl := r.Tiers[0].Timeline
	require.NotNil(t, tl)
	require.Equal(t, "seed", tl.Key)
	logCol := len(tl.Columns) - 1
	require.Equal(t, "sliding-log N=5 W=1s (≡ K=5 r=5/s)", tl.Columns[logCol])
	require.Len(t, tl.Rows, 20)
	izin := map[string]bool{"IZIN": true, "TOLAK": false}
	for i, row := range tl.Rows {
		require.Equal(t, izin[seedTable[i][0]], row.Allowed[0], "token bucket at t=%s", seedTimes[i])
		require.Equal(t, izin[seedTable[i][1]], row.Allowed[logCol], "sliding log at t=%s", seedTimes[i])
	}
	require.Equal(t, 8, r.Tiers[0].Refused.Legit, "the seeds' bucket refuses 8 of 20")
	last := r.Tiers[0].Compare[len(r.Tiers[0].Compare)-1]
	require.Equal(t, 5, last.Refused.Legit, "the seeds' log refuses 5 of 20")
	require.Equal(t, 5, last.Disagree, "the two columns differ at 0.5, 1.2 and 3.1–3.3")
}

// burstsOfSeven is a combined log in which each of keys sends a burst of
// exactly 7 requests, 100 ms apart, at second 30 of every minute for an
// hour; the key is the field after the user agent ("$http_x_api_key").
func burstsOfSeven(keys int) string {
	var b strings.Builder
	t0 := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
	for m := 0; m < 60; m++ {
		for k := 0; k < keys; k++ {
			for i := 0; i < 7; i++ {
				at := t0.Add(time.Duration(m)*time.Minute + time.Duration(i)*100*time.Millisecond)
				fmt.Fprintf(&b, "10.0.0.%d - - [%s] \"GET /v1/items?page=%d HTTP/1.1\" 200 512 \"-\" \"curl/8.5\" \"key-%02d\"\n",
					k+1, at.Format("02/Jan/2006:15:04:05.000 -0700"), i, k)
			}
		}
	}
	return b.String()
}

func TestBurstsOfSevenEveryMinuteNeedKSeven(t *testing.T) {
	tr, err := read(t, Combined, burstsOfSeven(20), ReadOptions{KeyField: "extra1"})
	require.NoError(t, err)
	require.Equal(t, 20, tr.Keys())
	require.Equal(t, 20*7*60, tr.Requests())
	r, err := Calibrate(tr, Options{Policy: onePolicy(t, "{algorithm: token-bucket, capacity: 3, rate: 10/min}"), MaxRefused: 0.001})
	require.NoError(t, err)
	tier := r.Tiers[0]
	// K=3 refuses 4 of each burst of 7 (the refill adds 10/min·0.6 s = 0.1 token).
	require.Equal(t, 20*60*4, tier.Refused.Legit)
	got := map[string]string{}
	for _, rec := range tier.Recommended {
		got[string(rec.Algorithm)+" "+rec.Param] = rec.Value
	}
	require.Equal(t, "7", got["token-bucket capacity"], "%v", got)
	require.Equal(t, "7", got["gcra capacity"])
	// The window families at the declared window K/r = 18 s see one burst a window.
	require.Equal(t, "7", got["fixed-window limit"])
	require.Equal(t, "7", got["sliding-log limit"])
	require.Len(t, tier.WorstMinutes, 5)
	require.Equal(t, 80, tier.WorstMinutes[0].Refused)
	require.Equal(t, 7, tier.WorstMinutes[0].PeakSecond)
	require.Equal(t, "key-00", tier.WorstMinutes[0].Key)

	// Refusing none at all needs the same 7; a lax target (20%) less.
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{MaxRefused: 0, ExactlyZero: true}, "7"},
		{Options{}, "7"}, // the default, 0.1%
		{Options{MaxRefused: 0.2}, "6"},
		{Options{MaxRefused: 0.5, MaxRefusedPerKey: 0.001}, "7"},
	} {
		tc.o.Policy = onePolicy(t, "{algorithm: token-bucket, capacity: 3, rate: 10/min}")
		r, err := Calibrate(tr, tc.o)
		require.NoError(t, err)
		require.Equal(t, tc.want, r.Tiers[0].Recommended[0].Value, "%+v", tc.o)
	}

	_, err = Calibrate(tr, Options{Policy: onePolicy(t, "{algorithm: token-bucket, capacity: 3, rate: 10/min}"), MaxRefused: -0.1})
	require.EqualError(t, err, "calibrate: max refused -0.1: want a share in [0, 1) (0.001 is 0.1%)")

	p, yml, err := Recommend(onePolicy(t, "{algorithm: token-bucket, capacity: 3, rate: 10/min}"), r)
	require.NoError(t, err)
	require.Equal(t, int64(7), p.Tiers[0].Limits[0].Capacity)
	require.Contains(t, string(yml), "capacity: 7")
	back, err := policy.Parse("back.yaml", yml)
	require.NoError(t, err)
	require.Equal(t, int64(7), back.Tiers[0].Limits[0].Capacity)
	require.InDelta(t, 10.0/60, back.Tiers[0].Limits[0].R(), 1e-12)
}

// TestAdmitAllMatchesTheReferenceLimiters: for random traffic and every
// family, the one-pass threshold K admits everything through the
// reference limiter and K−1 refuses something.
func TestAdmitAllMatchesTheReferenceLimiters(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	t0 := int64(1_700_000_000_000_000_000)
	for round := 0; round < 60; round++ {
		n := 5 + rng.Intn(200)
		ts := make([]int64, n)
		at := t0 + rng.Int63n(int64(time.Minute))
		for i := range ts {
			switch rng.Intn(4) {
			case 0: // same instant
			case 1:
				at += rng.Int63n(int64(10 * time.Millisecond))
			case 2:
				at += rng.Int63n(int64(time.Second))
			default:
				at += int64(100*time.Millisecond) * int64(rng.Intn(20))
			}
			ts[i] = at
		}
		for _, a := range policy.Algorithms {
			base, err := normalized(policy.Limit{Algorithm: a, Capacity: 10, Rate: policy.Rate(0.5 + rng.Float64()*20)})
			require.NoError(t, err)
			base = inFamily(base, a)
			k := admitAll(base, ts)
			refusals := func(n int64) int {
				l, err := withCount(base, n)
				require.NoError(t, err)
				lim, err := limiters.New(a, []policy.Limit{l})
				require.NoError(t, err)
				c := 0
				for _, at := range ts {
					if !lim.AllowAt(at, "k", 1).Allowed {
						c++
					}
				}
				return c
			}
			require.Zero(t, refusals(k), "%s %s: K=%d must admit all", a, base.Describe(), k)
			if k > 1 {
				require.NotZero(t, refusals(k-1), "%s %s: K=%d must refuse something", a, base.Describe(), k-1)
			}
		}
	}
}

// TestSearchMatchesBruteForce: the binary searches with skipped keys give
// what replaying every candidate over every key gives.
func TestSearchMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	t0 := int64(1_700_000_000_000_000_000)
	var b strings.Builder
	for k := 0; k < 30; k++ {
		at := t0
		for i := 0; i < 50+rng.Intn(150); i++ {
			if rng.Intn(5) > 0 {
				at += rng.Int63n(int64(300 * time.Millisecond))
			} else {
				at += rng.Int63n(int64(10 * time.Second))
			}
			fmt.Fprintf(&b, `{"time": "%s", "key": "k%d", "status": %d}`+"\n", time.Unix(0, at).UTC().Format(time.RFC3339Nano), k, []int{200, 200, 200, 401}[rng.Intn(4)])
		}
	}
	tr, err := read(t, JSON, b.String(), ReadOptions{KeyField: "key", MaxDisorder: time.Hour})
	require.NoError(t, err)
	for _, tc := range []struct{ target, perKey float64 }{{0.001, 0}, {0.02, 0}, {0.1, 0}, {0.1, 0.05}} {
		target := tc.target
		for _, a := range policy.Algorithms {
			base, err := normalized(policy.Limit{Algorithm: a, Capacity: 4, Rate: 2})
			require.NoError(t, err)
			base = inFamily(base, a)
			p := onePolicy(t, fmt.Sprintf("{algorithm: %s, capacity: 4, rate: 2/s}", a))
			statuses, _ := policy.ParseStatusSet("401")
			o := Options{Policy: p, MaxRefused: target, MaxRefusedPerKey: tc.perKey, AbusiveStatuses: statuses, AbusiveKeys: []string{"k3"}}
			r, err := Calibrate(tr, o)
			require.NoError(t, err)
			g := groupAll(tr, &o)
			s := searcher{t: tr, g: g, o: &o}
			// Brute force: every K from 1 until the target is met, every key.
			var want int64
			for n := int64(1); ; n++ {
				l, err := withCount(base, n)
				require.NoError(t, err)
				x, err := tr.replay(g, a, []policy.Limit{l}, nil, nil)
				require.NoError(t, err)
				if s.meets(x) {
					want = n
					break
				}
			}
			var got *Recommended
			for i := range r.Tiers[0].Recommended {
				rec := &r.Tiers[0].Recommended[i]
				if rec.Algorithm == a && (rec.Param == "capacity" || rec.Param == "limit") {
					got = rec
				}
			}
			require.NotNil(t, got)
			require.Equal(t, fmt.Sprint(want), got.Value, "%s at %g (per key %g)", a, target, tc.perKey)
			// The rate search: the strictest grid value meeting the target.
			rec, err := s.rate(base)
			require.NoError(t, err)
			wantRate := ""
			for i := range gridLen(a) {
				j := i
				if a.Bucketed() {
					j = gridLen(a) - 1 - i // strictest = lowest rate, scan from laxest
				}
				l, label, ok := withRate(base, j)
				if !ok {
					continue
				}
				x, err := tr.replay(g, a, []policy.Limit{l}, nil, nil)
				require.NoError(t, err)
				if s.meets(x) {
					wantRate = label
				} else {
					break
				}
			}
			require.Equal(t, wantRate, rec.Value, "%s rate at %g", a, target)
		}
	}
}

// groupAll builds the one tier's group the way Calibrate does.
func groupAll(tr *Traffic, o *Options) *group {
	g := &group{}
	for k, key := range tr.keys {
		legit := len(tr.times[k])
		var ab []bool
		for j, st := range tr.status[k] {
			if key == "k3" || o.AbusiveStatuses.Has(int(st)) {
				if ab == nil {
					ab = make([]bool, legit)
				}
				ab[j] = true
			}
		}
		n := 0
		for _, x := range ab {
			if x {
				n++
			}
		}
		g.keys = append(g.keys, int32(k))
		g.abusive = append(g.abusive, ab)
		g.legit = append(g.legit, legit-n)
		g.legitTotal += legit - n
		g.abTotal += n
	}
	return g
}

func TestMalformedLinesAreReportedWithTheirNumbers(t *testing.T) {
	log := burstsOfSeven(1)
	lines := strings.Split(log, "\n")
	lines[2] = "garbage"
	lines[5] = `10.0.0.1 - - [01/Dec/2026:10:00:30 +0000] "GET / HTTP/1.1" abc 1 "-" "-" "key-00"`
	text := strings.Join(lines, "\n")
	_, err := read(t, Combined, text, ReadOptions{KeyField: "extra1"})
	require.EqualError(t, err, "log:3: not a combined log line: no address field (Read.SkipMalformed skips such lines, counted and listed)")
	tr, err := read(t, Combined, text, ReadOptions{KeyField: "extra1", SkipMalformed: true})
	require.NoError(t, err)
	require.Equal(t, 2, tr.Files[0].Malformed)
	require.Equal(t, []Malformed{
		{File: "log", Line: 3, Reason: "not a combined log line: no address field"},
		{File: "log", Line: 6, Reason: `status "abc" is not an HTTP status`},
	}, tr.Malformed)
	require.Equal(t, 7*60-2, tr.Requests())
}

func TestBadInput(t *testing.T) {
	combined := burstsOfSeven(1)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(combined))
	require.NoError(t, zw.Close())
	for _, tc := range []struct {
		name, format, text string
		o                  ReadOptions
		err                string
	}{
		{"no key field declared", Combined, combined, ReadOptions{}, "calibrate: combined logs need where the key is: a key field or a key regex (one of them)"},
		{"a key field the log does not have", Combined, combined, ReadOptions{KeyField: "extra2"}, "log:1: no field extra2: the line ends after 1 fields past the user agent (Read.SkipMalformed skips such lines, counted and listed)"},
		{"every key empty", Combined, strings.ReplaceAll(combined, `"key-00"`, `"-"`), ReadOptions{KeyField: "extra1"}, `log: none of its 420 requests has a key in the key field "extra1" (every value was empty or "-"): give the field or regex that holds the API key, bearer token or address`},
		{"JSON given as combined", Combined, seedLog(), ReadOptions{KeyField: "ip"}, "log:1: not a combined log line: no [time] after the user; the line looks like json, not combined (mixed formats? read each file in a run of its own, with its format)"},
		{"combined given as JSON", JSON, combined, ReadOptions{KeyField: "k"}, "log:1: not a JSON object; the line looks like combined, not json (mixed formats? read each file in a run of its own, with its format)"},
		{"mixed formats", JSON, seedLog() + strings.SplitN(combined, "\n", 2)[0] + "\n", ReadOptions{KeyField: "api_key"}, "log:21: not a JSON object; the line looks like combined, not json (mixed formats? read each file in a run of its own, with its format) (Read.SkipMalformed skips such lines, counted and listed)"},
		{"out of order beyond the bound", JSON, `{"time":"2026-12-01T10:05:00Z","k":"a"}` + "\n" + `{"time":"2026-12-01T10:00:00Z","k":"a"}` + "\n", ReadOptions{KeyField: "k"}, "log:2: time 2026-12-01T10:00:00Z is 5m0s before line 1's 2026-12-01T10:05:00Z, more than the 1m0s disorder allowed: sort the log, give rotated files separately, or raise Read.MaxDisorder"},
		{"regex without a group", Combined, combined, ReadOptions{KeyRegex: regexp.MustCompile(`key-\d+`)}, `calibrate: key regex "key-\\d+" has no capture group: put the key in ( )`},
		{"unknown format", "w3c", combined, ReadOptions{KeyField: "ip"}, "calibrate: unknown format \"w3c\": want combined, json, history, vegeta, k6, har"},
		{"truncated gzip", Combined, gz.String()[:gz.Len()/2], ReadOptions{KeyField: "extra1"}, "log: after line "},
		{"empty", Combined, "", ReadOptions{KeyField: "ip"}, "log: no requests in 0 lines"},
		{"a key field twice", JSON, `{"time": 1700000000, "k": "a", "k": "b"}` + "\n", ReadOptions{KeyField: "k"}, `log:1: field "k" appears more than once`},
		{"an escaped name is the same field", JSON, `{"time": 1700000000, "k": "a", "\u006b": "b"}` + "\n", ReadOptions{KeyField: "k"}, `log:1: field "k" appears more than once`},
		{"milliseconds as seconds", JSON, `{"time": 1700000000123, "k": "a"}` + "\n", ReadOptions{KeyField: "k"}, "log:1: time 1700000000123 is not a Unix time ≥ 0 before 2262 in the time unit (milliseconds need the ms unit) (Read.SkipMalformed skips such lines, counted and listed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(t, tc.format, tc.text, tc.o)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), tc.err), "got %q\nwant %q", err.Error(), tc.err)
		})
	}
}

func TestOutOfOrderWithinTheBoundIsSorted(t *testing.T) {
	text := `{"time":"2026-12-01T10:00:02Z","k":"a"}` + "\n" + `{"time":"2026-12-01T10:00:01Z","k":"a"}` + "\n" + `{"time":"2026-12-01T10:00:03Z","k":"a"}` + "\n"
	tr, err := read(t, JSON, text, ReadOptions{KeyField: "k"})
	require.NoError(t, err)
	require.Equal(t, 1, tr.Files[0].Reordered)
	require.IsIncreasing(t, tr.times[0])
}

func TestGzipIsReadAsAStream(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(burstsOfSeven(2)))
	require.NoError(t, zw.Close())
	tr, err := Read([]Input{{Name: "access.log.gz", R: &gz}}, ReadOptions{Format: Combined, KeyField: "extra1"})
	require.NoError(t, err)
	require.True(t, tr.Files[0].Gzip)
	require.Equal(t, 2*7*60, tr.Requests())
}

// TestKeysFromTheLogAreEscaped: a key is data; a terminal escape in it is
// quoted in text and Markdown and escaped in HTML.
func TestKeysFromTheLogAreEscaped(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 9; i++ {
		fmt.Fprintf(&b, `{"time": 1700000000.%d, "key": "evil\u001b[31m|<b>"}`+"\n", i)
	}
	tr, err := read(t, JSON, b.String(), ReadOptions{KeyField: "key"})
	require.NoError(t, err)
	r, err := Calibrate(tr, Options{Policy: onePolicy(t, "{algorithm: token-bucket, capacity: 5, rate: 1/s}"), Curves: true})
	require.NoError(t, err)
	for _, f := range ReportFormats() {
		var out bytes.Buffer
		require.NoError(t, Render(&out, r, f))
		require.NotContains(t, out.String(), "\x1b", f)
		if f != FormatText { // markup is only markup in Markdown, HTML (and JSON read by a browser)
			require.NotContains(t, out.String(), "<b>", f)
		}
	}
}

// TestTiersFromTheLog: a tier field puts keys in the tier the log names,
// whatever their prefix; a key with two tiers, or a tier the policy does
// not have, is an error naming the line.
func TestTiersFromTheLog(t *testing.T) {
	p := mustPolicy(t, `name: t
version: v1
tiers:
  - {name: free, key_prefix: "free-", limits: [{algorithm: token-bucket, capacity: 2, rate: 1/s}]}
  - {name: paid, key_prefix: "paid-", limits: [{algorithm: token-bucket, capacity: 20, rate: 10/s}]}
default_tier: free
`)
	line := func(i int, key, plan string) string {
		return fmt.Sprintf(`{"time": 1700000000.%d, "key": "%s", "plan": "%s"}`+"\n", i, key, plan)
	}
	var b strings.Builder
	for i := 0; i < 5; i++ {
		b.WriteString(line(i, "acme", "paid"))
		b.WriteString(line(i, "bob", "free"))
	}
	tr, err := read(t, JSON, b.String(), ReadOptions{KeyField: "key", TierField: "plan"})
	require.NoError(t, err)
	r, err := Calibrate(tr, Options{Policy: p})
	require.NoError(t, err)
	got := map[string]int{}
	for _, tier := range r.Tiers {
		got[tier.Tier] = tier.Refused.Legit
	}
	require.Equal(t, map[string]int{"free": 3, "paid": 0}, got, "acme is paid by the log, not free by its prefix")

	_, err = read(t, JSON, b.String()+line(6, "acme", "free"), ReadOptions{KeyField: "key", TierField: "plan"})
	require.EqualError(t, err, `log:11: key "acme" has tier "free", but tier "paid" at log:1: one key, one tier`)
	tr, err = read(t, JSON, line(1, "acme", "gold"), ReadOptions{KeyField: "key", TierField: "plan"})
	require.NoError(t, err)
	_, err = Calibrate(tr, Options{Policy: p})
	require.EqualError(t, err, `calibrate: log:1: key "acme" has tier "gold", which policy test.yaml does not have (free, paid)`)

	var c strings.Builder
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&c, `192.0.2.1 - - [01/Dec/2026:09:00:0%d +0000] "GET / HTTP/1.1" 200 1 "-" "-" "acme" "paid"`+"\n", i)
	}
	tr, err = read(t, Combined, c.String(), ReadOptions{KeyField: "extra1", TierField: "extra2"})
	require.NoError(t, err)
	require.Equal(t, "paid", tr.tiers[0])
}

// TestJSONFieldsAgreeWithEncodingJSON: the one-pass JSON reader picks the
// same key, status and route as encoding/json does, and refuses what
// encoding/json refuses.
func TestJSONFieldsAgreeWithEncodingJSON(t *testing.T) {
	good := []string{
		`{"time":"2026-12-01T10:00:00Z","status":200,"req":{"path":"/a?x=1","headers":{"x-api-key":"k1"}}}`,
		`{ "req" : { "headers" : { "x-api-key" : "k\"2\\u00e9" } , "path":"/b" } , "time" : 1764583200.5 , "status" : 429 }`,
		`{"arr":[{"req":{"headers":{"x-api-key":"decoy"}}},1,-2.5e3,true,null,"s"],"req":{"headers":{"x-api-key":"k3"},"path":"/c"},"time":"2026-12-01T10:00:00.25Z"}`,
		`{"req":{"headers":{"x-api-key":12345}},"time":1764583200,"status":503,"extra":{"deep":{"deeper":[[[]]]}}}`,
		`{"req":{"headers":{"x-api-key":null}},"time":1764583200}`,
		`{"req":{"headers":{"x-api-key":"k5","x-api-key-2":"no"}},"time":1764583200,"req2":{"path":"/no"}}`,
	}
	bad := []string{
		`{"time":1764583200,"req":{"headers":{"x-api-key":"k"}}`,
		`{"time":1764583200,"req":{"headers":{"x-api-key":"k"}}} trailing`,
		`{"time":1764583200,,"req":{}}`,
		`{"time":1764583200,"req":{"headers":{"x-api-key":"k\u0001"}}}` + "\x01",
		`{"time":1764583200 "req":{}}`,
		`{"time":tru,"req":{}}`,
	}
	o := ReadOptions{Format: JSON, KeyField: "req.headers.x-api-key", RouteField: "req.path"}
	lp, err := newLineParser(&o)
	require.NoError(t, err)
	for _, line := range good {
		var rec parsed
		require.Empty(t, lp.parse([]byte(line), &rec), line)
		var v struct {
			Status int `json:"status"`
			Req    struct {
				Path    string                     `json:"path"`
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"req"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &v), line)
		want := ""
		if raw := v.Req.Headers["x-api-key"]; string(raw) != "null" {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				want = s
			} else {
				want = string(raw)
			}
		}
		require.Equal(t, want, string(rec.key), line)
		require.Equal(t, v.Status, rec.status, line)
		path, _, _ := strings.Cut(v.Req.Path, "?")
		require.Equal(t, path, string(rec.route), line)
	}
	for _, line := range bad {
		var rec parsed
		require.NotEmpty(t, lp.parse([]byte(line), &rec), line)
		require.False(t, json.Valid([]byte(line)), "the test's bad line is valid JSON: %s", line)
	}
}

// TestRecommendKeepsTheWindowAndEveryOtherLimit: a window-family tier
// gets its count N at its window; a tier without traffic keeps its numbers.
func TestRecommendKeepsTheWindowAndEveryOtherLimit(t *testing.T) {
	p := mustPolicy(t, `name: t
version: v1
tiers:
  - {name: all, key_prefix: "key-", limits: [{algorithm: sliding-log, limit: 3, window: 30s}]}
  - {name: idle, key_prefix: "idle-", limits: [{algorithm: fixed-window, limit: 9, window: 1m}]}
`)
	tr, err := read(t, Combined, burstsOfSeven(3), ReadOptions{KeyField: "extra1"})
	require.NoError(t, err)
	r, err := Calibrate(tr, Options{Policy: p})
	require.NoError(t, err)
	got, yml, err := Recommend(p, r)
	require.NoError(t, err)
	all, _ := got.Tier("all")
	require.Equal(t, int64(7), all.Limits[0].Count)
	require.Equal(t, 30*time.Second, all.Limits[0].W())
	idle, _ := got.Tier("idle")
	require.Equal(t, int64(9), idle.Limits[0].Count)
	require.Equal(t, time.Minute, idle.Limits[0].W())
	require.Contains(t, string(yml), "# Calibrated by rlverify calibrate from 1260 requests of 3 keys")
}
