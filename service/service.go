package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// Forwarder passes an admitted request on to the downstream.
type Forwarder interface {
	Forward(ctx context.Context, key string) error
}

// Service is the reference rate-limited HTTP service. Identity comes from the
// policy's identity header (X-API-Key by default); the tier from the key's
// prefix; the decision from the tier's limiter. Admitted requests are
// forwarded downstream and answered 200; denied ones 429 with Retry-After and
// the declared rate-limit headers.
//
// Key normalisation follows the policy's identity declaration (the built-in
// policies: trimmed and case-folded, so "Free-A " and "free-a" share one
// quota; at most 200 bytes of printable ASCII).
type Service struct {
	Policy *policy.Policy
	// Limiters holds one limiter per tier name.
	Limiters map[string]limiters.Limiter
	// Downstream receives admitted requests (may be nil).
	Downstream Forwarder
	// Now is the clock the limiters decide at (the instance's steady
	// clock); time.Now when nil.
	Now func() time.Time
	// Wall, when set, is the instance's wall clock, which a clock-skew
	// fault steps: the service says it in its Date header, so a run can
	// see that a step took effect. Its limiters never read it (only a
	// faulty limiter built on catalog.Env.Now does).
	Wall func() time.Time
	// TrustXFF takes the identity from X-Forwarded-For when present, from
	// any peer. It is the defect of faulty/trust-xff; never set it otherwise.
	TrustXFF bool
	// Global, when set, is the policy's aggregate guard across all keys
	// (policy.Global), decided before the key's own limits: a request it
	// refuses consumes nothing from its key and is answered 429 with
	// X-RateLimit-Scope: global.
	Global limiters.Limiter
	// Rules, when set, can become unreadable (a fault); the service then
	// applies its conservative defaults.
	Rules *RuleSource
	// ForwardRejected forwards denied requests downstream as well. It is the
	// defect of faulty/forward-rejected; never set it otherwise.
	ForwardRejected bool
	// Metrics, when set, records every decision.
	Metrics *Metrics
	// Name identifies the instance in responses (X-RL-Instance).
	Name string

	// delays holds the keys of tiers that delay (serveDelayed).
	delays delayer
	// changed holds, per tier, the limits a declared limit change put in
	// place of its own (ChangeLimits): the headers advertise them.
	changedMu sync.RWMutex
	changed   map[string][]policy.Limit
}

// ChangeLimits applies a declared limit change (policy.Change) to tier:
// limits take the place of the tier's own in its limiter, which keeps
// every key's state (limiters.Reloader). The tier's limits as the policy
// declares them undo it. An error names a limiter that cannot change in
// place.
func (s *Service) ChangeLimits(tier string, limits []policy.Limit) error {
	lim, ok := s.Limiters[tier]
	if !ok {
		return fmt.Errorf("service: no tier %q", tier)
	}
	r, ok := lim.(limiters.Reloader)
	if !ok {
		return fmt.Errorf("service: tier %q's limiter (%T) cannot change its limits in place", tier, lim)
	}
	if err := r.Reload(limits); err != nil {
		return fmt.Errorf("service: tier %q: %w", tier, err)
	}
	if st, ok := lim.(limiters.StaleAdvertiser); ok && st.AdvertisesOldLimits() {
		return nil // the defect of faulty/advertises-old-limit
	}
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	if s.changed == nil {
		s.changed = map[string][]policy.Limit{}
	}
	s.changed[tier] = append([]policy.Limit(nil), limits...)
	return nil
}

// ApplyChange applies the policy's declared limit change name to every
// tier it names, or (name "") gives every tier a declared change is of its
// declared limits back.
func (s *Service) ApplyChange(name string) error {
	if name == "" {
		for _, t := range s.Policy.Tiers {
			for _, c := range s.Policy.Changes {
				if c.Tier == t.Name {
					if err := s.ChangeLimits(t.Name, t.Limits); err != nil {
						return err
					}
					break
				}
			}
		}
		return nil
	}
	c, ok := s.Policy.ChangeNamed(name)
	if !ok {
		var names []string
		for _, c := range s.Policy.Changes {
			names = append(names, c.Name)
		}
		return fmt.Errorf("service: the policy declares no limit change %q (it declares: %s)", name, strings.Join(names, ", "))
	}
	return s.ChangeLimits(c.Tier, c.Limits)
}

