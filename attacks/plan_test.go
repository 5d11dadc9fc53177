package attacks

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

func TestBuiltinsParse(t *testing.T) {
	ps := Builtins()
	require.NotEmpty(t, ps)
	names := map[string]bool{}
	for _, p := range ps {
		names[p.Name] = true
		require.NotEmpty(t, p.Description, p.Name)
		require.NotEmpty(t, p.Proves, p.Name)
		b, ok := BuiltinYAML(p.Name)
		require.True(t, ok, "file name matches plan name %s", p.Name)
		require.NotEmpty(t, b)
	}
	for _, want := range []string{"concurrent-burst", "idle-refill", "boundary-burst"} {
		require.True(t, names[want], want)
	}
}

func TestPlanErrorsNameFileLineField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"wrong type", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: lots\n", "p.yaml:5: cannot unmarshal a string `lots` into int"},
		{"unknown field", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 3\n    colour: red\n", `p.yaml:6: unknown field "colour"`},
		{"bad cost", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 3\n    costs: [1, K*2]\n", "p.yaml:6: phases.0.costs: \"K*2\": want a whole number of tokens, K, or K+n / K-n"},
		{"negative cost", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 3\n    costs: [-1]\n", "p.yaml:6: phases.0.costs: \"-1\": want a whole number of tokens 0 … 65534"},
		{"costs of a boundary", "name: x\nphases:\n  - kind: boundary\n    key: a\n    requests: 3\n    costs: [2]\n", "p.yaml:6: phases.0.costs: field \"costs\" does not apply to a boundary phase"},
		{"unknown kind", "name: x\nphases:\n  - kind: explode\n", "p.yaml:3: phases.0.kind: unknown phase kind \"explode\""},
		{"field of another kind", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 3\n    rate: 5/s\n", "p.yaml:6: phases.0.rate: field \"rate\" does not apply to a burst phase"},
		{"missing key", "name: x\nphases:\n  - kind: idle\n    duration: 1s\n  - kind: burst\n    requests: 3\n", "p.yaml:5: phases.1.key: a burst phase needs a key"},
		{"negative requests", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: -3\n", "p.yaml:5: phases.0.requests"},
		{"huge burst", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 1000000000\n", "phases.0.requests"},
		{"bad rate", "name: x\nphases:\n  - kind: rate\n    key: a\n    rate: fast\n    duration: 1s\n", "p.yaml:5: rate \"fast\""},
		{"absurd rate", "name: x\nphases:\n  - kind: rate\n    key: a\n    rate: 1000000000/s\n    duration: 1s\n", "phases.0.rate"},
		{"bad duration", "name: x\nphases:\n  - kind: idle\n    duration: forever\n", "p.yaml:4: duration \"forever\""},
		{"idle needs one", "name: x\nphases:\n  - kind: idle\n", "p.yaml:3: phases.0: an idle phase needs"},
		{"no phases", "name: x\n", "p.yaml:1: phases: a plan needs at least one phase"},
		{"no name", "phases:\n  - kind: idle\n    duration: 1s\n", "p.yaml:1: name"},
		{"empty", "", "p.yaml: document is empty"},
		{"not yaml", "name: [x\n", "p.yaml:1"},
		{"two docs", "name: x\nphases:\n  - kind: idle\n    duration: 1s\n---\nname: y\n", "more than one YAML document"},
		{"fault action", "name: x\nphases:\n  - kind: fault\n    action: explode\n    fault: store-down\n", "p.yaml:4: phases.0.action"},
		{"tenant weight", "name: x\nphases:\n  - kind: tenants\n    rate: 5/s\n    duration: 1s\n    tenants:\n      - key: a\n        weight: -1\n", "p.yaml:7: phases.0.tenants.0"},
		{"retry without clients", "name: x\nphases:\n  - kind: retry\n    key: a\n", "p.yaml:3: phases.0.requests: a retry phase needs requests"},
		{"retry retries", "name: x\nphases:\n  - kind: retry\n    key: a\n    requests: 2\n    retries: 500\n", "p.yaml:6: phases.0.retries: 500"},
		{"retry jitter", "name: x\nphases:\n  - kind: retry\n    key: a\n    requests: 2\n    jitter: -1s\n", "p.yaml:6: phases.0.jitter"},
		{"retry huge jitter", "name: x\nphases:\n  - kind: retry\n    key: a\n    requests: 2\n    jitter: 2h\n", "p.yaml:6: phases.0.jitter: 2h0m0s: want 0 … 1m0s"},
		{"retry takes no rate", "name: x\nphases:\n  - kind: retry\n    key: a\n    requests: 2\n    rate: 1/s\n", "p.yaml:6: phases.0.rate: field \"rate\" does not apply to a retry phase"},
		{"spread burst too big", "name: x\nphases:\n  - kind: spread\n    key: a\n    requests: 20000\n", "p.yaml:5: phases.0.requests: 20000: without concurrency a spread is one burst"},
		{"spread bad instances", "name: x\nphases:\n  - kind: spread\n    key: a\n    requests: 2\n    instances: sticky\n", "p.yaml:6: phases.0.instances"},
		{"pinned beyond instances", "name: x\ninstances: 2\nphases:\n  - kind: spread\n    key: a\n    requests: 2\n    instances: pinned\n    instance: 2\n", "p.yaml:8: phases.0.instance: 2, but the plan asks for 2 instance(s)"},
		{"probe at", "name: x\nphases:\n  - kind: probe\n    key: a\n    at: later\n", "p.yaml:5: phases.0.at: \"later\": want retry-after, retry-after+DURATION (up to 10s) or a duration"},
		{"probe negative at", "name: x\nphases:\n  - kind: probe\n    key: a\n    at: -1s\n", "p.yaml:5: phases.0.at"},
		{"probe needs key", "name: x\nphases:\n  - kind: probe\n", "p.yaml:3: phases.0.key"},
		{"bypass variant", "name: x\nphases:\n  - kind: bypass\n    key: a\n    variants: [xff, cookie]\n", "p.yaml:5: phases.0.variants.1: \"cookie\""},
		{"bypass variant twice", "name: x\nphases:\n  - kind: bypass\n    key: a\n    variants: [case, case]\n", "phases.0.variants.1: \"case\" is listed twice"},
		{"bypass too big", "name: x\nphases:\n  - kind: bypass\n    key: a\n    requests: 50000\n", "p.yaml:5: phases.0.requests"},
		{"boundary align", "name: x\nphases:\n  - kind: boundary\n    key: a\n    align: moon\n", "p.yaml:5: phases.0.align"},
		{"fault needs faults", "name: x\nneeds: [redis]\nphases:\n  - kind: fault\n    action: inject\n    fault: store-down\n", "p.yaml:6: phases.0.fault: a plan with fault phases must declare it: needs: [faults]"},
		{"store fault needs redis", "name: x\nneeds: [faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: store-down\n", "p.yaml:6: phases.0.fault: store-down acts on the shared store"},
		{"store-slow latency", "name: x\nneeds: [redis, faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: store-slow\n", "p.yaml:4: phases.0.param: store-slow needs param"},
		{"store-slow negative", "name: x\nneeds: [redis, faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: store-slow\n    param: -5ms\n", "p.yaml:7: phases.0.param"},
		{"clock-skew needs param", "name: x\nneeds: [faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: clock-skew\n", "phases.0.param: clock-skew needs param"},
		{"clock-skew bad param", "name: x\nneeds: [faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: clock-skew\n    param: ahead\n", "p.yaml:7: phases.0.param: clock-skew needs param"},
		{"store-down param", "name: x\nneeds: [redis, faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: store-down\n    param: 5s\n", "p.yaml:7: phases.0.param: store-down takes no param"},
		{"clear with param", "name: x\nneeds: [faults]\nphases:\n  - kind: fault\n    action: clear\n    fault: clock-skew\n    param: 2s\n", "p.yaml:7: phases.0.param: clear takes no param"},
		{"instance on store fault", "name: x\nneeds: [redis, faults]\ninstances: 2\nphases:\n  - kind: fault\n    action: inject\n    fault: store-down\n    instance: 1\n", "phases.0.instance: only a clock-skew fault"},
		{"skew instance out of range", "name: x\nneeds: [faults]\nphases:\n  - kind: fault\n    action: inject\n    fault: clock-skew\n    param: +2s\n    instance: 1\n", "p.yaml:8: phases.0.instance: 1, but the plan asks for 1 instance(s)"},
		{"unknown need", "name: x\nneeds: [gpu]\nphases:\n  - kind: idle\n    duration: 1s\n", "p.yaml:2: needs.0: unknown need \"gpu\""},
		{"bad instances need", "name: x\nneeds: [instances>=many]\nphases:\n  - kind: idle\n    duration: 1s\n", "p.yaml:2: needs.0: \"instances>=many\""},
		{"instances below need", "name: x\nneeds: [instances>=3]\ninstances: 2\nphases:\n  - kind: idle\n    duration: 1s\n", "p.yaml:3: instances: 2, but the plan needs instances>=3"},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\ni: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n", "p.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.yaml))
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tc.want), "got %q, want it to contain %q", err.Error(), tc.want)
		})
	}
}

