package importers_test

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"golang.org/x/time/rate"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/importers"
)

// bucketService is the service the vegeta samples are recorded against:
// the key in the api_key query parameter, a token bucket of 10 refilled at
// 5/s per key (x/time/rate), 429 with Retry-After when it is empty.
type bucketService struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func (s *bucketService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("api_key")
	if key == "" {
		http.Error(w, "missing api_key", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	if s.buckets == nil {
		s.buckets = map[string]*rate.Limiter{}
	}
	lim, ok := s.buckets[key]
	if !ok {
		lim = rate.NewLimiter(5, 10)
		s.buckets[key] = lim
	}
	s.mu.Unlock()
	now := time.Now()
	if lim.AllowN(now, 1) {
		_, _ = w.Write([]byte(`{"ok":true}`))
		return
	}
	wait := (1 - lim.TokensAt(now)) / 5
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait))))
	http.Error(w, "rate limited", http.StatusTooManyRequests)
}

// vegetaRun attacks the instances round-robin with vegeta's library (what
// the vegeta CLI runs) at 200/s for 300ms and returns the results in
// vegeta's three encodings: JSON (vegeta encode --to json), gob (vegeta
// attack's output) and CSV.
func vegetaRun(t *testing.T, instances ...http.Handler) (jsonl, gob, csv []byte) {
	t.Helper()
	var targets []vegeta.Target
	for _, h := range instances {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		targets = append(targets, vegeta.Target{Method: "GET", URL: srv.URL + "/v1/items?api_key=free-vegeta"})
	}
	atk := vegeta.NewAttacker(vegeta.Workers(4), vegeta.MaxWorkers(16), vegeta.Timeout(10*time.Second))
	var j, g, c bytes.Buffer
	encJ, encG, encC := vegeta.NewJSONEncoder(&j), vegeta.NewEncoder(&g), vegeta.NewCSVEncoder(&c)
	for res := range atk.Attack(vegeta.NewStaticTargeter(targets...), vegeta.ConstantPacer{Freq: 200, Per: time.Second}, 300*time.Millisecond, "burst") {
		require.NoError(t, encJ.Encode(res))
		require.NoError(t, encG.Encode(res))
		require.NoError(t, encC.Encode(res))
	}
	return j.Bytes(), g.Bytes(), c.Bytes()
}

func verdictsOf(t *testing.T, hist []byte, policyFile string) map[string]checks.Verdict {
	t.Helper()
	h := readHistory(t, hist)
	rs := checks.Judge(h, loadPolicy(t, policyFile), checks.Options{MaxErrorRate: checks.DefaultMaxErrorRate})
	v := map[string]checks.Verdict{}
	for _, r := range rs {
		v[r.Name] = r.Verdict
	}
	return v
}

// TestVegetaLive records fresh vegeta results against a correct limiter
// (two instances sharing one bucket per key) and an overselling one (each
// instance its own bucket), imports them from every vegeta encoding and
// judges them. With -update it also rewrites the committed samples that
// the golden tests convert.
func TestVegetaLive(t *testing.T) {
	shared := &bucketService{}
	for _, tc := range []struct {
		name      string
		instances []http.Handler
		want      map[string]checks.Verdict
	}{
		{"vegeta-ok", []http.Handler{shared, shared}, map[string]checks.Verdict{"oversell": checks.Pass, "instances": checks.Pass, "evidence": checks.Pass}},
		// Two instances each with their own bucket: the oversell is the
		// per-instance state instances names, so it explains oversell.
		{"vegeta-bad", []http.Handler{&bucketService{}, &bucketService{}}, map[string]checks.Verdict{"oversell": checks.Explained, "instances": checks.Fail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jsonl, gob, csv := vegetaRun(t, tc.instances...)
			opts := importers.Options{Policy: loadPolicy(t, "policy-query.yaml"), Name: tc.name + ".json"}
			fromJSON := importBytes(t, importers.Vegeta, jsonl, opts)
			require.Equal(t, string(fromJSON), string(importBytes(t, importers.Vegeta, gob, opts)), "gob results convert like JSON ones")
			require.Equal(t, string(fromJSON), string(importBytes(t, importers.Vegeta, csv, opts)), "CSV results convert like JSON ones")
			got := verdictsOf(t, fromJSON, "policy-query.yaml")
			for check, want := range tc.want {
				require.Equal(t, want, got[check], "%s: %v", check, got)
			}
			for check, v := range got {
				if tc.want["oversell"] == checks.Pass {
					require.Contains(t, []checks.Verdict{checks.Pass, checks.Skip}, v, "the correct limiter: %s is %s", check, v)
				}
			}
			if *update {
				require.NoError(t, os.WriteFile(filepath.Join("testdata", tc.name+".json"), jsonl, 0o644))
			}
		})
	}
}
