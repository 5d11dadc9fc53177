package importers_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files (and, in TestVegetaLive, the vegeta samples)")

func loadPolicy(t *testing.T, file string) *policy.Policy {
	t.Helper()
	if file == "" {
		return policy.Default()
	}
	p, err := policy.Load(filepath.Join("testdata", file))
	require.NoError(t, err)
	return p
}

// importBytes imports data and returns the history written.
func importBytes(t *testing.T, format string, data []byte, o importers.Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	_, err := importers.Import(format, bytes.NewReader(data), w, o)
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

func readHistory(t *testing.T, b []byte) *history.History {
	t.Helper()
	h, err := history.Read("imported", bytes.NewReader(b))
	require.NoError(t, err, "the import is a valid history")
	return h
}

// The samples: vegeta's are recorded by TestVegetaLive (vegeta's library
// against bucketService); k6's and the HAR files are written by hand after
// the formats' documentation (k6: results-output/real-time/json, HAR 1.2).
var samples = []struct {
	file, format, policy string
	opts                 importers.Options
	// oversell is the verdict the sample must get: the bad vegeta and HAR
	// samples come from two instances keeping their own state, so the
	// instances check is the root and explains their oversell.
	oversell checks.Verdict
}{
	{file: "vegeta-ok.json", format: importers.Vegeta, policy: "policy-query.yaml", oversell: checks.Pass},
	{file: "vegeta-bad.json", format: importers.Vegeta, policy: "policy-query.yaml", oversell: checks.Explained},
	{file: "k6-ok.json", format: importers.K6, opts: importers.Options{KeyTag: "key"}, oversell: checks.Pass},
	{file: "k6-bad.json", format: importers.K6, opts: importers.Options{KeyTag: "key"}, oversell: checks.Fail},
	{file: "har-ok.har", format: importers.HAR, policy: "policy-har.yaml",
		opts: importers.Options{Instances: []importers.Instance{{Host: "127.0.0.1:8080", Index: 0}}}, oversell: checks.Pass},
	{file: "har-bad.har", format: importers.HAR, policy: "policy-har.yaml", oversell: checks.Explained},
}

func TestGoldenImports(t *testing.T) {
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", s.file))
			require.NoError(t, err)
			o := s.opts
			o.Policy, o.Name = loadPolicy(t, s.policy), s.file
			got := importBytes(t, s.format, data, o)
			golden := filepath.Join("testdata", strings.TrimSuffix(s.file, filepath.Ext(s.file))+".golden.jsonl")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update to create %s", golden)
			require.Equal(t, string(want), string(got))

			h := readHistory(t, got)
			require.NotNil(t, h.End, "an import is complete: it ends with an end record")
			require.False(t, h.Interrupted())
			f, ok := importers.Format(h.Run)
			require.True(t, ok)
			require.Equal(t, s.format, f)
			require.Equal(t, s.oversell, verdictsOf(t, got, s.policy)["oversell"])
		})
	}
}

