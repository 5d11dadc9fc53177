package gateway

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// HAProxy stick tables (https://docs.haproxy.org/2.6/configuration.html,
// "http_req_rate(<period>)" and "sc_http_req_rate").
//
// Mapping, per tier limit (N, W):
//
//	backend T  stick-table type string len L size 1m expire E store http_req_rate(W)
//	http-request track-scI <key> table T
//	http-request deny deny_status 429 if { sc_http_req_rate(I) gt N }
//
// http_req_rate is a frequency counter over periods of W milliseconds that
// start at a key's first request and follow each other (a gap of two
// periods starts afresh): it reads ⌊prev·(W−elapsed)/W + curr⌋, a sliding
// window counter. Tracking counts the request before the deny rule reads
// the rate, and "this includes every started request, valid or not": a
// refused request counts too. So a request is admitted while the estimate,
// itself included, is at most N (up to 2N in a rolling W in the worst case,
// as every sliding-window counter), and a client that keeps sending above
// the rate stays refused until it slows down.
//
// The key: req.fhdr(NAME,1) (the first occurrence; -1 for the last, a deny
// when repeated is refused), a bearer token's second word, url_param (first
// occurrence, URL-decoded) or req.cook (last occurrence); ",lower" when keys
// are case-insensitive; refused (401) when missing, empty or longer than
// identity.max_length, or cut to it. Stick tables keep at most L characters
// of a string key (L = max_length, else 1024, and longer keys share the
// entry of their first L characters). Tiers by the longest matching prefix.
// The global guard is one more tracked counter on a constant key. HAProxy
// tracks at most three counters per request (sc0–sc2). Each HAProxy process
// has its own tables: N instances are N quotas.

// haproxyTable is one stick table.
type haproxyTable struct {
	tierLimit
	// Counter is the track-sc number.
	Counter int
	// PeriodMs is http_req_rate's period.
	PeriodMs int64
}

// haproxyPlan is the declared policy as HAProxy expresses it.
type haproxyPlan struct {
	*translation
	tables []haproxyTable
	// fetch is the sample expression of the raw key.
	fetch string
	// guards are deny rules that refuse malformed identities before the key
	// is read ("status if condition").
	guards []string
	// keyLen is the stick tables' string length.
	keyLen int
	maxLen int
	cut    bool
}

// haproxyDefaultKeyLen is the stick-table key length when the policy
// declares no identity.max_length.
const haproxyDefaultKeyLen = 1024

// haproxyCounters is MAX_SESS_STKCTR of Debian's build.
const haproxyCounters = 3

func translateHAProxy(declared *policy.Policy) (*translation, error) {
	p, err := planHAProxy(declared)
	if err != nil {
		return nil, err
	}
	return p.translation, nil
}

func planHAProxy(declared *policy.Policy) (*haproxyPlan, error) {
	t, err := newTranslation(declared, "haproxy")
	if err != nil {
		return nil, err
	}
	p := &haproxyPlan{translation: t}
	if err := p.identity(&declared.Identity); err != nil {
		return nil, err
	}
	counter := map[string]int{}
	if declared.Global != nil {
		for _, tier := range declared.Tiers {
			counter[tier.Name] = 1
		}
	}
	countsAll, epoch := false, false
	for _, tl := range t.limits {
		ms := tl.Limit.W().Round(time.Millisecond).Milliseconds()
		if ms < 1 {
			return nil, fmt.Errorf("gateway haproxy: limit %s: window %s is below HAProxy's 1ms period", tl.Limit.Name, tl.Limit.Window)
		}
		c := 0
		if tl.Tier != "" {
			c = counter[tl.Tier]
			counter[tl.Tier]++
			if c >= haproxyCounters {
				return nil, fmt.Errorf("gateway haproxy: tier %s needs %d tracked counters (its limits and the global guard); HAProxy tracks at most %d per request", tl.Tier, c+1, haproxyCounters)
			}
		}
		p.tables = append(p.tables, haproxyTable{tierLimit: tl, Counter: c, PeriodMs: ms})
		h := t.honestLimit(tl)
		if time.Duration(ms)*time.Millisecond != tl.Limit.W() || h.Algorithm != policy.SlidingCounter {
			setCounter(h, h.Count, time.Duration(ms)*time.Millisecond)
		}
		if tl.Limit.ErrorBound < 1 && tl.Limit.Algorithm == policy.SlidingCounter {
			t.deviate(fmt.Sprintf("limit %s admits at most %g·N in a rolling window", tl.Limit.Name, 1+tl.Limit.ErrorBound),
				"http_req_rate weighs the previous period as if its requests were spread evenly: up to 2N in the worst case")
		}
		epoch = epoch || (tl.Limit.Algorithm == policy.SlidingCounter && tl.Limit.Anchor != policy.AnchorFirst)
		countsAll = countsAll || tl.Limit.Counts != policy.CountsAll
		h.Anchor, h.Counts, h.ErrorBound = policy.AnchorFirst, policy.CountsAll, 1
	}
	if epoch {
		t.deviate("sliding-counter windows are epoch-aligned", "http_req_rate's periods start at a key's first request")
	}
	if countsAll {
		t.deviate("a refused request uses up no quota", `every request counts in http_req_rate, refused ones too ("this includes every started request, valid or not"): a client that keeps sending above the limit stays refused`)
	}
	t.noHeaders("HAProxy", "http-request deny only sets the status")
	if len(declared.Identity.TrustedProxies) > 0 {
		t.deviate("X-Forwarded-For from trusted proxies is part of the identity", "the generated tracking key is the identity alone")
		t.honest.Identity.TrustedProxies = nil
	}
	t.perInstance("HAProxy", "a stick table lives in one HAProxy process")
	if t.honest.ClockQuantum.D() < time.Millisecond {
		t.honest.ClockQuantum = policy.Duration(time.Millisecond)
	}
	if err := t.finish(); err != nil {
		return nil, err
	}
	return p, nil
}

