package importers_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
)

// Issue 30: an imported history kept the real keys in plain text while
// attack --keys redacts them. Every key is now redacted in the key field
// and scrubbed from every other value (the query string, a header that
// echoes it, the notes); PlainKeys keeps them.
func TestImportRedactsKeys(t *testing.T) {
	const secret = "sk_live_0a1b2c3d"
	data := []byte(`{"log":{"entries":[{"startedDateTime":"2025-03-04T09:20:00.100Z","time":1,` +
		`"request":{"method":"GET","url":"http://h:1/x?api_key=` + secret + `","headers":[]},` +
		`"response":{"status":200,"headers":[{"name":"X-RateLimit-Limit","value":"` + secret + `"},{"name":"RateLimit-Policy","value":"\"` + strings.ToUpper(secret) + `\";q=10"}]}}]}}`)
	pol, err := policy.Parse("q.yaml", []byte("name: q\ntiers:\n  - name: live\n    key_prefix: sk_live_\n    limits: [{capacity: 10, rate: 5/s}]\nidentity: {in: query, name: api_key}\n"))
	require.NoError(t, err)
	out := importBytes(t, importers.HAR, data, importers.Options{Policy: pol})
	require.NotContains(t, string(out), secret)
	require.NotContains(t, strings.ToUpper(string(out)), strings.ToUpper(secret))
	h := readHistory(t, out)
	want := pol.RedactKey(secret, "live")
	require.Equal(t, want, h.Events[0].Key)
	require.True(t, strings.HasPrefix(want, "sk_live_…"), "the tier's prefix is kept: %s", want)
	require.Equal(t, "/x?api_key="+want, h.Events[0].Path)
	require.Equal(t, want, h.Events[0].XLimit)

	plain := readHistory(t, importBytes(t, importers.HAR, data, importers.Options{Policy: pol, PlainKeys: true}))
	require.Equal(t, secret, plain.Events[0].Key)

	// The --key KEY note names the key: scrubbed too.
	k6 := []byte(`{"type":"Point","metric":"http_req_duration","data":{"time":"2025-03-04T09:20:00.1Z","value":1,"tags":{"status":"200","url":"http://h:1/x"}}}` + "\n")
	out = importBytes(t, importers.K6, k6, importers.Options{Policy: pol, Key: secret})
	require.NotContains(t, string(out), secret)
}
