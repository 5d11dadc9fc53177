package testsvc

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Quirks are the deliberate defects a service can be built with. The zero
// value is the correct service. Each quirk breaks exactly one property of
// the service's honest policy (the table in the package doc); a service
// refuses a quirk that does not apply to it.
type Quirks struct {
	// CutKeys > 0 keys the limiter on the first CutKeys bytes of the key
	// (a fixed-width key column): long keys that differ only later share
	// one quota.
	CutKeys int
	// LastIdentityWins keys the limiter on the last occurrence of a
	// repeated identity while authentication and the upstream see the
	// first, as the honest policy says.
	LastIdentityWins bool
	// FirstIdentityWins keys the limiter on the first occurrence of a
	// repeated identity while a service that serves the last (ServeLast)
	// authenticates and forwards the last, as its honest policy says.
	FirstIdentityWins bool
	// FoldCase lower-cases the limiter key of a service whose policy says
	// keys are case-sensitive.
	FoldCase bool
	// NoFoldCase keeps the letter case of the limiter key of a service
	// whose policy says keys are case-insensitive.
	NoFoldCase bool
	// TrustXFF adds the X-Forwarded-For header, when present, to the
	// limiter key, whoever sent it.
	TrustXFF bool
	// DeductOnReject charges refused requests too.
	DeductOnReject bool
	// SharedPrefix > 0 keys the limiter on the first SharedPrefix
	// characters of the key (a limiter keyed on a tenant prefix): keys
	// that share them share one quota.
	SharedPrefix int
	// Racy > 0 reads the state, pauses Racy and writes it back in a
	// separate step, so concurrent requests decide on the same state.
	Racy time.Duration
	// ForwardRejected forwards refused requests upstream too.
	ForwardRejected bool
	// Faster > 0 refills Faster times faster than declared (windows
	// Faster times shorter).
	Faster float64
	// CapacityPlusOne holds K+1 tokens (N+1 per window) where K is declared.
	CapacityPlusOne bool
	// RetryAfterDown rounds Retry-After down instead of up.
	RetryAfterDown bool
	// RemainingOffByOne reports one more remaining than there is.
	RemainingOffByOne bool
	// FailOpen admits while the store is down although the service is
	// configured (and its policy declares) to fail closed.
	FailOpen bool
	// PerPath keys the limiter on the path too, where the policy says every
	// path under its prefix shares the key's one quota.
	PerPath bool
	// LimitSkipped limits the keys of the windowed service's skip list
	// like any other, where the policy declares them exempt.
	LimitSkipped bool
}

// DefaultRacyPause is the pause of the racy quirk when none is given.
const DefaultRacyPause = 2 * time.Millisecond

// The quirk names, as written after --quirk.
const (
	QuirkCutKeys           = "cut-keys"
	QuirkLastIdentityWins  = "last-identity-wins"
	QuirkFirstIdentityWins = "first-identity-wins"
	QuirkLimitSkipped      = "limit-skipped"
	QuirkFoldCase          = "fold-case"
	QuirkNoFoldCase        = "no-fold-case"
	QuirkTrustXFF          = "trust-xff"
	QuirkDeductOnReject    = "deduct-on-reject"
	QuirkSharedPrefix      = "shared-prefix"
	QuirkRacy              = "racy"
	QuirkForwardRejected   = "forward-rejected"
	QuirkFaster            = "faster"
	QuirkCapacityPlusOne   = "capacity+1"
	QuirkRetryAfterDown    = "retry-after-down"
	QuirkRemainingOffByOne = "remaining-off-by-one"
	QuirkFailOpen          = "fail-open"
	QuirkPerPath           = "per-path"
)

// quirk is one entry of the quirk table: how its value is written, how it
// is set and whether it is on.
type quirk struct {
	name string
	// arg describes the value: "" none, else shown in messages.
	arg string
	set func(q *Quirks, v string) error
	on  func(q *Quirks) bool
}