func TestImportTiming(t *testing.T) {
	t.Run("k6: sent is the point's time minus http_req_duration", func(t *testing.T) {
		data := `{"metric":"http_req_duration","type":"Point","data":{"time":"2025-03-04T10:15:00.0120652+01:00","value":1.8652,"tags":{"status":"200","url":"http://127.0.0.1:8080/a"}}}` + "\n" +
			`{"metric":"http_req_duration","type":"Point","data":{"time":"2025-03-04T09:15:00.5+00:00","value":0.25,"tags":{"status":"0","error":"dial: connection refused","url":"http://127.0.0.1:8080/b?x=1"}}}` + "\n"
		h := readHistory(t, importBytes(t, importers.K6, []byte(data), importers.Options{Policy: policy.Default(), Key: "free-a", PlainKeys: true}))
		require.Len(t, h.Events, 2)
		a, b := h.Events[0], h.Events[1]
		assert.Equal(t, "2025-03-04T09:15:00.0102Z", h.Run.Start.Format("2006-01-02T15:04:05.999999999Z07:00"), "start is the earliest send, in UTC")
		assert.Equal(t, int64(0), a.Sent)
		assert.Equal(t, int64(1865200), a.Recv)
		assert.Equal(t, "/a", a.Path)
		assert.Equal(t, int64(500_000_000-250_000-10_200_000), b.Sent)
		assert.Equal(t, b.Sent+250_000, b.Recv)
		assert.Equal(t, 0, b.Status)
		assert.Equal(t, "dial: connection refused", b.Err)
		assert.Equal(t, "/b?x=1", b.Path)
		assert.Equal(t, "free-a", b.Key)
	})
	t.Run("har: widened by the resolution of startedDateTime, queueing left out", func(t *testing.T) {
		data := `{"log":{"version":"1.2","entries":[{"startedDateTime":"2025-03-04T09:20:00.100Z","time":6.5,` +
			`"request":{"method":"GET","url":"http://h:1/x","headers":[{"name":"X-API-Key","value":" Free-A "}]},` +
			`"response":{"status":429,"headers":[{"name":"Retry-After","value":"1"},{"name":"ratelimit","value":"\"free\";r=0;t=1"}]},` +
			`"timings":{"blocked":3.5,"dns":-1,"connect":0.5,"send":0.1,"wait":2,"receive":0.4}}]}}`
		h := readHistory(t, importBytes(t, importers.HAR, []byte(data), importers.Options{Policy: policy.Default(), PlainKeys: true}))
		e := h.Events[0]
		// startedDateTime may be cut off to the millisecond: the request
		// started in [100ms−1ms, 100ms+1ms]; it was sent after blocked and
		// connect (4ms), and its response was in by time (6.5ms) later.
		assert.Equal(t, "2025-03-04T09:20:00.103Z", h.Run.Start.Format("2006-01-02T15:04:05.999Z07:00"), "the run starts at the earliest send")
		assert.Equal(t, int64(0), e.Sent)
		assert.Equal(t, int64((101_000_000+6_500_000)-103_000_000), e.Recv)
		assert.Equal(t, "free-a", e.Key, "trimmed and case-folded as the default identity declares")
		assert.Equal(t, "1", e.RetryAfter)
		assert.Equal(t, `"free";r=0;t=1`, e.RateLimit)
		assert.Contains(t, strings.Join(h.Run.Notes, "\n"), "widened by 1ms on each side")
	})
	t.Run("vegeta: timestamp and latency; error only without a status", func(t *testing.T) {
		data := `{"attack":"a","seq":0,"code":429,"timestamp":"2025-03-04T10:00:00.000000100+01:00","latency":2500,"bytes_out":0,"bytes_in":5,"error":"429 Too Many Requests","body":"eA==","method":"GET","url":"http://127.0.0.1:1/","headers":{"Retry-After":["2"],"X-Ratelimit-Remaining":["0"]}}` + "\n" +
			`{"attack":"a","seq":1,"code":0,"timestamp":"2025-03-04T09:00:00.001Z","latency":100,"bytes_out":0,"bytes_in":0,"error":"dial tcp: connection refused","body":null,"method":"GET","url":"http://127.0.0.1:1/","headers":null}` + "\n"
		h := readHistory(t, importBytes(t, importers.Vegeta, []byte(data), importers.Options{Policy: policy.Default(), KeyTag: "attack", PlainKeys: true}))
		a, b := h.Events[0], h.Events[1]
		assert.Equal(t, int64(0), a.Sent)
		assert.Equal(t, int64(2500), a.Recv)
		assert.Equal(t, "2", a.RetryAfter)
		assert.Equal(t, "0", a.XRemaining)
		assert.Empty(t, a.Err, "the status says it")
		assert.Equal(t, "a", a.Key, "the attack name")
		assert.Equal(t, int64(1_000_000-100), b.Sent)
		assert.Equal(t, "dial tcp: connection refused", b.Err)
		assert.Equal(t, uint64(2), b.ID, "ids are line numbers")
	})
}

