package gateway

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// nginx limit_req (https://nginx.org/en/docs/http/ngx_http_limit_req_module.html).
//
// Mapping, per tier limit (K, r):
//
//	limit_req_zone $key zone=Z:10m rate=r;  limit_req zone=Z burst=K−1 [nodelay];
//
// nginx keeps, per key, an "excess" in milli-requests: a request at Δt ms
// after the last admitted one sets excess' = max(0, excess − rate·Δt/1000 +
// 1000) and is refused when excess' > burst·1000; a refused request changes
// nothing. That is exactly a token bucket of capacity burst+1 refilled at
// rate, starting full (a key's first request sets excess 0). rate is whole
// requests per second (r/s) or per minute (r/m) and is kept in integer
// milli-requests per second (rate·1000/60 for r/m, truncated), so a rate is
// expressed as the largest nginx rate at or below it. Without nodelay the
// admitted excess is not refused but delayed until it drains
// (excess/rate): the admissions are the same, their responses late. Time is
// nginx's cached millisecond clock.
//
// The key: the identity as the policy places it ($http_NAME for a header —
// its first occurrence; nginx 1.23 and later join repeated headers with ", "
// so the configuration keeps the part before the first comma —, a map over
// $http_authorization for a bearer token, $arg_NAME, $cookie_NAME), at most
// identity.max_length bytes (longer: 401, or cut), tiers by the longest
// matching key prefix through a map (one zone per tier limit: a key outside
// the tier maps to "" and nginx does not account empty keys). A missing key
// is answered 401 and a key of no tier 403 before limit_req runs. nginx
// cannot fold case, so keys are case-sensitive whatever the policy says.
// Each nginx process has its own zones: N instances are N quotas.

// nginxZone is one limit_req zone.
type nginxZone struct {
	tierLimit
	// Rate is the rate= value ("5r/s", "20r/m").
	Rate string
	// Burst is burst= (K−1).
	Burst int64
	// Queue is how many requests past K may wait when the tier declares a
	// delay (nginxQueue): without nodelay the zone gets burst=K−1+Queue
	// delay=K−1, so K are admitted at once and Queue more wait. Zero: no
	// delay declared, and without nodelay every request past the first
	// waits its turn at the rate (burst=K−1, no delay=).
	Queue int64
}

// nginxPlan is the declared policy as nginx expresses it.
type nginxPlan struct {
	*translation
	zones []nginxZone
	// source is the nginx variable carrying the raw identity.
	source string
	// bearer: the identity is an Authorization: Bearer token.
	bearer bool
	// header: the identity is a request header (repeated occurrences are
	// joined by nginx 1.23+).
	header bool
	// underscores: the header name has an underscore (nginx ignores such
	// headers unless told otherwise).
	underscores bool
	maxLen      int
	cut         bool
}

// nginxSettings are the parts of a configuration that are not the policy.
type nginxSettings struct {
	// Listen is 127.0.0.1:PORT.
	Listen string
	// Upstream is the sink's host:port.
	Upstream string
	// Dir is the prefix directory (pid, logs, temporary files).
	Dir string
	// NoDelay refuses over-limit requests at once instead of delaying them.
	NoDelay bool
	// Version is the nginx version the configuration is for.
	Version nginxVersion
}

// nginxVersion is major, minor, patch.
type nginxVersion [3]int

func (v nginxVersion) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// joinsRepeatedHeaders: since 1.23.0 $http_NAME joins every occurrence.
func (v nginxVersion) joinsRepeatedHeaders() bool { return v[0] > 1 || (v[0] == 1 && v[1] >= 23) }

var nginxVarName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func translateNginx(declared *policy.Policy) (*translation, error) {
	p, err := planNginx(declared)
	if err != nil {
		return nil, err
	}
	return p.translation, nil
}

