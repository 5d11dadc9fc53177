package testsvc

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The metered service's identity and cost headers and defaults (its
// honest policy is MeteredPolicyYAML).
const (
	MeteredKeyHeader   = "X-Client-Id"
	MeteredUnitsHeader = "X-Request-Units"
	// MeteredFailHeader, on a request, makes its downstream fail: the
	// service answers 502 (after taking the request's tokens).
	MeteredFailHeader = "X-Upstream-Fail"
	// MaxMeteredUnits is the largest cost the service accepts.
	MaxMeteredUnits     = 32
	DefaultMeteredBurst = 8
	DefaultMeteredRate  = 4.0
)

// MeteredConfig configures the metered service.
type MeteredConfig struct {
	// Burst is the bucket's capacity K (DefaultMeteredBurst when 0).
	Burst int
	// Rate is the refill per second (DefaultMeteredRate when 0 and not
	// OneOff).
	Rate float64
	// OneOff makes it a one-off quota: Burst requests' worth, never
	// refilled (x/time/rate's Limiter with a zero Limit).
	OneOff bool
	// Refills, for a one-off quota, is the defect of one that refills
	// after all (at this rate per second) although it declares none.
	Refills float64
	// IgnoreCost is the defect of a service that charges every request one
	// token whatever it asks for (a weighted API whose limiter forgot the
	// weight): a request of cost K is admitted twice in a row.
	IgnoreCost bool
	// ChargePeeks is the defect of one that charges a cost-0 "status" peek
	// one token: peeks drain the bucket and a full request is then refused.
	ChargePeeks bool
	// NoRetryAfter drops Retry-After from refusals (a defect of another
	// property: the weighted checks must stay quiet).
	NoRetryAfter bool
	// Refunds gives a request's tokens back when its downstream fails
	// (Reservation.CancelAt, MeteredFailHeader): the honest policy then
	// declares refund_on: [502].
	Refunds bool
	// ForgetsRefund is the defect of one that declares refunds and keeps
	// the tokens of failed requests.
	ForgetsRefund bool
	// AdvertiseLimit sends X-RateLimit-Limit (the capacity in force) on
	// every answer, so a limit change can be seen from outside.
	AdvertiseLimit bool
	// ReloadResets is the defect of one that applies a limit change
	// (MeteredLimitsPath) by dropping every key's limiter: each starts again
	// from a full bucket of the new limit.
	ReloadResets bool
	// ReloadNewKeysOnly is the defect of one whose limit change reaches
	// only the keys first seen after it: existing keys keep the old limit
	// (while the answers advertise the new one).
	ReloadNewKeysOnly bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// MeteredLimitsPath takes a limit change: POST with ?burst=N&rate=R (per
// second) sets every key's Limiter to the new limits from now on
// (x/time/rate's SetBurstAt and SetLimitAt keep each key's tokens, capped
// at the new burst); each later key starts with them.
const MeteredLimitsPath = "/admin/limits"

// Metered is a weighted API in the manner of a metered gateway, written on
// golang.org/x/time/rate (a library rlverify did not write): any path and
// method, the client in MeteredKeyHeader (401 when missing), each request's
// cost in MeteredUnitsHeader (0 … MaxMeteredUnits, default 1; 400
// otherwise), decided by the key's Limiter.AllowN(now, cost). A cost of 0
// is a peek: AllowN(now, 0) always admits and takes nothing. 200 when
// admitted, 429 with Retry-After (whole seconds until the cost, at most K,
// has refilled, rounded up) when refused; a one-off quota sends no
// Retry-After (nothing comes back).
type Metered struct {
	cfg  MeteredConfig
	mu   sync.Mutex
	keys map[string]*rate.Limiter
	// burst and limit are the limits in force (cfg's until a change).
	burst int
	limit float64
}

// NewMetered builds a metered instance.
func NewMetered(cfg MeteredConfig) *Metered {
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultMeteredBurst
	}
	if cfg.Rate <= 0 && !cfg.OneOff {
		cfg.Rate = DefaultMeteredRate
	}
	if cfg.OneOff {
		cfg.Rate = cfg.Refills
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Metered{cfg: cfg, keys: map[string]*rate.Limiter{}, burst: cfg.Burst, limit: cfg.Rate}
}

func (m *Metered) limiter(key string) (*rate.Limiter, int, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.keys[key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(m.limit), m.burst)
		m.keys[key] = l
	}
	return l, m.burst, m.limit
}