// limitsOf is the limits tier's headers advertise: a declared change's
// when one is in place, else the tier's own.
func (s *Service) limitsOf(tier *policy.Tier) []policy.Limit {
	s.changedMu.RLock()
	defer s.changedMu.RUnlock()
	if ls, ok := s.changed[tier.Name]; ok && len(ls) == len(tier.Limits) {
		return ls
	}
	return tier.Limits
}

// ScopeHeader names the limit that refused a request when it is not the
// key's own ("global" for the aggregate guard).
const ScopeHeader = headers.Scope

// FallbackHeader tells the client that the limiter's failure mode, not its
// store, made the decision (value: open, closed, local or queue). rlverify
// records it and judges such decisions by the declared failure mode.
const FallbackHeader = headers.Fallback

// MaxKeyLen bounds an accepted API key when the policy declares no
// identity.max_length.
const MaxKeyLen = 200

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// errIdentity is a request whose key the service refuses to read.
type errIdentity struct {
	status int
	msg    string
}

// identity reads the caller's key where the policy's identity says it
// travels and normalises it as declared: surrounding white space trimmed
// (when declared), case folded (when declared case-insensitive), a repeated
// identity resolved (first, last or refused), a key beyond max_length
// refused or cut. Keys must be printable ASCII. key is what the limiter
// counts, tenant whom the request is served as (the downstream's key): the
// same unless the policy declares them different occurrences of a repeated
// identity (identity.tenant_occurrence), and then the service does as it
// declares, the mismatch included.
func (s *Service) identity(r *http.Request) (key, tenant string, _ *errIdentity) {
	id := &s.Policy.Identity
	var vals []string
	switch id.In {
	case policy.InQuery:
		vals = r.URL.Query()[id.Name]
	case policy.InCookie:
		for _, c := range r.Cookies() {
			if c.Name == id.Name {
				vals = append(vals, c.Value)
			}
		}
	default:
		for _, v := range r.Header.Values(id.Name) {
			if id.In == policy.InBearer {
				tok, ok := policy.BearerToken(v)
				if !ok {
					return "", "", &errIdentity{http.StatusUnauthorized, "want Authorization: Bearer KEY"}
				}
				v = tok
			}
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return "", "", &errIdentity{http.StatusUnauthorized, "missing API key in " + id.Describe()}
	}
	k, repeated, tooLong := id.Key(vals)
	if repeated {
		return "", "", &errIdentity{http.StatusBadRequest, "the API key is given more than once"}
	}
	if tooLong || !wellFormedKey(k, id.MaxLength) {
		return "", "", &errIdentity{http.StatusUnauthorized, "malformed API key"}
	}
	tenant = k
	if id.Mismatched() {
		if tenant = id.TenantKey(vals); !wellFormedKey(tenant, id.MaxLength) {
			return "", "", &errIdentity{http.StatusUnauthorized, "malformed API key"}
		}
	}
	return k, tenant, nil
}

// wellFormedKey reports whether k is a key the service accepts: printable
// ASCII, not empty, and no longer than MaxKeyLen when the policy declares
// no maximum (a declared maximum is Identity.Key's to apply).
func wellFormedKey(k string, declaredMax int) bool {
	if k == "" || (declaredMax == 0 && len(k) > MaxKeyLen) {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Name != "" {
		w.Header().Set("X-RL-Instance", s.Name)
	}
	if s.Wall != nil {
		w.Header().Set("Date", s.Wall().UTC().Format(http.TimeFormat))
	}
	switch r.URL.Path {
	case "/healthz":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
		return
	case "/metrics":
		if s.Metrics != nil {
			s.Metrics.ServeHTTP(w, r)
			return
		}
	}
	key, tenant, ierr := s.identity(r)
	if ierr != nil {
		http.Error(w, ierr.msg, ierr.status)
		return
	}
	pol, lims, fallback := s.Policy, s.Limiters, ""
	if s.Rules.Down() {
		if s.Rules.RejectWhenDown {
			headers.SetRetryAfter(w.Header(), time.Second)
			http.Error(w, "rate-limit rules unavailable", http.StatusServiceUnavailable)
			return
		}
		pol, lims, fallback = s.Rules.Fallback, s.Rules.Limiters, FallbackRules
	}
	if _, exempt := pol.ExemptFor(key); exempt {
		// Never limited: no store call, no rate-limit headers.
		if s.Downstream != nil {
			if err := s.Downstream.Forward(r.Context(), tenant); err != nil {
				http.Error(w, "downstream: "+err.Error(), http.StatusBadGateway)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	tier, ok := pol.TierFor(key)
	if !ok {
		http.Error(w, "no tier for this API key", http.StatusForbidden)
		return
	}
	cost, cerr := requestCost(pol.Cost, r)
	if cerr != nil {
		http.Error(w, cerr.Error(), http.StatusBadRequest)
		return
	}
	identity := key
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" && (s.TrustXFF || s.trustedPeer(r.RemoteAddr)) {
		first, _, _ := strings.Cut(xff, ",")
		// Only a well-formed address may become part of the store key.
		if ip := net.ParseIP(strings.TrimSpace(first)); ip != nil {
			identity = key + "@" + ip.String()
		}
	}
	lim := lims[tier.Name]
	if lim == nil {
		http.Error(w, "no limiter for tier "+tier.Name, http.StatusInternalServerError)
		return
	}
	if s.Global != nil && pol.Global != nil {
		gd, err := s.Global.Allow(r.Context(), s.now(), "rl:{global}:"+pol.Action+":"+pol.Version, 1)
		if err == nil && !gd.Allowed {
			w.Header().Set(ScopeHeader, "global")
			headers.SetRetryAfter(w.Header(), gd.RetryAfter)
			http.Error(w, "global rate limit", http.StatusTooManyRequests)
			return
		}
	}
	if dl := pol.DelayFor(tier); dl != nil && fallback == "" {
		s.serveDelayed(w, r, tier, dl, pol.LimitKey(tier, identity, 0), tenant)
		return
	}
	start := time.Now()
	d, err := lim.Allow(r.Context(), s.now(), pol.LimitKey(tier, identity, 0), cost)
	if fallback != "" && d.Fallback == "" {
		d.Fallback = fallback
	}
	s.Metrics.observe(tier.Name, d, err, time.Since(start))
	if err != nil {
		// A limiter that has no failure mode of its own: fail closed, loudly.
		headers.SetRetryAfter(w.Header(), time.Second)
		http.Error(w, "rate limiter store unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	advertised := tier.Limits
	if fallback == "" {
		advertised = s.limitsOf(tier)
	}
	if err := s.writeHeaders(w, tier, advertised, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if d.Fallback != "" {
		w.Header().Set(FallbackHeader, d.Fallback)
	}
	if !d.Allowed {
		status := http.StatusTooManyRequests
		if d.Fallback == limiters.FallbackClosed || d.Fallback == limiters.FallbackQueue {
			status = http.StatusServiceUnavailable
		}
		if !d.OmitRetryAfter {
			headers.SetRetryAfter(w.Header(), d.RetryAfter)
		}
		if s.ForwardRejected && s.Downstream != nil {
			_ = s.Downstream.Forward(r.Context(), tenant)
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	s.admit(w, r, tenant)
}

// admit answers an admitted request: forwarded to the downstream (502 when
// it fails), else 200 "ok". The immediate and the delayed paths share it.
func (s *Service) admit(w http.ResponseWriter, r *http.Request, tenant string) {
	if s.Downstream != nil {
		if err := s.Downstream.Forward(r.Context(), tenant); err != nil {
			http.Error(w, "downstream: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Service) trustedPeer(remote string) bool {
	if len(s.Policy.Identity.TrustedProxies) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	for _, c := range s.Policy.Identity.TrustedProxies {
		if _, n, err := net.ParseCIDR(c); err == nil && ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// writeHeaders sends the rate-limit fields the policy declares for the
// tier's limit that decided d (of limits, the tier's in force: the one
// whose N is d.Limit, else the first), in the declared RateLimit
// generation, through headers.Writer.
func (s *Service) writeHeaders(w http.ResponseWriter, tier *policy.Tier, limits []policy.Limit, d limiters.Decision) error {
	lim := limits[0]
	for _, l := range limits {
		if l.Count == d.Limit {
			lim = l
			break
		}
	}
	hp := s.Policy.Headers
	hw := headers.Writer{Generation: headers.Generation(hp.RateLimit), XRateLimit: hp.XRateLimit, XReset: headers.ResetForm(hp.XReset)}
	q := headers.Quota{Policy: tier.Name, Limit: lim.Count, Window: lim.W(), Remaining: d.Remaining, Reset: d.ResetAfter}
	if err := hw.Write(w.Header(), q, s.now()); err != nil {
		return fmt.Errorf("tier %s: %w", tier.Name, err)
	}
	return nil
}

// Server wraps h in an http.Server with the timeouts a public service
// needs: slow clients cannot hold connections open forever.
func Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, 1<<20),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// errClosed reports a listener closed on purpose.
func errClosed(err error) bool {
	return err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed)
}
