package testsvc

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Common is the part of every service's configuration that is not about
// its limits.
type Common struct {
	// Now is the service clock; time.Now when nil (redisbucket: Redis TIME).
	Now func() time.Time
	// Upstream counts what the service forwards; a fresh one when nil.
	// Instances of one deployment share one.
	Upstream *Upstream
	// Quirks are the deliberate defects switched on; none by default.
	Quirks Quirks
	// Instance, when set, is sent in the InstanceHeader of every answer.
	Instance string
	// ServeLast serves a repeated identity as its last occurrence
	// (authentication, tier, upstream) and limits on that one too, where
	// the default is the first. The honest policy then says
	// tenant_occurrence: last and limiter_occurrence: last.
	ServeLast bool
}

// InstanceHeader names the instance that answered.
const InstanceHeader = "X-Served-By"

// maxKeyBytes bounds a key only as far as HTTP already does; no service
// declares a shorter maximum length.
const maxKeyBytes = 1 << 16

// decision is one limiting decision.
type decision struct {
	allowed bool
	// limit is the capacity or count per window the headers announce (the
	// declared one, whatever the quirks hold).
	limit int64
	// remaining is what is left after the decision (may be negative in
	// debt; headers clamp it).
	remaining int64
	// retry is how long until a request would be admitted (refusals).
	retry time.Duration
	// reset is how long until the quota is whole again.
	reset time.Duration
}

// gate is what every service does around its decision: the internal
// endpoints, the identity, the quirks that act outside the algorithm, the
// answers and their counting.
type gate struct {
	service  string
	instance string
	now      func() time.Time
	up       *Upstream
	q        Quirks
	// serveLast: a repeated identity is served (and limited) as its last
	// occurrence.
	serveLast bool
}

// Quirks every service has; each service adds its own.
var commonQuirks = []string{
	QuirkCutKeys, QuirkLastIdentityWins, QuirkFirstIdentityWins, QuirkTrustXFF, QuirkSharedPrefix, QuirkRacy,
	QuirkForwardRejected, QuirkFaster, QuirkCapacityPlusOne, QuirkRetryAfterDown, QuirkRemainingOffByOne,
}

func newGate(service string, c Common, extraQuirks ...string) (*gate, error) {
	if err := c.Quirks.only(service, append(append([]string(nil), commonQuirks...), extraQuirks...)); err != nil {
		return nil, err
	}
	if c.Quirks.FirstIdentityWins && !c.ServeLast {
		return nil, fmt.Errorf("testsvc: quirk %s needs a service that serves the last occurrence (ServeLast): this one serves the first", QuirkFirstIdentityWins)
	}
	if c.Quirks.LastIdentityWins && c.ServeLast {
		return nil, fmt.Errorf("testsvc: quirk %s needs a service that serves the first occurrence: this one serves the last (ServeLast)", QuirkLastIdentityWins)
	}
	g := &gate{service: service, instance: c.Instance, now: c.Now, up: c.Upstream, q: c.Quirks, serveLast: c.ServeLast}
	if g.now == nil {
		g.now = time.Now
	}
	if g.up == nil {
		g.up = NewUpstream()
	}
	return g, nil
}

// internal serves UpstreamPath and MetricsPath and reports whether r was
// one of them. Every instance serves them; they show the shared Upstream.
func (g *gate) internal(w http.ResponseWriter, r *http.Request) bool {
	if g.instance != "" {
		w.Header().Set(InstanceHeader, g.instance)
	}
	switch r.URL.Path {
	case UpstreamPath:
		g.up.ServeJSON(w, r)
	case MetricsPath:
		g.up.MetricsHandler().ServeHTTP(w, r)
	default:
		return false
	}
	return true
}

// reply writes an answer and counts it in ResponsesMetric.
func (g *gate) reply(w http.ResponseWriter, status int, contentType, body string) {
	g.up.responded(status)
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// answer is a status, content type and body.
type answer struct {
	status      int
	contentType string
	body        string
}

// settle answers a decided request: admitted, it is forwarded upstream
// and answered ok; refused, it is answered refused (and forwarded all the
// same under forward-rejected).
func (g *gate) settle(w http.ResponseWriter, id identity, d decision, ok, refused answer) {
	if d.allowed || g.q.ForwardRejected {
		g.up.Forward(id.declared)
	}
	a := refused
	if d.allowed {
		a = ok
	}
	g.reply(w, a.status, a.contentType, a.body)
}

// identity is who a request is from.
type identity struct {
	// declared is the caller as the service's honest policy names it:
	// authentication, the tier and the upstream counters use it.
	declared string
	// limiter is the key the limiter decides on: the same, unless a quirk
	// derives it otherwise.
	limiter string
}

// identify reads the occurrences vals of the identity (in request order),
// normalised as the service declares (trim: surrounding white space is not
// part of the key; fold: letter case is not), and derives the limiter key
// through the quirks. ok is false when there is no valid key: none, empty,
// not UTF-8, control characters, or beyond what HTTP carries.
func (g *gate) identify(r *http.Request, vals []string, trim, fold bool) (id identity, ok bool) {
	if len(vals) == 0 {
		return identity{}, false
	}
	norm := func(v string, fold bool) string {
		if trim {
			v = strings.TrimSpace(v)
		}
		if fold {
			v = strings.ToLower(v)
		}
		return v
	}
	served := vals[0]
	if g.serveLast {
		served = vals[len(vals)-1]
	}
	id.declared = norm(served, fold)
	if !validKey(id.declared) {
		return identity{}, false
	}
	raw := served
	switch {
	case g.q.LastIdentityWins:
		raw = vals[len(vals)-1]
	case g.q.FirstIdentityWins:
		raw = vals[0]
	}
	k := norm(raw, (fold && !g.q.NoFoldCase) || g.q.FoldCase)
	if n := g.q.CutKeys; n > 0 && len(k) > n {
		k = k[:n]
	}
	if n := g.q.SharedPrefix; n > 0 {
		k = firstRunes(k, n)
	}
	if g.q.TrustXFF {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			k += "|xff=" + strings.Join(xff, ",")
		}
	}
	id.limiter = k
	return id, true
}

func validKey(k string) bool {
	if k == "" || len(k) > maxKeyBytes || !utf8.ValidString(k) {
		return false
	}
	return strings.IndexFunc(k, unicode.IsControl) < 0
}

// firstRunes returns the first n characters of s.
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// seconds rounds d to whole seconds for a header: up, so that advice is
// never too short (a positive wait is at least 1), or down.
func seconds(d time.Duration, down bool) int64 {
	if d <= 0 {
		return 0
	}
	if down {
		return int64(d / time.Second)
	}
	return int64((d + time.Second - 1) / time.Second)
}

// remaining is the remaining count the headers show.
func (g *gate) remaining(d decision) int64 {
	r := max(d.remaining, 0)
	if g.q.RemainingOffByOne {
		r++
	}
	return r
}

// retryAfter sets Retry-After as delay-seconds for a wait.
func (g *gate) retryAfter(h http.Header, wait time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(seconds(wait, g.q.RetryAfterDown), 10))
}