// setCounter makes l a sliding-window counter (N, W) in the honest policy.
func setCounter(l *policy.Limit, n int64, w time.Duration) {
	l.Algorithm, l.Count, l.Window = policy.SlidingCounter, n, policy.Duration(w)
	l.Capacity, l.Rate, l.Name = 0, 0, ""
}

// identity sets how HAProxy reads the key, recording what it cannot do.
func (p *haproxyPlan) identity(id *policy.Identity) error {
	hid := &p.honest.Identity
	if strings.ContainsAny(id.Name, ",()'\" ") {
		return fmt.Errorf("gateway haproxy: identity %s: %q cannot be written into a sample fetch", id.Describe(), id.Name)
	}
	occ := "1"
	switch id.Repeated {
	case policy.RepeatedLast:
		occ = "-1"
	case policy.RepeatedRejected:
		if id.In == policy.InHeader || id.In == policy.InBearer {
			p.guards = append(p.guards, fmt.Sprintf("400 if { req.fhdr_cnt(%s) gt 1 }", id.Name))
		}
	}
	switch id.In {
	case policy.InBearer:
		p.guards = append(p.guards, fmt.Sprintf("401 unless { req.fhdr(%s,%s) -m reg -i ^bearer[[:space:]]+[^[:space:]] }", id.Name, occ))
		p.fetch = fmt.Sprintf("req.fhdr(%s,%s),word(2,' ')", id.Name, occ)
	case policy.InQuery:
		p.fetch = fmt.Sprintf("url_param(%s),url_dec", id.Name)
		if id.Repeated != policy.RepeatedFirst {
			p.deviate(repeatedPromise(id.Repeated), "url_param reads the first occurrence")
			hid.Repeated = policy.RepeatedFirst
		}
	case policy.InCookie:
		p.fetch = fmt.Sprintf("req.cook(%s)", id.Name)
		if id.Repeated != policy.RepeatedLast {
			p.deviate(repeatedPromise(id.Repeated), "req.cook reads the last occurrence")
			hid.Repeated = policy.RepeatedLast
		}
	default:
		p.fetch = fmt.Sprintf("req.fhdr(%s,%s)", id.Name, occ)
	}
	if id.CaseFolded() {
		p.fetch += ",lower"
	}
	if trims := id.In == policy.InHeader || id.In == policy.InBearer; id.Trimmed() != trims {
		if trims {
			p.deviate("white space around a key is part of it", "HAProxy strips it from header values")
		} else {
			p.deviate("white space around a key is ignored", "HAProxy keeps it in query and cookie values")
		}
		hid.Trim = ptr(trims)
	}
	p.maxLen, p.cut, p.keyLen = id.MaxLength, id.TooLong == policy.TooLongCut, id.MaxLength
	if p.keyLen == 0 {
		// Undeclared: the table keeps the first characters of a key and
		// longer keys share an entry; the honest policy says so.
		p.keyLen = haproxyDefaultKeyLen
		hid.MaxLength, hid.TooLong = haproxyDefaultKeyLen, policy.TooLongCut
	}
	if p.cut {
		p.fetch += fmt.Sprintf(",bytes(0,%d)", p.maxLen)
	}
	return nil
}

// haproxySettings are the parts of a configuration that are not the policy.
type haproxySettings struct {
	Listen   string
	Upstream string
}