func planNginx(declared *policy.Policy) (*nginxPlan, error) {
	t, err := newTranslation(declared, "nginx")
	if err != nil {
		return nil, err
	}
	p := &nginxPlan{translation: t}
	id := &declared.Identity
	name := strings.ToLower(strings.ReplaceAll(id.Name, "-", "_"))
	if !nginxVarName.MatchString(id.Name) {
		return nil, fmt.Errorf("gateway nginx: identity %s: nginx variables cannot name %q (letters, digits, - and _ only)", id.Describe(), id.Name)
	}
	switch id.In {
	case policy.InBearer:
		p.source, p.bearer, p.header = "$http_"+name, true, true
	case policy.InQuery:
		p.source = "$arg_" + name
	case policy.InCookie:
		p.source = "$cookie_" + name
	default:
		p.source, p.header = "$http_"+name, true
	}
	p.underscores = p.header && strings.Contains(id.Name, "_")
	p.maxLen, p.cut = id.MaxLength, id.TooLong == policy.TooLongCut

	for _, tl := range t.limits {
		rate, eff, err := nginxRate(tl.Limit.R())
		if err != nil {
			return nil, fmt.Errorf("gateway nginx: limit %s: %w", tl.Limit.Name, err)
		}
		p.zones = append(p.zones, nginxZone{tierLimit: tl, Rate: rate, Burst: tl.Limit.Capacity - 1, Queue: nginxQueue(declared, tl, eff)})
		h := t.honestLimit(tl)
		if math.Abs(eff-tl.Limit.R()) > 1e-9*tl.Limit.R() {
			t.deviate(fmt.Sprintf("limit %s refills at %s", tl.Limit.Name, policy.FormatRate(tl.Limit.R())),
				fmt.Sprintf("nginx rates are whole requests per second or minute, kept in milli-requests per second: rate=%s refills at %s", rate, policy.FormatRate(eff)))
			setBucket(h, h.Capacity, eff)
		}
	}
	t.noHeaders("nginx limit_req", "limit_req_status only sets the status")
	hid := &t.honest.Identity
	if id.CaseFolded() {
		t.deviate("keys differing only in letter case are one key", "nginx keys on the bytes of the identity and cannot fold case")
	}
	hid.CaseSensitive = ptr(true)
	if id.Repeated != policy.RepeatedFirst {
		t.deviate(repeatedPromise(id.Repeated), "nginx reads the first occurrence")
		hid.Repeated = policy.RepeatedFirst
	}
	if trims := id.In == policy.InHeader || id.In == policy.InBearer; id.Trimmed() != trims {
		if trims {
			t.deviate("white space around a key is part of it", "nginx strips it from header values")
		} else {
			t.deviate("white space around a key is ignored", "nginx keeps it in query and cookie values")
		}
		hid.Trim = ptr(trims)
	}
	if len(id.TrustedProxies) > 0 {
		t.deviate("X-Forwarded-For from trusted proxies is part of the identity", "the generated limit_req key is the identity alone")
		hid.TrustedProxies = nil
	}
	t.perInstance("nginx limit_req", "a limit_req_zone lives in one nginx's shared memory")
	if t.honest.ClockQuantum.D() < time.Millisecond {
		t.honest.ClockQuantum = policy.Duration(time.Millisecond)
	}
	if err := t.finish(); err != nil {
		return nil, err
	}
	return p, nil
}

// nginxRate returns the largest limit_req rate at or below r per second and
// the rate nginx then enforces: n r/s when r is a whole number per second,
// else ⌊60·r⌋ r/m, which nginx keeps as ⌊n·1000/60⌋ milli-requests per
// second.
func nginxRate(r float64) (string, float64, error) {
	if r >= 1 && math.Abs(r-math.Round(r)) < 1e-9 {
		n := int64(math.Round(r))
		return fmt.Sprintf("%dr/s", n), float64(n), nil
	}
	n := int64(math.Floor(r*60 + 1e-9))
	if n < 1 {
		return "", 0, fmt.Errorf("rate %s is below nginx's slowest, 1r/m", policy.FormatRate(r))
	}
	return fmt.Sprintf("%dr/m", n), float64(n*1000/60) / 1000, nil
}

// setBucket makes l a token bucket (K, r) in the honest policy, its window
// view and default name derived again by Validate.
func setBucket(l *policy.Limit, k int64, r float64) {
	l.Algorithm, l.Capacity, l.Rate = policy.TokenBucket, k, policy.Rate(r)
	l.Count, l.Window, l.Name, l.ErrorBound, l.Anchor = 0, 0, "", 0, ""
}

func ptr[T any](v T) *T { return &v }

// repeatedPromise says what a declared identity.repeated promises.
func repeatedPromise(repeated string) string {
	if repeated == policy.RepeatedRejected {
		return "a request with a repeated identity is refused"
	}
	return "a repeated identity counts by its " + repeated + " occurrence"
}