func TestPlanDefaults(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: x\nphases:\n  - kind: burst\n    key: free-a\n    requests: 3\n  - kind: probe\n    key: free-a\n"))
	require.NoError(t, err)
	require.Equal(t, "1-burst", p.Phases[0].Name)
	require.Equal(t, "retry-after", p.Phases[1].At)
}

func TestNewFieldsParse(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`name: x
needs: [redis, faults, instances>=3]
phases:
  - kind: retry
    key: free-a
    requests: 4
    retries: 2
    jitter: 100ms
    duration: 3s
  - kind: spread
    key: free-a
    requests: 9
    concurrency: 3
    instances: random
  - kind: probe
    key: free-a
    at: 1.5s
  - kind: bypass
    key: free-a
  - kind: boundary
    key: free-a
    align: headers
  - kind: fault
    action: inject
    fault: clock-skew
    param: "+2s"
    instance: 2
`))
	require.NoError(t, err)
	require.Equal(t, 3, p.minInstances())
	require.Empty(t, p.Phases[3].Variants, "no list: every variant the policy allows (see variantGroups)")
	require.Equal(t, "1.5s", p.Phases[2].At)
	param, target := faultParam(&p.Phases[5])
	require.Equal(t, "+2s@2", param)
	require.Equal(t, "instance 2", target)
}