func TestImportIdentity(t *testing.T) {
	har := func(headers string) []byte {
		return []byte(`{"log":{"entries":[{"startedDateTime":"2025-03-04T09:20:00.100Z","time":1,` +
			`"request":{"method":"GET","url":"http://h:1/x?api_key=q-key","headers":[` + headers + `]},"response":{"status":200}}]}}`)
	}
	pol := func(yaml string) *policy.Policy {
		p, err := policy.Parse("test.yaml", []byte("name: t\ntiers:\n  - name: free\n    key_prefix: \"\"\n    limits:\n      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\n"+yaml))
		require.NoError(t, err)
		return p
	}
	for _, tc := range []struct {
		name, headers, policy string
		key, variant          string
	}{
		{"header", `{"name":"x-api-key","value":"k1"}`, "", "k1", ""},
		{"bearer", `{"name":"Authorization","value":"Bearer tok-1"}`, "identity: {in: bearer}\n", "tok-1", ""},
		{"query", ``, "identity: {in: query, name: api_key}\n", "q-key", ""},
		{"cookie header", `{"name":"Cookie","value":"a=1; sid=c-9"}`, "identity: {in: cookie, name: sid}\n", "c-9", ""},
		{"repeated: last", `{"name":"X-API-Key","value":"k1"},{"name":"X-API-Key","value":"k2"}`, "identity: {repeated: last}\n", "k2", ""},
		{"tenant first, limiter last: the tenant's, as a bypass variant", `{"name":"X-API-Key","value":"k1"},{"name":"X-API-Key","value":"k2"}`, "identity: {tenant_occurrence: first, limiter_occurrence: last}\n", "k1", "repeat"},
		{"tenant last, limiter first: the tenant's, as a bypass variant", `{"name":"X-API-Key","value":"k1"},{"name":"X-API-Key","value":"k2"}`, "identity: {tenant_occurrence: last}\n", "k2", "repeat"},
		{"one occurrence is no variant under a mismatch", `{"name":"X-API-Key","value":"k1"}`, "identity: {tenant_occurrence: last}\n", "k1", ""},
		{"repeated: rejected is a bypass variant", `{"name":"X-API-Key","value":"k1"},{"name":"X-API-Key","value":"k2"}`, "identity: {repeated: rejected}\n", "k1", "repeat"},
		{"too long, cut", `{"name":"X-API-Key","value":"abcdef"}`, "identity: {max_length: 3, too_long: cut}\n", "abc", ""},
		{"too long, refused", `{"name":"X-API-Key","value":"abcdef"}`, "identity: {max_length: 3}\n", "abcdef", "long"},
		{"case kept by default", `{"name":"X-API-Key","value":"AbC"}`, "", "AbC", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := readHistory(t, importBytes(t, importers.HAR, har(tc.headers), importers.Options{Policy: pol(tc.policy), PlainKeys: true}))
			assert.Equal(t, tc.key, h.Events[0].Key)
			assert.Equal(t, tc.variant, h.Events[0].Variant)
		})
	}
}

func TestImportInstances(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "har-bad.har"))
	require.NoError(t, err)
	o := importers.Options{Policy: loadPolicy(t, "policy-har.yaml")}
	h := readHistory(t, importBytes(t, importers.HAR, data, o))
	require.Equal(t, []string{"http://127.0.0.1:8080", "http://127.0.0.1:8081"}, h.Run.Instances, "numbered in order of first appearance")

	o.Instances = []importers.Instance{{Host: "127.0.0.1:8081", Index: 0}, {Host: "127.0.0.1:8080", Index: 1}}
	h = readHistory(t, importBytes(t, importers.HAR, data, o))
	require.Equal(t, []string{"http://127.0.0.1:8081", "http://127.0.0.1:8080"}, h.Run.Instances)
	require.Equal(t, 1, h.Events[0].Instance)

	o.Instances = []importers.Instance{{Host: "127.0.0.1:8080", Index: 0}, {Host: "LOCALHOST:8081", Index: 0}}
	h = readHistory(t, importBytes(t, importers.HAR, data, o))
	require.Len(t, h.Run.Instances, 1, "several hosts may be one instance")
	assert.Contains(t, strings.Join(h.Run.Notes, "\n"), "skipped 12 requests to hosts without an InstanceMap entry: 127.0.0.1:8081 (12)")
}

func TestImportGzip(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "k6-ok.json"))
	require.NoError(t, err)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(data)
	require.NoError(t, zw.Close())
	o := importers.Options{Policy: policy.Default(), KeyTag: "key", Name: "k6-ok.json"}
	require.Equal(t, string(importBytes(t, importers.K6, data, o)), string(importBytes(t, importers.K6, z.Bytes(), o)), "k6 json=FILE.gz is read as written")
}

