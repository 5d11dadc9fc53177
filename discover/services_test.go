package discover_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/limiters/thirdparty"
	"github.com/rlverify/rlverify/policy"
)

var update = flag.Bool("update", false, "rewrite docs/discover.md's table from this run")

// truth is a limit a service is known to enforce.
type truth struct {
	family policy.Algorithm
	k      float64 // K or N
	r      float64 // r per second (buckets)
	w      float64 // W in seconds (windows)
	anchor string  // windows
	counts *bool   // refused requests cost
}

func (tr truth) String() string {
	if tr.family.Bucketed() {
		return fmt.Sprintf("%s K=%g r=%g/s", tr.family, tr.k, tr.r)
	}
	s := fmt.Sprintf("%s N=%g W=%gs", tr.family, tr.k, tr.w)
	if tr.anchor != "" {
		s += " anchor " + tr.anchor
	}
	return s
}

// known is a service we did not write, whose true policy is known.
type known struct {
	name  string
	tier  string // the tier measured against truth
	truth truth
	start func(t *testing.T) discover.Options
	// open, when set, says why discovery cannot pin this service's family:
	// it must then leave the family open (never a wrong one) and still get
	// N and whether refusals cost right.
	open string
}

func mustT[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

func serve(t *testing.T, h http.Handler, path string) []string {
	url, stop := testsvc.Serve(h)
	t.Cleanup(stop)
	return []string{url + path}
}

// ululeService is a small service around github.com/ulule/limiter/v3 (a
// fixed window opened by a key's first request), keyed on X-API-Key.
func ululeService(t *testing.T, n int64, w time.Duration) http.Handler {
	l := policy.Limit{Algorithm: policy.FixedWindow, Count: n, Window: policy.Duration(w)}
	p := &policy.Policy{Name: "ulule", Tiers: []policy.Tier{{Name: "all", Limits: []policy.Limit{l}}}, DefaultTier: "all"}
	require.NoError(t, p.Validate())
	lim, err := thirdparty.NewUlule(p.Tiers[0].Limits)
	require.NoError(t, err)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		if key == "" {
			http.Error(rw, "no key", http.StatusUnauthorized)
			return
		}
		d, err := lim.Allow(r.Context(), time.Now(), key, 1)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.Header().Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
		rw.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(max(d.Remaining, 0), 10))
		if !d.Allowed {
			headers.SetRetryAfter(rw.Header(), d.RetryAfter)
			http.Error(rw, "slow down", http.StatusTooManyRequests)
			return
		}
		_, _ = rw.Write([]byte("ok\n"))
	})
}

