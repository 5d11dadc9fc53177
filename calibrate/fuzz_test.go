package calibrate

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzJSONLine: whatever the line, the one-pass JSON reader never accepts
// text that is not JSON, and the key it reads is the one encoding/json
// reads (up to invalid UTF-8, which it keeps as bytes).
func FuzzJSONLine(f *testing.F) {
	for _, s := range []string{
		`{"time":"2026-12-01T10:00:00Z","status":200,"k":"a"}`,
		`{"time":1764583200.5,"k":"b\"\\c","n":{"k":"decoy"},"a":[1,{"k":2}]}`,
		`{"time":1764583200,"k":12345}`,
		`{"time":1764583200,"k":null}`,
		`{"time":1764583200,"k":"x"} `,
		`{"time":0,"k":2,"k":5}`,      // CI found it: a repeated field is refused, never half read
		`{"time":0,"\u006b":"spelt"}`, // an escaped name is the same name
	} {
		f.Add(s)
	}
	o := ReadOptions{Format: JSON, KeyField: "k"}
	lp, err := newLineParser(&o)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var rec parsed
		if lp.parse([]byte(line), &rec) != "" {
			return
		}
		if !json.Valid([]byte(line)) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses as an object: %v", line, err)
		}
		raw, ok := v["k"]
		want := ""
		switch {
		case !ok || string(raw) == "null":
		case json.Unmarshal(raw, &want) == nil:
		default:
			want = string(raw)
		}
		if ok && (raw[0] == '{' || raw[0] == '[' || raw[0] == 't' || raw[0] == 'f') {
			return // containers and booleans: not keys anyone logs
		}
		// Keys keep their bytes; encoding/json turns invalid UTF-8 into U+FFFD.
		if string([]rune(string(rec.key))) != want {
			t.Fatalf("%q: key %q, encoding/json says %q", line, rec.key, want)
		}
	})
}

// FuzzCombinedLine: any line is read or refused with a reason, never a
// panic; what is read comes from the line.
func FuzzCombinedLine(f *testing.F) {
	f.Add(`10.0.0.1 - - [01/Dec/2026:09:00:00 +0000] "GET /v1/items?x=1 HTTP/1.1" 200 512 "-" "curl/8" "free-a" "paid"`)
	f.Add(`10.0.0.1 - bob [01/Dec/2026:09:00:00.123 -0130] "GET / HTTP/1.1" 429 0 "-" "-"`)
	f.Add(`::1 - - [2026-12-01T09:00:00Z] "POST /a\"b HTTP/2" 503 - "-" "x" key`)
	f.Add(`10.0.0.1 - - [1764579600.25] "-" 200 1`)
	o := ReadOptions{Format: Combined, KeyField: "extra1", TierField: "extra2"}
	lp, err := newLineParser(&o)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var rec parsed
		if lp.parse([]byte(line), &rec) != "" {
			return
		}
		if !strings.Contains(line, string(rec.key)) || !strings.Contains(line, string(rec.tier)) || !strings.Contains(line, string(rec.route)) {
			t.Fatalf("%q: read key %q, tier %q, route %q that are not in the line", line, rec.key, rec.tier, rec.route)
		}
		if rec.status < 100 || rec.status > 999 {
			t.Fatalf("%q: status %d", line, rec.status)
		}
	})
}
