package gateway

import (
	"net/http"
	"strings"

	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// sinkHandler is the upstream of nginx and HAProxy: the stack's sink,
// counting each forwarded request under the key the gateway limited on
// (sent in service.SinkKeyHeader), spelled as the declared identity
// normalises it so arrivals line up with the history's keys.
type sinkHandler struct {
	sink *service.Sink
	id   policy.Identity
}

func (h sinkHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.WriteHeader(http.StatusOK)
		return
	}
	key := r.Header.Get(service.SinkKeyHeader)
	if h.id.Trimmed() {
		key = strings.TrimSpace(key)
	}
	if h.id.CaseFolded() {
		key = strings.ToLower(key)
	}
	if key == "" {
		key = "(anonymous)"
	}
	h.sink.Record(key)
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}
