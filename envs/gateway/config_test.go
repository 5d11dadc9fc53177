package gateway

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policies"
	"github.com/rlverify/rlverify/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// testPolicies are shipped policies and the test ones under testdata.
var testPolicies = []string{"default", "seed-tiers", "global-guard", "bearer-cut", "query"}

func loadTestPolicy(t *testing.T, name string) *policy.Policy {
	t.Helper()
	if name == "default" {
		return policy.Default()
	}
	if b, ok := policies.Get(name); ok {
		p, err := policy.Parse("builtin:"+name, b)
		require.NoError(t, err)
		return p
	}
	p, err := policy.Load(filepath.Join("testdata", name+".yaml"))
	require.NoError(t, err)
	return p
}

// golden compares got with testdata/golden/name, rewriting it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test -update to create %s", file)
	assert.Equal(t, string(want), got, "%s differs; run go test -update and review the diff", file)
}

const (
	testListen   = "127.0.0.1:8080"
	testUpstream = "127.0.0.1:9090"
	testDir      = "/tmp/rlverify-nginx-test"
)

func nginxConfig(t *testing.T, pol *policy.Policy, s nginxSettings) string {
	t.Helper()
	p, err := planNginx(pol.WithAlgorithm(policy.TokenBucket))
	require.NoError(t, err)
	return renderNginx(p, s)
}

func haproxyConfig(t *testing.T, pol *policy.Policy) string {
	t.Helper()
	p, err := planHAProxy(pol.WithAlgorithm(policy.SlidingCounter))
	require.NoError(t, err)
	return renderHAProxy(p, haproxySettings{Listen: testListen, Upstream: testUpstream})
}

func TestNginxConfigGolden(t *testing.T) {
	for _, name := range testPolicies {
		t.Run(name, func(t *testing.T) {
			pol := loadTestPolicy(t, name)
			s := nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: testDir, NoDelay: true, Version: nginxVersion{1, 22, 1}}
			golden(t, name+".nginx.conf", nginxConfig(t, pol, s))
		})
	}
	t.Run("delay", func(t *testing.T) {
		s := nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: testDir, Version: nginxVersion{1, 22, 1}}
		golden(t, "default.nginx-delay.conf", nginxConfig(t, policy.Default(), s))
	})
	t.Run("delay declared", func(t *testing.T) {
		// burst=K−1+Q' delay=K−1: K at once, then Q' = min(Q, ⌊D·r⌋) wait.
		pol := policy.Default()
		pol.Delay = &policy.Delay{MaxWait: policy.Duration(600 * time.Millisecond), Queue: 20}
		require.NoError(t, pol.Validate())
		s := nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: testDir, Version: nginxVersion{1, 22, 1}}
		got := nginxConfig(t, pol, s)
		golden(t, "default.nginx-delay-declared.conf", got)
		assert.Contains(t, got, "limit_req zone=free_0 burst=12 delay=9;")
		assert.Contains(t, got, "limit_req zone=paid_0 burst=119 delay=99;")
	})
	t.Run("nginx-1.25", func(t *testing.T) {
		s := nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: testDir, NoDelay: true, Version: nginxVersion{1, 25, 3}}
		got := nginxConfig(t, policy.Default(), s)
		assert.Contains(t, got, `map $http_x_api_key $rl_raw { "~^(?<rl_first>[^,]*)" $rl_first; default ""; }`,
			"nginx 1.23+ joins repeated headers: the first occurrence is the part before the first comma")
	})
}

func TestHAProxyConfigGolden(t *testing.T) {
	for _, name := range testPolicies {
		t.Run(name, func(t *testing.T) {
			golden(t, name+".haproxy.cfg", haproxyConfig(t, loadTestPolicy(t, name)))
		})
	}
}

// The generated configurations are accepted by the installed programs.
func TestConfigsPassTheProgramsOwnCheck(t *testing.T) {
	for _, kind := range []string{"nginx", "haproxy"} {
		prog, err := findProgram(kind)
		if err != nil {
			t.Logf("skipping %s: %v", kind, err)
			continue
		}
		for _, name := range testPolicies {
			t.Run(kind+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				pol := loadTestPolicy(t, name)
				var conf string
				var args []string
				if kind == "nginx" {
					v, err := detectNginx(prog)
					require.NoError(t, err)
					conf = filepath.Join(dir, "nginx.conf")
					require.NoError(t, os.WriteFile(conf, []byte(nginxConfig(t, pol, nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: dir, NoDelay: true, Version: v})), 0o644))
					args = []string{"-t", "-q", "-p", dir + "/", "-c", conf, "-e", filepath.Join(dir, "error.log")}
				} else {
					conf = filepath.Join(dir, "haproxy.cfg")
					require.NoError(t, os.WriteFile(conf, []byte(haproxyConfig(t, pol)), 0o644))
					args = []string{"-c", "-q", "-f", conf}
				}
				out, err := exec.Command(prog, args...).CombinedOutput()
				require.NoError(t, err, "%s %s: %s", prog, strings.Join(args, " "), out)
			})
		}
	}
}

