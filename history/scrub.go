package history

import (
	"net/url"
	"sort"
	"strings"
	"sync"
)

// MinScrubbed is the shortest secret scrubbed wherever it appears inside a
// recorded value; a shorter one is replaced only where it is the whole
// value, so that a two-character key does not rewrite every "10" of a
// RateLimit header.
const MinScrubbed = 4

// Scrubber replaces known secrets (real API keys) in everything recorded
// from a run: a target may echo a key in any header or error, and the
// history, result.json, every report and stdout are derived from what is
// recorded. It is the one place secrets leave recorded text. The zero
// value scrubs nothing; it is safe for concurrent use.
type Scrubber struct {
	mu    sync.RWMutex
	shown map[string]string // secret (and its encodings) → what is shown
	rep   *strings.Replacer
}

// Add makes s replace secret (and its URL-encoded, upper- and lower-case
// forms, as a target may echo them) by shown. An empty secret is ignored.
func (s *Scrubber) Add(secret, shown string) {
	if secret == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shown == nil {
		s.shown = map[string]string{}
	}
	for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret), strings.ToUpper(secret), strings.ToLower(secret)} {
		if _, ok := s.shown[form]; !ok {
			s.shown[form] = shown
			s.rep = nil // built again on first use: a keys file adds many at once
		}
	}
}

// replacer returns the replacer of every secret form long enough to
// scrub inside a value; s.mu is held for writing.
func (s *Scrubber) replacer() *strings.Replacer {
	if s.rep != nil {
		return s.rep
	}
	// Longest first: where one secret holds another, the longer one wins.
	forms := make([]string, 0, len(s.shown))
	for f := range s.shown {
		if len(f) >= MinScrubbed {
			forms = append(forms, f)
		}
	}
	sort.Slice(forms, func(i, j int) bool {
		return len(forms[i]) > len(forms[j]) || len(forms[i]) == len(forms[j]) && forms[i] < forms[j]
	})
	args := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		args = append(args, f, s.shown[f])
	}
	s.rep = strings.NewReplacer(args...)
	return s.rep
}

// Active reports whether s knows any secret.
func (s *Scrubber) Active() bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.shown) > 0
}

// String returns v with every known secret replaced.
func (s *Scrubber) String(v string) string {
	if s == nil || v == "" {
		return v
	}
	s.mu.RLock()
	shown, whole := s.shown[v]
	rep := s.rep
	n := len(s.shown)
	s.mu.RUnlock()
	switch {
	case whole:
		return shown
	case n == 0:
		return v
	case rep == nil:
		s.mu.Lock()
		rep = s.replacer()
		s.mu.Unlock()
	}
	return rep.Replace(v)
}

// Event replaces every known secret in every text field of e.
func (s *Scrubber) Event(e *Event) {
	if !s.Active() {
		return
	}
	for _, f := range []*string{&e.Key, &e.Variant, &e.Tier, &e.Phase, &e.Path,
		&e.RetryAfter, &e.RateLimit, &e.RateLimitPolicy, &e.XLimit, &e.XRemaining, &e.XReset,
		&e.RateLimitLimit, &e.RateLimitRemaining, &e.RateLimitReset, &e.Fallback, &e.Scope, &e.Err} {
		*f = s.String(*f)
	}
}

// Strings replaces every known secret in each of l.
func (s *Scrubber) Strings(l []string) {
	for i := range l {
		l[i] = s.String(l[i])
	}
}