// TestBuiltinsAreConsistent: every built-in plan declares what it needs,
// stays within its bounds, and the default-runnable ones are short.
func TestBuiltinsAreConsistent(t *testing.T) {
	want := []string{"boundary-burst", "bypass", "clock-skew", "concurrent-burst", "idle-refill", "multi-instance",
		"retry-after", "slow-store", "soak", "store-outage", "tenant-isolation", "tiers"}
	var names []string
	pol := policy.Default()
	for _, p := range Builtins() {
		names = append(names, p.Name)
		t.Run(p.Name, func(t *testing.T) {
			require.Equal(t, "builtin:"+p.Name, p.Source)
			require.NotContains(t, p.Description, "\n", "description is one line")
			var faults, storeFaults bool
			var total time.Duration
			for _, ph := range p.Phases {
				switch ph.Kind {
				case KindFault:
					faults = true
					storeFaults = storeFaults || (ph.Fault == "store-down" || ph.Fault == "store-slow")
				case KindRate, KindTenants, KindRetry:
					require.NotZero(t, ph.Duration, "%s: open-ended phases are bounded by a duration", ph.Name)
					total += ph.Duration.D()
				case KindIdle:
					total += ph.Duration.D()
					if ph.Until == "full" {
						total += 2 * time.Second // the default policy's longest window
					}
				case KindProbe:
					total += time.Second // at most one Retry-After of the default policy
				case KindBoundary:
					total += 2 * time.Second
				}
			}
			require.Equal(t, faults, p.NeedsFaults(), "fault phases ⇔ needs faults")
			if storeFaults {
				require.True(t, p.NeedsRedis(), "store faults need redis")
			}
			if p.Instances > 1 {
				require.GreaterOrEqual(t, p.minInstances(), p.Instances)
				require.Contains(t, p.Needs, fmt.Sprintf("instances>=%d", p.Instances))
			}
			if p.Policy != "" {
				_, err := policy.Load(filepath.Join("..", "policies", p.Policy+".yaml"))
				require.NoError(t, err, "the plan's policy ships in policies/")
			}
			if len(p.Needs) == 0 && p.Name != "soak" {
				require.LessOrEqual(t, total, 15*time.Second, "default-runnable plans are short")
			}
			for _, ph := range p.Phases {
				if ph.Key != "" {
					_, ok := pol.TierFor(ph.Key + "-run")
					require.True(t, ok, ph.Key)
				}
			}
		})
	}
	for _, w := range want {
		require.Contains(t, names, w)
	}
}

// TestStoreFaultModesParse: the reset and stall forms of the store faults.
func TestStoreFaultModesParse(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`name: x
needs: [redis, faults]
phases:
  - kind: fault
    action: inject
    fault: store-down
    param: reset
  - kind: fault
    action: inject
    fault: store-slow
    param: stall
  - kind: fault
    action: inject
    fault: store-down
    param: partition
`))
	require.NoError(t, err)
	require.Equal(t, "reset", p.Phases[0].Param)
	require.Equal(t, "stall", p.Phases[1].Param)
	require.Equal(t, "partition", p.Phases[2].Param)
}

func TestPlanThresholds(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: x\nthresholds:\n  - latency.p99<50ms\n  - phase.drain.errors<1%\nphases:\n  - name: drain\n    kind: burst\n    key: free-a\n    requests: 3\n"))
	require.NoError(t, err)
	ts := p.PlanThresholds()
	require.Len(t, ts, 2)
	require.Equal(t, "phase.drain.errors.share", ts[1].Key())
	require.Equal(t, "plan p.yaml", ts[0].Source)

	for _, tc := range []struct{ yaml, want string }{
		{"name: x\nthresholds:\n  - latency.p99<50ms\n  - latncy.p99<5ms\nphases:\n  - kind: idle\n    duration: 1s\n", `p.yaml:4: thresholds.1: threshold "latncy.p99<5ms": unknown metric`},
		{"name: x\nthresholds:\n  - phase.drian.errors<1%\nphases:\n  - name: drain\n    kind: idle\n    duration: 1s\n", `p.yaml:3: thresholds.0: threshold phase.drian.errors<1%: no phase "drian" in the plan`},
		{"name: x\nthresholds: [errors<]\nphases:\n  - kind: idle\n    duration: 1s\n", "p.yaml:2: thresholds.0: threshold \"errors<\": nothing to compare"},
	} {
		_, err := Parse("p.yaml", []byte(tc.yaml))
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
	}
}