// nginxString quotes s as one nginx configuration token: inside double
// quotes a backslash and a quote are escaped, so no text of a policy can
// close the string and start a directive. ($ and control characters never
// get here: writable refuses them, as nginx has no escape for $.)
func nginxString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// nginxMapKey quotes s as the source value of a map entry: a value that
// reads as one of map's parameters (a tier called "default") or as a
// regular expression is marked literal with a leading backslash, as the
// map module's documentation says.
func nginxMapKey(s string) string {
	switch {
	case s == "default" || s == "hostnames" || s == "include" || s == "volatile",
		strings.HasPrefix(s, "~"), strings.HasPrefix(s, `\`):
		return nginxString(`\` + s)
	}
	return nginxString(s)
}

// renderNginx writes the nginx.conf of p under s.
func renderNginx(p *nginxPlan, s nginxSettings) string {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("    ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	mode := "nodelay: over-limit requests are refused at once"
	if !s.NoDelay {
		mode = "no nodelay: requests past delay= (K−1; 0 when no delay is declared) wait their turn at the rate, past burst= they are refused"
	}
	w(0, "# Generated by rlverify from policy %s for nginx %s (%s).", comment(p.policyName), s.Version, mode)
	w(0, "daemon off;")
	w(0, "master_process on;")
	w(0, "worker_processes 1;")
	w(0, "pid %s;", filepath.Join(s.Dir, "nginx.pid"))
	w(0, "error_log %s notice;", filepath.Join(s.Dir, "error.log"))
	w(0, "events { worker_connections 4096; }")
	w(0, "http {")
	w(1, "access_log off;")
	for _, tmp := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		w(1, "%s_temp_path %s;", tmp, filepath.Join(s.Dir, tmp))
	}
	w(1, "keepalive_requests 1000000;")
	if p.underscores {
		w(1, "underscores_in_headers on;")
	}
	w(0, "")
	w(1, "# The key: %s.", comment(describeKey(&p.honest.Identity)))
	switch {
	case p.bearer:
		w(1, `map %s $rl_raw { "~*^bearer +(?<rl_token>.+)$" $rl_token; default ""; }`, p.source)
	case p.header && s.Version.joinsRepeatedHeaders():
		w(1, `map %s $rl_raw { "~^(?<rl_first>[^,]*)" $rl_first; default ""; }`, p.source)
	default:
		w(1, `map %s $rl_raw { default %s; }`, p.source, p.source)
	}
	if p.maxLen > 0 && p.cut {
		w(1, `map $rl_raw $rl_key { "~^(?<rl_cut>.{%d})" $rl_cut; default $rl_raw; }`, p.maxLen)
		w(1, `map $rl_key $rl_key_bad { default 0; }`)
	} else {
		w(1, `map $rl_raw $rl_key { default $rl_raw; }`)
		if p.maxLen > 0 {
			w(1, `map $rl_key $rl_key_bad { "~^.{%d}" 1; default 0; }`, p.maxLen+1)
		} else {
			w(1, `map $rl_key $rl_key_bad { default 0; }`)
		}
	}
	w(1, "# The tier: the longest matching key prefix.")
	w(1, "map $rl_key $rl_tier {")
	w(2, `default %s;`, nginxString(p.honest.DefaultTier))
	for _, t := range p.tiers {
		if t.KeyPrefix != "" {
			w(2, `%s %s;`, nginxString("~^"+regexp.QuoteMeta(t.KeyPrefix)), nginxString(t.Name))
		}
	}
	w(1, "}")
	w(1, "# One zone per tier limit; a key outside the tier is empty, which nginx does not account.")
	for _, z := range p.zones {
		if z.Tier == "" {
			w(1, `map $rl_key $rl_%s { default "all"; }`, z.ID)
		} else {
			w(1, `map $rl_tier $rl_%s { %s $rl_key; default ""; }`, z.ID, nginxMapKey(z.Tier))
		}
	}
	for _, z := range p.zones {
		w(1, "limit_req_zone $rl_%s zone=%s:10m rate=%s;  # %s", z.ID, z.ID, z.Rate, comment(describeLimit(z.tierLimit)))
	}
	w(0, "")
	w(1, "upstream rl_sink { server %s; keepalive 64; }", s.Upstream)
	w(0, "")
	w(1, "server {")
	w(2, "listen %s;", s.Listen)
	w(2, `location = /healthz { return 200 "ok\n"; }`)
	w(2, "location / {")
	w(3, `if ($rl_key = "") { return 401; }`)
	w(3, "if ($rl_key_bad) { return 401; }")
	w(3, `if ($rl_tier = "") { return 403; }`)
	for _, z := range p.zones {
		switch {
		case s.NoDelay:
			w(3, "limit_req zone=%s burst=%d nodelay;", z.ID, z.Burst)
		case z.Queue > 0:
			w(3, "limit_req zone=%s burst=%d delay=%d;", z.ID, z.Burst+z.Queue, z.Burst)
		default:
			w(3, "limit_req zone=%s burst=%d;", z.ID, z.Burst)
		}
	}
	w(3, "limit_req_status %d;", p.rejected)
	w(3, "proxy_http_version 1.1;")
	w(3, `proxy_set_header Connection "";`)
	w(3, "proxy_set_header %s $rl_key;", service.SinkKeyHeader)
	w(3, "proxy_pass http://rl_sink;")
	w(2, "}")
	w(1, "}")
	w(0, "}")
	return b.String()
}

// describeKey says in a comment where the key comes from.
func describeKey(id *policy.Identity) string {
	s := id.Describe()
	switch id.Repeated {
	case policy.RepeatedRejected:
		s += ", refused when repeated"
	default:
		s += ", " + id.Repeated + " occurrence"
	}
	switch {
	case id.MaxLength > 0 && id.TooLong == policy.TooLongCut:
		s += fmt.Sprintf(", cut to %d bytes", id.MaxLength)
	case id.MaxLength > 0:
		s += fmt.Sprintf(", at most %d bytes (longer: refused)", id.MaxLength)
	}
	return s
}

func describeLimit(tl tierLimit) string {
	if tl.Tier == "" {
		return "global guard " + tl.Limit.Describe()
	}
	return "tier " + tl.Tier + ": " + tl.Limit.Describe()
}

// findProgram returns the program a gateway runs: $RLVERIFY_NGINX or
// $RLVERIFY_HAPROXY when set (a build elsewhere, or OpenResty), else prog
// on PATH, else in /usr/sbin or /usr/local/sbin (Debian's place, often not
// on a user's PATH).
func findProgram(prog string) (string, error) {
	if p := os.Getenv(ProgramEnv(prog)); p != "" {
		st, err := os.Stat(p)
		if err == nil && st.Mode()&0o111 == 0 {
			err = fmt.Errorf("%s is not executable", p)
		}
		if err != nil {
			return "", errNotInstalled(prog, fmt.Errorf("$%s: %w", ProgramEnv(prog), err))
		}
		return p, nil
	}
	p, err := exec.LookPath(prog)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		cand := filepath.Join(dir, prog)
		if st, serr := os.Stat(cand); serr == nil && st.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	return "", errNotInstalled(prog, err)
}

// ProgramEnv names the environment variable that points at a gateway's
// program: RLVERIFY_NGINX, RLVERIFY_HAPROXY.
func ProgramEnv(prog string) string { return "RLVERIFY_" + strings.ToUpper(prog) }

var nginxVersionRe = regexp.MustCompile(`nginx/(\d+)\.(\d+)\.(\d+)`)

// detectNginx returns the version of the nginx at prog.
func detectNginx(prog string) (nginxVersion, error) {
	out, err := exec.Command(prog, "-v").CombinedOutput()
	if err != nil {
		return nginxVersion{}, fmt.Errorf("gateway: %s -v: %w: %s", prog, err, strings.TrimSpace(string(out)))
	}
	m := nginxVersionRe.FindStringSubmatch(string(out))
	if m == nil {
		return nginxVersion{}, fmt.Errorf("gateway: %s -v: no version in %q", prog, strings.TrimSpace(string(out)))
	}
	var v nginxVersion
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, nil
}

// Available reports whether a gateway can run here: the program it needs
// is installed (nginx, HAProxy), or this binary was built with it
// (gubernator needs -tags gubernator); the error wraps ErrUnavailable and
// says what to install or build.
func Available(kind string) error {
	switch kind {
	case "nginx", "haproxy":
		_, err := findProgram(kind)
		return err
	case "gubernator":
		if !gubernatorBuilt {
			return errNoGubernatorBuild
		}
	case "envoy-ratelimit":
		if _, err := findEnvoy(); err != nil {
			return err
		}
		return redisproc.Available()
	}
	return nil
}

// Install is the command that makes gateway kind available here.
func Install(kind string) string {
	switch kind {
	case "gubernator":
		return "go build -tags gubernator ./cmd/rlverify"
	case "envoy-ratelimit":
		return envoyBuild + " (and apt-get install redis-server)"
	}
	return "apt-get install nginx haproxy"
}

func startNginx(ctx context.Context, e Environment, pol *policy.Policy, n int) (*envs.Stack, error) {
	prog, err := findProgram("nginx")
	if err != nil {
		return nil, fmt.Errorf("gateway nginx: %w", err)
	}
	version, err := detectNginx(prog)
	if err != nil {
		return nil, err
	}
	p, err := planNginx(pol)
	if err != nil {
		return nil, err
	}
	nodelay := e.Gateway.Mode != "delay"
	return startProcesses(ctx, e, pol, n, processKind{
		name: "nginx", file: "nginx.conf",
		desc: fmt.Sprintf("nginx %s (%s), limit_req zones in each process's shared memory", version, prog),
		render: func(listen, upstream, dir string) string {
			return renderNginx(p, nginxSettings{Listen: listen, Upstream: upstream, Dir: dir, NoDelay: nodelay, Version: version})
		},
		args: func(dir, conf string) []string {
			return []string{"-p", dir + "/", "-c", conf, "-e", filepath.Join(dir, "error.log")}
		},
		prog: prog, deviations: p.deviations,
	})
}
