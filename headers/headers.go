// Package headers parses and writes the rate-limit response fields:
// Retry-After (RFC 9110 §10.2.3), the IETF RateLimit fields in the three
// generations the drafts have used (draft-ietf-httpapi-ratelimit-headers),
// and the de-facto X-RateLimit-* fields. It is the one place where rlverify
// reads or writes them: the engine records them, the checks judge them and
// the reference service sends them through this package.
//
// Every Structured Field (RFC 9651) is parsed and serialised by
// github.com/dunglas/httpsfv. Parsers return an error that names the field,
// the value and what is wrong, and never panic.
//
// headers is a leaf package: it imports only the standard library and
// httpsfv (no other rlverify package).
package headers

import (
	"net/http"
	"strings"
)

// Field names.
const (
	RetryAfter = "Retry-After"
	// RateLimit is the structured (draft 08+) list or the dictionary
	// (draft 07) of current service limits.
	RateLimit = "RateLimit"
	// RateLimitPolicy lists the quota policies (drafts 03 and later).
	RateLimitPolicy = "RateLimit-Policy"
	// The split generation (drafts 00–06).
	RateLimitLimit     = "RateLimit-Limit"
	RateLimitRemaining = "RateLimit-Remaining"
	RateLimitReset     = "RateLimit-Reset"
	// The de-facto fields most limiters send.
	XRateLimitLimit     = "X-RateLimit-Limit"
	XRateLimitRemaining = "X-RateLimit-Remaining"
	XRateLimitReset     = "X-RateLimit-Reset"
	// Fallback is rlverify's own field: the target says that its failure
	// mode, not its store, made the decision (open, closed, local, queue,
	// rules). Such decisions are judged by fail-mode alone.
	Fallback = "X-RateLimit-Fallback"
	// Scope is rlverify's own field: a limit other than the key's own
	// decided ("global" for an aggregate guard across keys).
	Scope = "X-RateLimit-Scope"
)

// Generation names a generation of the IETF RateLimit fields. The values
// are those of policy.RateLimitHeaders, so a declared generation converts
// with Generation(p.Headers.RateLimit).
type Generation string

// The RateLimit field generations.
const (
	// None: no RateLimit fields.
	None Generation = ""
	// Structured (draft 08 and later): RateLimit: "name";r=R;t=T and
	// RateLimit-Policy: "name";q=Q;w=W, Structured Field lists.
	Structured Generation = "structured"
	// Dictionary (draft 07): RateLimit: limit=N, remaining=R, reset=T, a
	// Structured Field dictionary, and optionally RateLimit-Policy: N;w=W.
	Dictionary Generation = "dictionary"
	// Split (drafts 00–06): RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset (delta seconds), and optionally RateLimit-Policy.
	Split Generation = "split"
)

// Fields are the raw values of the rate-limit fields of one response, ""
// for an absent field. The zero value is a response without any. A
// history event records them as they are (history.Event embeds Fields;
// the JSON names are the history's).
type Fields struct {
	RetryAfter      string `json:"retry_after,omitempty"`
	RateLimit       string `json:"ratelimit,omitempty"`
	RateLimitPolicy string `json:"ratelimit_policy,omitempty"`
	XLimit          string `json:"x_limit,omitempty"`
	XRemaining      string `json:"x_remaining,omitempty"`
	XReset          string `json:"x_reset,omitempty"`
	// RateLimit-Limit, -Remaining and -Reset (the split header generation
	// of the early IETF drafts).
	RateLimitLimit     string `json:"rl_limit,omitempty"`
	RateLimitRemaining string `json:"rl_remaining,omitempty"`
	RateLimitReset     string `json:"rl_reset,omitempty"`
	// Fallback is the target's own statement (header X-RateLimit-Fallback)
	// that its failure mode, not its store, made this decision: "open",
	// "closed", "local" or "queue". Such decisions are judged by fail-mode.
	Fallback string `json:"fallback,omitempty"`
	// Scope is the target's statement (header X-RateLimit-Scope) that a
	// limit other than the key's own decided, e.g. "global" for an
	// aggregate guard across all keys. Such decisions are not judged against
	// the key's limits.
	Scope string `json:"scope,omitempty"`
}