// renderHAProxy writes the haproxy.cfg of p under s. Tier names and key
// prefixes are written as bare words: HAProxy has no escape that holds
// inside a sample fetch's argument (str(…)), so writable keeps them to an
// alphabet that needs none.
func renderHAProxy(p *haproxyPlan, s haproxySettings) string {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("    ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	w(0, "# Generated by rlverify from policy %s: every request counts in http_req_rate, refused ones too.", comment(p.policyName))
	w(0, "global")
	w(1, "maxconn 4096")
	w(0, "defaults")
	w(1, "mode http")
	w(1, "timeout connect 5s")
	w(1, "timeout client 60s")
	w(1, "timeout server 60s")
	w(1, "timeout http-request 10s")
	w(1, "timeout http-keep-alive 60s")
	w(0, "frontend rl")
	w(1, "bind %s", s.Listen)
	w(1, `http-request return status 200 content-type text/plain string "ok" if { path /healthz }`)
	w(1, "# The key: %s.", comment(describeKey(&p.honest.Identity)))
	for _, g := range p.guards {
		w(1, "http-request deny deny_status %s", g)
	}
	w(1, "http-request set-var(txn.rl_key) %s", p.fetch)
	w(1, "http-request deny deny_status 401 unless { var(txn.rl_key) -m found }")
	w(1, "http-request deny deny_status 401 if { var(txn.rl_key) -m len 0 }")
	if p.maxLen > 0 && !p.cut {
		w(1, "http-request deny deny_status 401 if { var(txn.rl_key),length gt %d }", p.maxLen)
	}
	w(1, "# The tier: the longest matching key prefix (the last rule that matches wins).")
	if p.honest.DefaultTier != "" {
		w(1, "http-request set-var(txn.rl_tier) str(%s)", p.honest.DefaultTier)
	}
	for i := len(p.tiers) - 1; i >= 0; i-- {
		if t := p.tiers[i]; t.KeyPrefix != "" {
			w(1, "http-request set-var(txn.rl_tier) str(%s) if { var(txn.rl_key) -m beg %s }", t.Name, t.KeyPrefix)
		}
	}
	w(1, "http-request deny deny_status 403 unless { var(txn.rl_tier) -m found }")
	w(1, "# Track every request in its tables (refused ones count too), then refuse the over-limit ones.")
	for _, t := range p.tables {
		if t.Tier == "" {
			w(1, "http-request track-sc%d str(all) table rl_%s", t.Counter, t.ID)
		} else {
			w(1, "http-request track-sc%d var(txn.rl_key) table rl_%s if { var(txn.rl_tier) -m str %s }", t.Counter, t.ID, t.Tier)
		}
	}
	for _, t := range p.tables {
		if t.Tier == "" {
			w(1, "http-request deny deny_status %d if { sc_http_req_rate(%d) gt %d }", p.rejected, t.Counter, t.Limit.Count)
		} else {
			w(1, "http-request deny deny_status %d if { var(txn.rl_tier) -m str %s } { sc_http_req_rate(%d) gt %d }", p.rejected, t.Tier, t.Counter, t.Limit.Count)
		}
	}
	w(1, "http-request set-header %s %%[var(txn.rl_key)]", service.SinkKeyHeader)
	w(1, "default_backend rl_sink")
	w(0, "backend rl_sink")
	w(1, "http-reuse always")
	w(1, "server sink %s", s.Upstream)
	for _, t := range p.tables {
		// Entries outlive two periods, so the previous period is never
		// forgotten early.
		expire := max(2*t.PeriodMs+1000, 2000)
		w(0, "backend rl_%s  # %s", t.ID, comment(describeLimit(t.tierLimit)))
		w(1, "stick-table type string len %d size 1m expire %dms store http_req_rate(%d)", p.keyLen, expire, t.PeriodMs)
	}
	return b.String()
}

// detectHAProxy names the HAProxy at prog with its version, from the first
// line of haproxy -v ("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - …").
func detectHAProxy(prog string) string {
	out, err := exec.Command(prog, "-v").CombinedOutput()
	if err != nil {
		return "HAProxy"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	v, _, _ := strings.Cut(strings.TrimPrefix(line, "HAProxy version "), " ")
	return "HAProxy " + v
}

func startHAProxy(ctx context.Context, e Environment, pol *policy.Policy, n int) (*envs.Stack, error) {
	prog, err := findProgram("haproxy")
	if err != nil {
		return nil, fmt.Errorf("gateway haproxy: %w", err)
	}
	p, err := planHAProxy(pol)
	if err != nil {
		return nil, err
	}
	return startProcesses(ctx, e, pol, n, processKind{
		name: "haproxy", file: "haproxy.cfg", prog: prog,
		desc: fmt.Sprintf("%s (%s), stick tables in each process's memory", detectHAProxy(prog), prog),
		render: func(listen, upstream, _ string) string {
			return renderHAProxy(p, haproxySettings{Listen: listen, Upstream: upstream})
		},
		args:       func(_, conf string) []string { return []string{"-f", conf, "-db"} },
		deviations: p.deviations,
	})
}
