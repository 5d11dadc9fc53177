package calibrate

import (
	"encoding/json"
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