// changeLimits serves MeteredLimitsPath.
func (m *Metered) changeLimits(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST "+MeteredLimitsPath+"?burst=N&rate=R", http.StatusMethodNotAllowed)
		return
	}
	burst, err1 := strconv.Atoi(r.URL.Query().Get("burst"))
	lim, err2 := strconv.ParseFloat(r.URL.Query().Get("rate"), 64)
	if err1 != nil || err2 != nil || burst < 1 || lim <= 0 || math.IsInf(lim, 0) {
		http.Error(w, "want ?burst=N&rate=R with N ≥ 1 and R > 0", http.StatusBadRequest)
		return
	}
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.burst, m.limit = burst, lim
	switch {
	case m.cfg.ReloadResets:
		m.keys = map[string]*rate.Limiter{}
	case m.cfg.ReloadNewKeysOnly:
	default:
		for _, l := range m.keys {
			l.SetBurstAt(now, burst)
			l.SetLimitAt(now, rate.Limit(lim))
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// ServeHTTP implements http.Handler.
func (m *Metered) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	if r.URL.Path == MeteredLimitsPath {
		m.changeLimits(w, r)
		return
	}
	key := r.Header.Get(MeteredKeyHeader)
	if key == "" {
		http.Error(w, "missing "+MeteredKeyHeader, http.StatusUnauthorized)
		return
	}
	units := 1
	if v := r.Header.Get(MeteredUnitsHeader); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxMeteredUnits {
			http.Error(w, fmt.Sprintf("%s: want 0 … %d", MeteredUnitsHeader, MaxMeteredUnits), http.StatusBadRequest)
			return
		}
		units = n
	}
	charge := units
	switch {
	case m.cfg.IgnoreCost && units > 0:
		charge = 1
	case m.cfg.ChargePeeks && units == 0:
		charge = 1
	}
	now := m.cfg.Now()
	l, burst, limit := m.limiter(key)
	if m.cfg.AdvertiseLimit {
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(burst))
	}
	// AllowN as a reservation, so a failed downstream can give it back.
	res := l.ReserveN(now, charge)
	if res.OK() && res.DelayFrom(now) == 0 {
		if r.Header.Get(MeteredFailHeader) != "" {
			if m.cfg.Refunds && !m.cfg.ForgetsRefund {
				res.CancelAt(now)
			}
			http.Error(w, "upstream failed", http.StatusBadGateway)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	if res.OK() {
		res.CancelAt(now) // not admitted now: take nothing
	}
	if limit > 0 && !m.cfg.NoRetryAfter && !m.cfg.OneOff {
		missing := float64(min(charge, burst)) - l.TokensAt(now)
		secs := int64(math.Ceil(math.Max(missing, 0) / limit))
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
	http.Error(w, "too many units", http.StatusTooManyRequests)
}

// MeteredPolicyYAML is the honest policy of a metered service built from
// cfg (its defects aside): a token bucket of Burst refilled at Rate (rate:
// 0 for a one-off quota), the cost in MeteredUnitsHeader from 0 (peeks) to
// MaxMeteredUnits.
func MeteredPolicyYAML(cfg MeteredConfig) []byte {
	c := NewMetered(cfg).cfg
	r := strconv.FormatFloat(c.Rate, 'f', -1, 64) + "/s"
	retry := "true"
	off := ""
	if cfg.OneOff {
		r, retry = "0", "false"
		off = "# A one-off quota sends no Retry-After: nothing comes back to wait for.\nchecks_off: [retry-after]\n"
	}
	if cfg.Refunds {
		off += "# A failed downstream (502) gives the request's tokens back.\nrefund_on: [502]\n"
	}
	return fmt.Appendf(nil, `# The metered test service (golang.org/x/time/rate AllowN): weighted requests.
name: metered
tiers:
  - name: metered
    key_prefix: ""
    limits:
      - capacity: %d
        rate: %s
default_tier: metered
identity:
  in: header
  name: %s
cost:
  name: %s
  min: 0
  max: %d
headers:
  retry_after: %s
failure:
  mode: open
%s`, c.Burst, r, MeteredKeyHeader, MeteredUnitsHeader, MaxMeteredUnits, retry, off)
}