// inexpressible are the test policies a gateway refuses, with the reason.
var inexpressible = map[string]string{
	// A call carries one descriptor, which matches one rule.
	catalog.EnvoyRateLimit + "/global-guard": "the global limit",
	catalog.EnvoyRateLimit + "/bearer-cut":   "tier free declares 2 limits",
}

// TestHonestGolden pins what each gateway makes of each policy: the
// deviations and the honest policy.
func TestHonestGolden(t *testing.T) {
	for _, e := range catalog.All() {
		if e.Gateway == nil || (e.Gateway.Kind == catalog.NGINX && e.Gateway.Mode == "delay") {
			continue
		}
		for _, name := range testPolicies {
			t.Run(e.Name+"/"+name, func(t *testing.T) {
				pol := loadTestPolicy(t, name).WithAlgorithm(e.Algorithm)
				honest, devs, err := Honest(*e.Gateway, pol)
				if want := inexpressible[e.Gateway.Kind+"/"+name]; want != "" {
					require.ErrorContains(t, err, want)
					return
				}
				require.NoError(t, err)
				require.NoError(t, honest.Clone().Validate(), "the honest policy is valid")
				var b strings.Builder
				for _, d := range devs {
					fmt.Fprintf(&b, "# deviation: %s\n", d)
				}
				y, err := yaml.Marshal(honest)
				require.NoError(t, err)
				b.Write(y)
				golden(t, name+"."+strings.ReplaceAll(e.Name, "/", "_")+".honest.yaml", b.String())
				// The file the CLI writes loads back as the same policy.
				back, err := policy.Parse("honest.yaml", []byte(b.String()))
				require.NoError(t, err)
				assert.Equal(t, honest.Tiers, back.Tiers)
				assert.Equal(t, honest.Identity, back.Identity)
				assert.Equal(t, honest.Headers, back.Headers)
			})
		}
	}
}

func TestNginxRate(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want string
		eff  float64
	}{
		{5, "5r/s", 5},
		{2.5, "150r/m", 2.5},
		{100.0 / 60, "100r/m", 1.666},
		{1.0 / 7, "8r/m", 0.133},
		{1.0 / 60, "1r/m", 0.016},
	} {
		got, eff, err := nginxRate(tc.r)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "rate %g", tc.r)
		assert.InDelta(t, tc.eff, eff, 1e-9, "rate %g", tc.r)
		assert.LessOrEqual(t, eff, tc.r, "nginx never refills faster than declared")
	}
	_, _, err := nginxRate(1.0 / 120)
	require.ErrorContains(t, err, "below nginx's slowest, 1r/m")
}

func TestInexpressiblePolicies(t *testing.T) {
	base := "name: p\ntiers:\n  - name: free\n    key_prefix: %q\n    limits:\n%s"
	one := "      - capacity: 10\n        rate: 5/s\n"
	for _, tc := range []struct {
		name, kind, yaml, want string
	}{
		{"slower than 1r/m", catalog.NGINX, fmt.Sprintf(base, "free-", "      - capacity: 1\n        rate: 1/h\n"), "below nginx's slowest"},
		{"four limits", catalog.HAProxy, fmt.Sprintf(base, "free-", one+"      - capacity: 20\n        rate: 1/s\n      - capacity: 30\n        rate: 1/s\n      - capacity: 40\n        rate: 1/s\n"), "HAProxy tracks at most 3"},
		{"header nginx cannot name", catalog.NGINX, fmt.Sprintf(base, "free-", one) + "identity:\n  name: X.Key\n", "nginx variables cannot name"},
		{"unknown behaviour", catalog.Gubernator, fmt.Sprintf(base, "free-", one), "want global or local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := policy.Parse("p.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			_, _, err = Honest(catalog.Gateway{Kind: tc.kind, Mode: "sometimes"}, pol)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestEnvoyConfigGolden pins the envoyproxy/ratelimit configuration of each
// test policy it can express.
func TestEnvoyConfigGolden(t *testing.T) {
	for _, name := range testPolicies {
		if inexpressible[catalog.EnvoyRateLimit+"/"+name] != "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p, err := planEnvoy(loadTestPolicy(t, name).WithAlgorithm(policy.FixedWindow))
			require.NoError(t, err)
			conf, err := renderEnvoy(p)
			require.NoError(t, err)
			golden(t, name+".envoy-ratelimit.yaml", conf)
		})
	}
}

func TestEnvoyUnit(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		w    time.Duration
		unit string
		want int64
	}{
		{5, time.Second, "second", 5},
		{10, 2 * time.Second, "second", 5},
		{100, time.Minute, "minute", 100},
		{1, 100 * time.Millisecond, "second", 10},
		{3, 21 * time.Second, "minute", 8},
		{7, 90 * time.Second, "minute", 4},
		{1, 2 * time.Hour, "day", 12},
		{24, 24 * time.Hour, "day", 24},
	} {
		unit, n, err := envoyUnit(tc.n, tc.w)
		require.NoError(t, err)
		assert.Equal(t, tc.unit, unit, "%d per %s", tc.n, tc.w)
		assert.Equal(t, tc.want, n, "%d per %s", tc.n, tc.w)
	}
	_, _, err := envoyUnit(1, 48*time.Hour)
	require.ErrorContains(t, err, "below envoyproxy/ratelimit's slowest, 1 per day")
}