// gatewayService starts a gateway configured from a one-tier policy.
func gatewayService(t *testing.T, gw catalog.Gateway, yaml string) []string {
	if err := gateway.Available(gw.Kind); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: install it)", err)
		}
		t.Skipf("%v", err)
	}
	p, err := policy.Parse(t.Name()+".yaml", []byte(yaml))
	require.NoError(t, err)
	st, err := gateway.Environment{Gateway: gw}.Start(context.Background(), envs.Spec{Policy: p, Instances: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return []string{st.Instances[0] + "/api"}
}

func services() []known {
	no, yes := false, true
	return []known{
		{"testsvc orders (bearer keys, POST, free tier)", "free", truth{family: policy.TokenBucket, k: 5, r: 2.5, counts: &no}, func(t *testing.T) discover.Options {
			o := mustT[*testsvc.Orders](t)(testsvc.NewOrders(testsvc.OrdersConfig{Keys: testsvc.DefaultOrdersKeys()}))
			pol := mustT[*policy.Policy](t)(policy.Load("../internal/testsvc/policies/orders.yaml"))
			kf := mustT[*attacks.KeyFile](t)(attacks.LoadKeyFile("../internal/testsvc/policies/orders-keys.yaml", pol))
			return discover.Options{Targets: serve(t, o, "/v1/orders"), Identity: policy.Identity{In: policy.InBearer}, Keys: kf,
				Request: attacks.Request{Method: "POST", Body: `{"sku":"a"}`, Headers: map[string]string{"Content-Type": "application/json"}}}
		}, ""},
		{"testsvc windowed", "all", truth{family: policy.FixedWindow, k: 10, w: 2, anchor: policy.AnchorFirst}, func(t *testing.T) discover.Options {
			w := mustT[*testsvc.Windowed](t)(testsvc.NewWindowed(testsvc.WindowedConfig{}))
			return discover.Options{Targets: serve(t, w, "/search/x"), Identity: policy.Identity{In: policy.InQuery, Name: "api_key"}}
		}, ""},
		{"testsvc windowed, epoch-aligned", "all", truth{family: policy.FixedWindow, k: 8, w: 2, anchor: policy.AnchorEpoch}, func(t *testing.T) discover.Options {
			w := mustT[*testsvc.Windowed](t)(testsvc.NewWindowed(testsvc.WindowedConfig{Limit: 8, Epoch: true}))
			return discover.Options{Targets: serve(t, w, "/search/x"), Identity: policy.Identity{In: policy.InQuery, Name: "api_key"}}
		}, ""},
		{"testsvc windowed, sliding counter", "all", truth{family: policy.SlidingCounter, k: 10, w: 2, anchor: policy.AnchorEpoch}, func(t *testing.T) discover.Options {
			w := mustT[*testsvc.Windowed](t)(testsvc.NewWindowed(testsvc.WindowedConfig{Sliding: true}))
			return discover.Options{Targets: serve(t, w, "/search/x"), Identity: policy.Identity{In: policy.InQuery, Name: "api_key"}}
		}, ""},
		{"testsvc sessions (cookie)", "all", truth{family: policy.SlidingLog, k: 6, w: 2, counts: &no}, func(t *testing.T) discover.Options {
			s := mustT[*testsvc.Sessions](t)(testsvc.NewSessions(testsvc.SessionsConfig{}))
			return discover.Options{Targets: serve(t, s, "/app/x"), Identity: policy.Identity{In: policy.InCookie, Name: "session"}}
		}, ""},
		{"ulule/limiter v3 (memory store)", "all", truth{family: policy.FixedWindow, k: 8, w: 2, anchor: policy.AnchorFirst}, func(t *testing.T) discover.Options {
			return discover.Options{Targets: serve(t, ululeService(t, 8, 2*time.Second), "/x")}
		}, ""},
		{"nginx limit_req (burst, nodelay)", "all", truth{family: policy.TokenBucket, k: 5, r: 2.5}, func(t *testing.T) discover.Options {
			return discover.Options{Targets: gatewayService(t, catalog.Gateway{Kind: catalog.NGINX, Mode: "nodelay"}, `
name: nginx
tiers:
  - name: free
    key_prefix: ""
    limits: [{algorithm: token-bucket, capacity: 5, rate: 2.5/s}]
default_tier: free
headers: {retry_after: true, ratelimit: none, x_ratelimit: false}
`)}
		}, ""},
		{"HAProxy stick table (http_req_rate)", "all", truth{family: policy.SlidingCounter, k: 5, w: 2, anchor: policy.AnchorFirst, counts: &yes}, func(t *testing.T) discover.Options {
			return discover.Options{Targets: gatewayService(t, catalog.Gateway{Kind: catalog.HAProxy}, `
name: haproxy
tiers:
  - name: free
    key_prefix: ""
    limits: [{algorithm: sliding-counter, limit: 5, window: 2s}]
default_tier: free
headers: {retry_after: true, ratelimit: none, x_ratelimit: false}
`)}
		}, ""},
		// gubernator's leaky bucket behind the reference front (built with
		// -tags gubernator, as CI's units are; skipped without it).
		{"gubernator v2.13.0 (LEAKY_BUCKET, 3 peers)", "all", truth{family: policy.TokenBucket, k: 5, r: 2.5}, func(t *testing.T) discover.Options {
			return discover.Options{Targets: gatewayService(t, catalog.Gateway{Kind: catalog.Gubernator, Mode: "local"}, `
name: gubernator
tiers:
  - name: free
    key_prefix: ""
    limits: [{algorithm: token-bucket, capacity: 5, rate: 2.5/s}]
default_tier: free
headers: {retry_after: true, ratelimit: none, x_ratelimit: true}
`)}
		}, ""},
	}
}

// within reports whether x lies in n's range.
func within(x float64, n discover.Number) bool {
	return n.Pinned && x >= n.Low-1e-9 && x <= n.High+1e-9
}

type row struct {
	service, truth, verdict, found string
	took                           time.Duration
}

// judge compares what was discovered of tier with the truth: the family,
// then every true number within its stated range. For a service whose
// family cannot be pinned (open), the family must be left open and only
// N and the cost of refusals are judged.
func judge(tr truth, t discover.Tier, open string) (string, []string) {
	var bad []string
	if open != "" {
		if t.Family != "" {
			bad = append(bad, fmt.Sprintf("family %s claimed, want it left open (%s)", t.Family, open))
		}
		if !within(tr.k, t.Capacity) {
			bad = append(bad, fmt.Sprintf("K/N %s does not hold %g", t.Capacity.Range(), tr.k))
		}
		if tr.counts != nil && (t.RefusedCost == nil || *t.RefusedCost != *tr.counts) {
			bad = append(bad, fmt.Sprintf("refused cost %v, want %v", t.RefusedCost, *tr.counts))
		}
		if len(bad) > 0 {
			return "MISSED: " + strings.Join(bad, "; "), bad
		}
		return "partly: N and refusals' cost recovered, family left open (" + open + ")", nil
	}
	if t.Family != tr.family {
		bad = append(bad, fmt.Sprintf("family %s, want %s", t.Family, tr.family))
	}
	if !within(tr.k, t.Capacity) {
		bad = append(bad, fmt.Sprintf("K/N %s does not hold %g", t.Capacity.Range(), tr.k))
	}
	if tr.family.Bucketed() && !within(tr.r, t.Rate) {
		bad = append(bad, fmt.Sprintf("r %s does not hold %g", t.Rate.Range(), tr.r))
	}
	if !tr.family.Bucketed() && !within(tr.w, t.Window) {
		bad = append(bad, fmt.Sprintf("W %s does not hold %g", t.Window.Range(), tr.w))
	}
	if tr.anchor != "" && t.Anchor != "" && t.Anchor != tr.anchor { // left open is honest, wrong is not
		bad = append(bad, fmt.Sprintf("anchor %q, want %s", t.Anchor, tr.anchor))
	}
	if tr.counts != nil && (t.RefusedCost == nil || *t.RefusedCost != *tr.counts) {
		bad = append(bad, fmt.Sprintf("refused cost %v, want %v", t.RefusedCost, *tr.counts))
	}
	if len(bad) > 0 {
		return "MISSED: " + strings.Join(bad, "; "), bad
	}
	return "recovered (family, every number within its range)", nil
}

// TestDiscoverServicesWeDidNotWrite: discovery recovers the family and the
// numbers of services whose true policy is known, each true number within
// the range it states, and the policy it writes loads. The table in
// docs/discover.md is this test's output (-update rewrites it; its service,
// true policy and verdict columns must match).
func TestDiscoverServicesWeDidNotWrite(t *testing.T) {
	svcs := services()
	rows := make([]row, len(svcs))
	var mu sync.Mutex
	t.Run("group", func(t *testing.T) {
		for i, s := range svcs {
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				o := s.start(t)
				o.Budget = 40 * time.Second
				res, err := discover.Run(context.Background(), o)
				require.NoError(t, err)
				y, p, err := discover.Policy(res)
				require.NoError(t, err, "the policy written loads")
				require.NotNil(t, p)
				for _, what := range []string{"the failure mode", "global guards", "several limits on one key"} {
					assert.Contains(t, string(y), "# NOT PROBED: "+what, "what discovery does not measure is said, not left silent")
				}
				var tier *discover.Tier
				for j := range res.Tiers {
					if res.Tiers[j].Name == s.tier {
						tier = &res.Tiers[j]
					}
				}
				require.NotNil(t, tier, "tier %s", s.tier)
				verdict, bad := judge(s.truth, *tier, s.open)
				assert.Empty(t, bad, "%s: %s", s.name, discover.Describe(*tier))
				mu.Lock()
				rows[i] = row{s.name, s.truth.String(), verdict, discover.Describe(*tier), res.Elapsed}
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	for i, s := range svcs {
		if rows[i].service == "" {
			rows[i].service = s.name // skipped: its committed row stands
		}
	}
	checkTable(t, rows)
}

const tableStart, tableEnd = "<!-- discover-table:start -->", "<!-- discover-table:end -->"

// render is the table of rows; a row that was skipped (its program is not
// installed, or gubernator not built in) keeps its line from committed.
func render(rows []row, committed string) string {
	old := map[string]string{}
	for _, l := range strings.Split(committed, "\n") {
		if cells := strings.Split(l, "|"); len(cells) > 2 {
			old[strings.TrimSpace(cells[1])] = l
		}
	}
	var b strings.Builder
	b.WriteString("| service | true policy | recovered? | discovered | time taken |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.verdict == "" {
			if l, ok := old[r.service]; ok {
				b.WriteString(l + "\n")
			}
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.service, r.truth, r.verdict, strings.ReplaceAll(r.found, "|", "/"), r.took.Round(100*time.Millisecond))
	}
	return b.String()
}

// stable are a table's rows without their measured columns (discovered
// numbers and time vary from run to run).
func stable(table string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		out = append(out, strings.Join(cells[:4], "|"))
	}
	return out
}

func checkTable(t *testing.T, rows []row) {
	file := filepath.Join("..", "docs", "discover.md")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	doc := string(b)
	i, j := strings.Index(doc, tableStart), strings.Index(doc, tableEnd)
	require.True(t, i >= 0 && j > i, "docs/discover.md holds the table between %s and %s", tableStart, tableEnd)
	committed := doc[i+len(tableStart) : j]
	got := render(rows, committed)
	if *update {
		doc = doc[:i+len(tableStart)] + "\n" + got + doc[j:]
		require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))
		return
	}
	assert.Equal(t, stable(committed), stable(got), "docs/discover.md's table: go test ./discover -run TestDiscoverServicesWeDidNotWrite -update")
}