func TestImportErrors(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		return string(b)
	}
	vegetaLine := strings.SplitAfter(read("vegeta-ok.json"), "\n")[0]
	k6 := read("k6-ok.json")
	k6Lines := strings.SplitAfter(k6, "\n")
	harOK := read("har-ok.har")
	def := policy.Default()
	query := loadPolicy(t, "policy-query.yaml")
	for _, tc := range []struct {
		name, format, data string
		opts               importers.Options
		input              bool // an *InputError (exit 2 in the CLI)
		want               []string
	}{
		{"empty vegeta", importers.Vegeta, "", importers.Options{}, true, []string{"in.txt: the file is empty: want vegeta results"}},
		{"blank k6", importers.K6, "\n  \n", importers.Options{}, true, []string{"in.txt: the file is empty: want k6 JSON output"}},
		{"empty HAR", importers.HAR, "", importers.Options{}, true, []string{"in.txt: the file is empty: want HAR 1.2"}},
		{"k6 output as vegeta", importers.Vegeta, k6, importers.Options{}, true, []string{"in.txt:1:", `no "timestamp" field`, "vegeta encode --to json"}},
		{"text as vegeta", importers.Vegeta, "hello\nworld\n", importers.Options{}, true, []string{"in.txt: not vegeta results: neither JSON lines"}},
		{"bad JSON on line 3 of vegeta", importers.Vegeta, vegetaLine + vegetaLine + "{\"code\":\n", importers.Options{}, true, []string{"in.txt:3: not vegeta results", "unexpected end of JSON"}},
		{"vegeta as k6", importers.K6, vegetaLine, importers.Options{}, true, []string{"in.txt:1: not k6 JSON output", `"type" is ""`}},
		{"k6 point without status", importers.K6, k6Lines[0] + strings.Replace(k6Lines[7], `"status":"200",`, "", 1), importers.Options{KeyTag: "key"}, true, []string{"in.txt:2:", "without a status tag"}},
		{"k6 with no HTTP requests", importers.K6, strings.Join(k6Lines[:4], ""), importers.Options{}, true, []string{"in.txt: no http_req_duration points in 4 lines"}},
		{"k6 as HAR", importers.HAR, k6, importers.Options{}, true, []string{"in.txt: not a HAR file: line 2, column 1:", "after top-level value"}},
		{"JSON that is not HAR", importers.HAR, `{"entries": []}`, importers.Options{}, true, []string{`in.txt: not a HAR file: no "log" object`}},
		{"HAR with a wrong type", importers.HAR, "{\"log\": {\n \"entries\": [{\"time\": \"soon\"}]}}", importers.Options{}, true, []string{"in.txt: not a HAR file: line 2, column", "log.entries.time is a JSON string, want float64"}},
		{"HAR bad date", importers.HAR, strings.Replace(harOK, "2025-03-04T09:20:00.700Z", "yesterday", 1), importers.Options{Instances: []importers.Instance{{Host: "127.0.0.1:8080"}}}, true, []string{"in.txt: log.entries[17]: startedDateTime \"yesterday\""}},
		{"HAR with a CDN request and no mapping", importers.HAR, harOK, importers.Options{}, true, []string{"in.txt: log.entries[0]: no key for this request: the request has no header X-API-Key; give Importer.Key"}},
		{"HAR to hosts not mapped", importers.HAR, harOK, importers.Options{Instances: []importers.Instance{{Host: "10.0.0.1:80"}}}, true, []string{"no request went to a host given in InstanceMap; the file's hosts: 127.0.0.1:8080 (19), cdn.example.com (1)"}},
		{"vegeta with a header identity", importers.Vegeta, vegetaLine, importers.Options{Policy: def}, true, []string{"in.txt:1: no key for this request: request headers are not kept in vegeta results", "give Importer.Key, or Importer.KeyTag attack"}},
		{"k6 key tag missing", importers.K6, k6, importers.Options{KeyTag: "tenant"}, true, []string{"in.txt:8: no key", "(the tag tenant is missing or empty)"}},
		{"key tag on HAR", importers.HAR, harOK, importers.Options{KeyTag: "x"}, false, []string{"Importer.KeyTag does not apply to HAR 1.2"}},
		{"vegeta key tag other than attack", importers.Vegeta, vegetaLine, importers.Options{KeyTag: "seq"}, false, []string{`Importer.KeyTag "seq": in vegeta results the key can only be in attack`}},
		{"instance gap", importers.Vegeta, vegetaLine, importers.Options{Policy: query, Instances: []importers.Instance{{Host: "a", Index: 1}}}, false, []string{"instances are numbered 0…1, but no host is mapped to 0"}},
		{"unknown format", "jmeter", "x", importers.Options{}, false, []string{`unknown format "jmeter": want vegeta, k6, har`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.Policy == nil {
				o.Policy = def
				if tc.format == importers.Vegeta {
					o.Policy = query
				}
			}
			o.Name = "in.txt"
			_, err := importers.Import(tc.format, strings.NewReader(tc.data), history.NewWriter(&bytes.Buffer{}), o)
			require.Error(t, err)
			var ie *importers.InputError
			require.Equal(t, tc.input, errors.As(err, &ie), "%v", err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestJudgeableAndComplete(t *testing.T) {
	k6 := history.Run{Env: importers.EnvPrefix + importers.K6}
	p, notes := importers.Judgeable(policy.Default(), k6)
	require.False(t, p.Headers.RetryAfter)
	require.False(t, p.Headers.RateLimit.Declared())
	require.False(t, p.Headers.XRateLimit)
	require.True(t, policy.Default().Headers.RetryAfter, "the policy given is not changed")
	require.Contains(t, notes[0], "keeps no response headers")

	for _, run := range []history.Run{{Env: "import:vegeta"}, {Env: "import:har"}, {Env: "import:locust"}, {Env: "embedded"}} {
		p, notes := importers.Judgeable(policy.Default(), run)
		require.True(t, p.Headers.RetryAfter, run.Env)
		require.Empty(t, notes)
	}

	h := &history.History{Run: history.Run{Env: "import:locust"}, Events: []history.Event{{Sent: 5, Recv: 9}, {Sent: 1, Recv: 3}}}
	require.True(t, importers.Complete(h))
	require.Equal(t, &history.End{Elapsed: 9, Requests: 2}, h.End)
	require.False(t, h.Interrupted())
	require.False(t, importers.Complete(h), "once")

	live := &history.History{Run: history.Run{Env: "embedded"}}
	require.False(t, importers.Complete(live), "a live run without an end record was cut off")
	require.Nil(t, live.End)
}

// TestImportRefusesTimesAHistoryCannotHold: timestamps before 1970 or from
// 2200, latencies past maxLatencyMs and spans over 50 years are input
// errors naming the record (issue 26 item 13: 9999 and a HAR time of 1e308
// wrapped int64 and wrote histories check refused).
func TestImportRefusesTimesAHistoryCannotHold(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		return string(b)
	}
	vegetaLine := strings.SplitAfter(read("vegeta-ok.json"), "\n")[0]
	vegetaAt := func(ts string) string {
		return strings.Replace(vegetaLine, "2026-12-01T11:40:46.655582364Z", ts, 1)
	}
	k6Lines := strings.SplitAfter(read("k6-ok.json"), "\n")
	harOK := read("har-ok.har")
	har := importers.Options{Instances: []importers.Instance{{Host: "127.0.0.1:8080"}}}
	for _, tc := range []struct {
		name, format, data string
		opts               importers.Options
		want               string
	}{
		{"vegeta in 9999", importers.Vegeta, vegetaAt("9999-01-01T00:00:00Z"), importers.Options{},
			"in.txt:1: timestamp 9999-01-01T00:00:00Z is out of range: want an instant from 1970-01-01 to 2200-01-01"},
		{"vegeta in 1969", importers.Vegeta, vegetaAt("1969-12-31T23:59:59Z"), importers.Options{},
			"in.txt:1: timestamp 1969-12-31T23:59:59Z is out of range"},
		{"vegeta from 1970 to 2026", importers.Vegeta, vegetaAt("1970-01-01T00:00:00Z") + vegetaLine, importers.Options{},
			"in.txt: the requests span more than 50 years"},
		{"vegeta latency of 292 years", importers.Vegeta, strings.Replace(vegetaLine, `"latency":746613`, `"latency":9223372036854775807`, 1), importers.Options{},
			"in.txt:1: latency 9223372036854775807 ns: want at most 1e+09 ms"},
		{"k6 in 9999", importers.K6, k6Lines[0] + strings.Replace(k6Lines[7], "2025-03-04T10:15:00.0120652+01:00", "9999-03-04T10:15:00Z", 1), importers.Options{KeyTag: "key"},
			"in.txt:2: time 9999-03-04T10:15:00Z is out of range"},
		{"HAR time 1e308", importers.HAR, strings.Replace(harOK, `"time": 8.412`, `"time": 1e308`, 1), har,
			`log.entries[0]: want "time" (total ms), 0 … 1e+09`},
		{"HAR in 9999", importers.HAR, strings.Replace(harOK, "2025-03-04T09:20:00.012Z", "9999-03-04T09:20:00.012Z", 1), har,
			"log.entries[0]: startedDateTime 9999-03-04T09:20:00.012Z is out of range"},
		{"HAR at the Unix epoch less its resolution", importers.HAR, strings.Replace(harOK, "2025-03-04T09:20:00.100Z", "1970-01-01T00:00:00Z", 1), har,
			"the first request starts at 1969-12-31T23:59:59"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Policy = loadPolicy(t, "policy-query.yaml")
			if tc.format != importers.Vegeta {
				o.Policy = policy.Default()
			}
			o.Name = "in.txt"
			_, err := importers.Import(tc.format, strings.NewReader(tc.data), history.NewWriter(&bytes.Buffer{}), o)
			require.Error(t, err)
			var ie *importers.InputError
			require.True(t, errors.As(err, &ie), "%v", err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