var quirkTable = []quirk{
	{QuirkCutKeys, "N (bytes, ≥ 1)", func(q *Quirks, v string) error { return positiveInt(v, &q.CutKeys) },
		func(q *Quirks) bool { return q.CutKeys > 0 }},
	{QuirkLastIdentityWins, "", func(q *Quirks, _ string) error { q.LastIdentityWins = true; return nil },
		func(q *Quirks) bool { return q.LastIdentityWins }},
	{QuirkFirstIdentityWins, "", func(q *Quirks, _ string) error { q.FirstIdentityWins = true; return nil },
		func(q *Quirks) bool { return q.FirstIdentityWins }},
	{QuirkFoldCase, "", func(q *Quirks, _ string) error { q.FoldCase = true; return nil },
		func(q *Quirks) bool { return q.FoldCase }},
	{QuirkNoFoldCase, "", func(q *Quirks, _ string) error { q.NoFoldCase = true; return nil },
		func(q *Quirks) bool { return q.NoFoldCase }},
	{QuirkTrustXFF, "", func(q *Quirks, _ string) error { q.TrustXFF = true; return nil },
		func(q *Quirks) bool { return q.TrustXFF }},
	{QuirkDeductOnReject, "", func(q *Quirks, _ string) error { q.DeductOnReject = true; return nil },
		func(q *Quirks) bool { return q.DeductOnReject }},
	{QuirkSharedPrefix, "N (characters, ≥ 1)", func(q *Quirks, v string) error { return positiveInt(v, &q.SharedPrefix) },
		func(q *Quirks) bool { return q.SharedPrefix > 0 }},
	{QuirkRacy, "optional pause such as 5ms", func(q *Quirks, v string) error {
		q.Racy = DefaultRacyPause
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Second {
			return fmt.Errorf("%q: want a pause in (0, 1s] such as 5ms", v)
		}
		q.Racy = d
		return nil
	}, func(q *Quirks) bool { return q.Racy > 0 }},
	{QuirkForwardRejected, "", func(q *Quirks, _ string) error { q.ForwardRejected = true; return nil },
		func(q *Quirks) bool { return q.ForwardRejected }},
	{QuirkFaster, "F (factor > 0, ≠ 1, e.g. 1.1)", func(q *Quirks, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || f == 1 || f > 1000 || math.IsInf(f, 0) {
			return fmt.Errorf("%q: want a factor in (0, 1000] other than 1, e.g. 1.1", v)
		}
		q.Faster = f
		return nil
	}, func(q *Quirks) bool { return q.Faster > 0 }},
	{QuirkCapacityPlusOne, "", func(q *Quirks, _ string) error { q.CapacityPlusOne = true; return nil },
		func(q *Quirks) bool { return q.CapacityPlusOne }},
	{QuirkRetryAfterDown, "", func(q *Quirks, _ string) error { q.RetryAfterDown = true; return nil },
		func(q *Quirks) bool { return q.RetryAfterDown }},
	{QuirkRemainingOffByOne, "", func(q *Quirks, _ string) error { q.RemainingOffByOne = true; return nil },
		func(q *Quirks) bool { return q.RemainingOffByOne }},
	{QuirkFailOpen, "", func(q *Quirks, _ string) error { q.FailOpen = true; return nil },
		func(q *Quirks) bool { return q.FailOpen }},
	{QuirkPerPath, "", func(q *Quirks, _ string) error { q.PerPath = true; return nil },
		func(q *Quirks) bool { return q.PerPath }},
	{QuirkLimitSkipped, "", func(q *Quirks, _ string) error { q.LimitSkipped = true; return nil },
		func(q *Quirks) bool { return q.LimitSkipped }},
}

func positiveInt(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<16 {
		return fmt.Errorf("%q: want a whole number in 1 … 65536", v)
	}
	*dst = n
	return nil
}

// QuirkNames lists every quirk name in the order of the package doc.
func QuirkNames() []string {
	s := make([]string, len(quirkTable))
	for i, k := range quirkTable {
		s[i] = k.name
	}
	return s
}

// Set switches on the quirk written as NAME or NAME=VALUE (the form of
// --quirk). It makes *Quirks a flag value.
func (q *Quirks) Set(spec string) error {
	name, val, hasVal := strings.Cut(strings.TrimSpace(spec), "=")
	for _, k := range quirkTable {
		if k.name != name {
			continue
		}
		switch {
		case k.arg == "" && hasVal:
			return fmt.Errorf("testsvc: quirk %s takes no value (got %q)", name, spec)
		case k.arg != "" && !hasVal && name != QuirkRacy:
			return fmt.Errorf("testsvc: quirk %s needs a value: %s=%s", name, name, k.arg)
		}
		if err := k.set(q, val); err != nil {
			return fmt.Errorf("testsvc: quirk %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("testsvc: unknown quirk %q (want one of %s)", name, strings.Join(QuirkNames(), ", "))
}

// String lists the quirks that are on, as Set reads them.
func (q *Quirks) String() string {
	if q == nil {
		return ""
	}
	var s []string
	for _, k := range quirkTable {
		if !k.on(q) {
			continue
		}
		switch k.name {
		case QuirkCutKeys:
			s = append(s, fmt.Sprintf("%s=%d", k.name, q.CutKeys))
		case QuirkSharedPrefix:
			s = append(s, fmt.Sprintf("%s=%d", k.name, q.SharedPrefix))
		case QuirkRacy:
			s = append(s, fmt.Sprintf("%s=%s", k.name, q.Racy))
		case QuirkFaster:
			s = append(s, fmt.Sprintf("%s=%s", k.name, strconv.FormatFloat(q.Faster, 'g', -1, 64)))
		default:
			s = append(s, k.name)
		}
	}
	return strings.Join(s, ",")
}

// Type names the flag value for help texts.
func (q *Quirks) Type() string { return "quirk" }

// names returns the names of the quirks that are on.
func (q *Quirks) names() []string {
	var s []string
	for _, k := range quirkTable {
		if k.on(q) {
			s = append(s, k.name)
		}
	}
	return s
}

// only refuses quirks that service does not know: allowed lists the ones
// it does.
func (q *Quirks) only(service string, allowed []string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	var bad []string
	for _, n := range q.names() {
		if !ok[n] {
			bad = append(bad, n)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(allowed)
	return fmt.Errorf("testsvc: %s does not have quirk %s (its quirks: %s)", service, strings.Join(bad, ", "), strings.Join(allowed, ", "))
}

// capacity is the bucket size or count per window the service really
// holds for a declared one.
func (q *Quirks) capacity(declared int64) int64 {
	if q.CapacityPlusOne {
		return declared + 1
	}
	return declared
}

// speed is the factor by which the service really refills faster.
func (q *Quirks) speed() float64 {
	if q.Faster > 0 {
		return q.Faster
	}
	return 1
}
