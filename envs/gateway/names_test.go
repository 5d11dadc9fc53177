package gateway

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// hostile is a policy built in code (never loaded, so never validated)
// whose name is the injection: a top-level error_log directive that
// nginx's master (root) would act on.
func hostile(dir string) *policy.Policy {
	p := policy.Default()
	p.Name = "default\nerror_log " + filepath.Join(dir, "injected.log") + ";\n#"
	return p
}

// A policy's text never becomes configuration: the loader refuses unsafe
// names (policy.CheckName), and a policy built in code that skipped it is
// refused by every gateway before anything is written.
func TestHostileNamesNeverReachAConfig(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range []string{catalog.NGINX, catalog.HAProxy, catalog.Gubernator, catalog.EnvoyRateLimit} {
		mode := map[string]string{catalog.NGINX: "nodelay", catalog.HAProxy: "", catalog.Gubernator: "global"}[kind]
		for name, mutate := range map[string]func(*policy.Policy){
			"policy name": func(p *policy.Policy) {},
			"tier name": func(p *policy.Policy) {
				p.Name = "p"
				p.Tiers[0].Name = `free" $rl_key; } error_log /tmp/x.log; map $x $y { "`
			},
			"default tier": func(p *policy.Policy) { p.Name = "p"; p.DefaultTier = "free\n}" },
			"key prefix":   func(p *policy.Policy) { p.Name = "p"; p.Tiers[0].KeyPrefix = "free\" ;" },
			"limit name":   func(p *policy.Policy) { p.Name = "p"; p.Tiers[0].Limits[0].Name = "x\nerror_log /tmp/y.log;" },
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				p := hostile(dir)
				mutate(p)
				_, _, err := Honest(catalog.Gateway{Kind: kind, Mode: mode}, p)
				require.Error(t, err)
				require.Contains(t, err.Error(), "gateway "+kind)
			})
		}
	}
	_, err := os.Stat(filepath.Join(dir, "injected.log"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The renderers escape what they write, whatever the check before them:
// this proves it on the text alone, then with nginx -t where nginx is
// installed (the config is parsed and the injected file must not appear).
func TestNginxConfigEscapesNames(t *testing.T) {
	require.Equal(t, `"a\"b\\c"`, nginxString(`a"b\c`))
	require.Equal(t, `"\\default"`, nginxMapKey("default"), "a tier called default is not map's default parameter")
	require.Equal(t, `"free"`, nginxMapKey("free"))
	require.Equal(t, "a?error_log x;?#", comment("a\nerror_log x;\r#"))

	// A tier called "default" is a safe name; before the escape it turned
	// the tier's zone map into `default $rl_key`, counting every key.
	dir := t.TempDir()
	p := policy.Default()
	p.Tiers[0].Name = "default"
	p.DefaultTier, p.RulesFallback = "default", "default"
	require.NoError(t, p.Validate())
	plan, err := planNginx(p)
	require.NoError(t, err)
	conf := renderNginx(plan, nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: dir, NoDelay: true, Version: nginxVersion{1, 22, 1}})
	require.Contains(t, conf, `{ "\\default" $rl_key; default ""; }`)

	// The policy: rendered by the old code, nginx -t accepted it
	// and created injected.log; the generator now refuses it.
	_, err = planNginx(hostile(dir))
	require.ErrorContains(t, err, "policy name")

	prog, err := findProgram("nginx")
	if err != nil {
		t.Logf("nginx not installed, checked the text only: %v", err)
		return
	}
	nginxT := func(text string) {
		t.Helper()
		file := filepath.Join(dir, "nginx.conf")
		require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
		out, err := exec.Command(prog, "-t", "-q", "-p", dir+"/", "-c", file, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	nginxT(conf)
	// nginx itself agrees an escaped quote cannot close the string: a
	// name with a quote and a directive after it stays one token.
	nginxT(strings.Replace(conf, `"\\default"`, nginxString(`d"; error_log injected.log; "`), 1))
	_, err = os.Stat(filepath.Join(dir, "injected.log"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// nginxShape counts what gives an nginx config its structure — ; { } and
// lines outside quoted strings and comments — as nginx's tokenizer reads
// them (a backslash escapes the next byte in a quoted string).
func nginxShape(conf string) [4]int {
	var n [4]int
	inQuote, inComment := false, false
	for i := 0; i < len(conf); i++ {
		c := conf[i]
		switch {
		case c == '\n':
			n[3]++
			inComment = false
			if inQuote {
				continue
			}
		case inComment:
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '#':
			inComment = true
		case c == ';':
			n[0]++
		case c == '{':
			n[1]++
		case c == '}':
			n[2]++
		}
	}
	return n
}

// Whatever names and key prefix a policy has, once it validates the nginx
// and HAProxy configurations have the shape of a plain policy's: no text
// of the policy adds a directive, a block or a line.
func FuzzGatewayConfigNames(f *testing.F) {
	for _, s := range [][3]string{
		{"p", "free", "free-"}, {"default\nerror_log /tmp/x.log;\n#", "free", "free-"},
		{"p", `fr"ee`, "free-"}, {"p", "default", "k.{"}, {"p", "a}b", "$x"}, {"p", "free", `fr"ee\`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	base := policy.Default()
	baseNginx, err := planNginx(base)
	require.NoError(f, err)
	settings := nginxSettings{Listen: testListen, Upstream: testUpstream, Dir: testDir, NoDelay: true, Version: nginxVersion{1, 22, 1}}
	want := nginxShape(renderNginx(baseNginx, settings))
	baseHA, err := planHAProxy(base.WithAlgorithm(policy.SlidingCounter))
	require.NoError(f, err)
	wantHA := strings.Count(renderHAProxy(baseHA, haproxySettings{Listen: testListen, Upstream: testUpstream}), "\n")
	f.Fuzz(func(t *testing.T, name, tier, prefix string) {
		p := policy.Default()
		p.Name, p.Tiers[0].Name, p.Tiers[0].KeyPrefix = name, tier, prefix
		p.RulesFallback = ""
		if p.Validate() != nil || len(prefix) == 0 || strings.HasPrefix(p.Tiers[1].KeyPrefix, prefix) || strings.HasPrefix(prefix, p.Tiers[1].KeyPrefix) || tier == p.Tiers[1].Name {
			return
		}
		pl, err := planNginx(p)
		if err != nil {
			return
		}
		if got := nginxShape(renderNginx(pl, settings)); got != want {
			t.Fatalf("nginx config of name %q tier %q prefix %q has shape %v, want %v", name, tier, prefix, got, want)
		}
		ha, err := planHAProxy(p.WithAlgorithm(policy.SlidingCounter))
		if err != nil {
			return
		}
		if got := strings.Count(renderHAProxy(ha, haproxySettings{Listen: testListen, Upstream: testUpstream}), "\n"); got != wantHA {
			t.Fatalf("HAProxy config of name %q tier %q prefix %q has %d lines, want %d", name, tier, prefix, got, wantHA)
		}
	})
}

// envoyproxy/ratelimit's configuration is written by a YAML marshaller: a
// tier name that got past the checks (a plan built in code) stays one
// value, and cannot add a rule, a domain or a document.
func TestEnvoyConfigHoldsNamesAsData(t *testing.T) {
	p, err := planEnvoy(policy.Default().WithAlgorithm(policy.FixedWindow))
	require.NoError(t, err)
	evil := "free\ndescriptors:\n  - key: tier\n    rate_limit: {unit: second, requests_per_unit: 1000000}\n---\ndomain: other"
	p.rules[0].Tier = evil
	p.policyName = "p\ndomain: injected"
	conf, err := renderEnvoy(p)
	require.NoError(t, err)
	dec := yaml.NewDecoder(strings.NewReader(conf))
	var got envoyConfig
	require.NoError(t, dec.Decode(&got))
	var more envoyConfig
	require.ErrorIs(t, dec.Decode(&more), io.EOF, "one document")
	require.Equal(t, EnvoyDomain, got.Domain)
	require.Len(t, got.Descriptors, len(p.rules))
	assert.Equal(t, evil, got.Descriptors[0].Value, "the name is one value")
	assert.Nil(t, got.Descriptors[0].RateLimit)
	assert.Equal(t, int64(5), got.Descriptors[0].Descriptors[0].RateLimit.RequestsPerUnit)
	assert.NotContains(t, conf, "\ndomain: injected", "the comment holds the policy name on one line")
}