// RateLimitOnly is f with only the RateLimit fields (both generations):
// all Read looks at, so a cache of its results keys on this.
func (f Fields) RateLimitOnly() Fields {
	return Fields{RateLimit: f.RateLimit, RateLimitPolicy: f.RateLimitPolicy,
		RateLimitLimit: f.RateLimitLimit, RateLimitRemaining: f.RateLimitRemaining, RateLimitReset: f.RateLimitReset}
}

// FromHTTP reads the rate-limit fields of a response. The field lines of a
// Structured Field are combined with ", " as RFC 9651 §4.2 says a parser
// must (a list may be split over several lines); of the other fields the
// first line counts.
//
// It looks the names up in their canonical forms, computed once: h.Get
// canonicalises its argument on every call, which was a tenth of the load
// engine's CPU (it reads every response's fields).
func FromHTTP(h http.Header) Fields {
	return Fields{
		RetryAfter:         first(h, canonRetryAfter),
		RateLimit:          joined(h, canonRateLimit),
		RateLimitPolicy:    joined(h, canonRateLimitPolicy),
		RateLimitLimit:     joined(h, canonRateLimitLimit),
		RateLimitRemaining: joined(h, canonRateLimitRemaining),
		RateLimitReset:     joined(h, canonRateLimitReset),
		XLimit:             first(h, canonXRateLimitLimit),
		XRemaining:         first(h, canonXRateLimitRemaining),
		XReset:             first(h, canonXRateLimitReset),
		Fallback:           first(h, canonFallback),
		Scope:              first(h, canonScope),
	}
}

// The canonical forms (http.CanonicalHeaderKey) of the field names, as
// http.Header keys them.
var (
	canonRetryAfter          = http.CanonicalHeaderKey(RetryAfter)
	canonRateLimit           = http.CanonicalHeaderKey(RateLimit)
	canonRateLimitPolicy     = http.CanonicalHeaderKey(RateLimitPolicy)
	canonRateLimitLimit      = http.CanonicalHeaderKey(RateLimitLimit)
	canonRateLimitRemaining  = http.CanonicalHeaderKey(RateLimitRemaining)
	canonRateLimitReset      = http.CanonicalHeaderKey(RateLimitReset)
	canonXRateLimitLimit     = http.CanonicalHeaderKey(XRateLimitLimit)
	canonXRateLimitRemaining = http.CanonicalHeaderKey(XRateLimitRemaining)
	canonXRateLimitReset     = http.CanonicalHeaderKey(XRateLimitReset)
	canonFallback            = http.CanonicalHeaderKey(Fallback)
	canonScope               = http.CanonicalHeaderKey(Scope)
)

// first is h.Get for a canonical key.
func first(h http.Header, canon string) string {
	if v := h[canon]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// joined is the lines of canonical key canon joined with ", ".
func joined(h http.Header, canon string) string {
	v := h[canon]
	switch len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	}
	return strings.Join(v, ", ")
}

// Detect names the generation a response's fields are in: split when any
// RateLimit-Limit/-Remaining/-Reset is present, dictionary when RateLimit
// is a dictionary with a limit, remaining or reset key, structured when
// RateLimit is present otherwise, and None without RateLimit fields. It is
// for callers with no declared generation (a discovery request); checks
// judge the declared one.
func Detect(f Fields) Generation {
	switch {
	case f.RateLimitLimit != "" || f.RateLimitRemaining != "" || f.RateLimitReset != "":
		return Split
	case f.RateLimit == "":
		return None
	case isDictionary(f.RateLimit):
		return Dictionary
	}
	return Structured
}