// TestDiscoverStability runs every service's discovery RLVERIFY_DISCOVER_RUNS
// times (all services at once, as the table test does), optionally beside
// RLVERIFY_DISCOVER_HOG busy-looping processes, and fails unless every run
// recovers what the table says. By hand only (docs/discover.md has the
// last result):
//
//	RLVERIFY_DISCOVER_RUNS=10 RLVERIFY_DISCOVER_HOG=2 go test ./discover -run TestDiscoverStability -timeout 60m -v
func TestDiscoverStability(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("RLVERIFY_DISCOVER_RUNS"))
	if runs <= 0 {
		t.Skip("set RLVERIFY_DISCOVER_RUNS=10 (and RLVERIFY_DISCOVER_HOG=2 for a CPU hog beside it)")
	}
	if hogs, _ := strconv.Atoi(os.Getenv("RLVERIFY_DISCOVER_HOG")); hogs > 0 {
		for range hogs {
			cmd := exec.Command("sh", "-c", "while :; do :; done")
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		}
	}
	svcs := services()
	ok := make([]int, len(svcs))
	took := make([]time.Duration, len(svcs))
	var mu sync.Mutex
	for run := 1; run <= runs; run++ {
		t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
			for i, s := range svcs {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					o := s.start(t)
					o.Budget = 40 * time.Second
					res, err := discover.Run(context.Background(), o)
					require.NoError(t, err)
					for _, tier := range res.Tiers {
						if tier.Name != s.tier {
							continue
						}
						_, bad := judge(s.truth, tier, s.open)
						if len(bad) > 0 {
							// The evidence, to find why.
							y, _, _ := discover.Policy(res)
							t.Logf("%s run %d: the policy written:\n%s", s.name, run, y)
						}
						assert.Empty(t, bad, "%s run %d: %s", s.name, run, discover.Describe(tier))
						mu.Lock()
						if len(bad) == 0 {
							ok[i]++
						}
						took[i] = max(took[i], res.Elapsed)
						mu.Unlock()
					}
				})
			}
		})
	}
	for i, s := range svcs {
		t.Logf("%-45s %d of %d runs recovered, longest %s", s.name, ok[i], runs, took[i].Round(100*time.Millisecond))
	}
}
