package policy

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Identity says where a limiter takes the caller's key from and which
// spellings of a key it treats as the same key. Bypass variants are derived
// from it: a variant is sent only when the declaration says it is the same
// key (so extra admissions prove a bypass); keys the declaration calls
// different are judged by isolation instead.
type Identity struct {
	// In is where the key travels: header (default), bearer
	// (Authorization: Bearer KEY), query (a query parameter) or cookie.
	In string `yaml:"in,omitempty" json:"in,omitempty"`
	// Name is the header, query parameter or cookie that carries the key
	// (default X-API-Key for header, Authorization for bearer, api_key for
	// query and cookie).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Header is the older spelling of Name for in: header.
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
	// Repeated says which occurrence of a repeated identity (two X-API-Key
	// headers, two api_key parameters) the limiter counts: first (default),
	// last, or rejected (the request is refused). LimiterOccurrence is its
	// other spelling; after Validate, Repeated holds the value.
	Repeated string `yaml:"repeated,omitempty" json:"repeated,omitempty"`
	// LimiterOccurrence is Repeated under a name that says whose reading it
	// is (the limiter's, beside TenantOccurrence); Validate moves it into
	// Repeated.
	LimiterOccurrence string `yaml:"limiter_occurrence,omitempty" json:"limiter_occurrence,omitempty"`
	// TenantOccurrence says which occurrence of a repeated identity the
	// application serves as the tenant: first or last. Empty: the one the
	// limiter counts (first when the limiter refuses repeats). When it
	// differs from the limiter's, a client that adds another key is served
	// as itself and charged to the other key: the bypass plan's repeat
	// variant tests exactly that, and an admission it buys is a finding.
	TenantOccurrence string `yaml:"tenant_occurrence,omitempty" json:"tenant_occurrence,omitempty"`
	// CaseSensitive: keys that differ only in letter case are different
	// keys (the default; say false when the limiter folds case).
	CaseSensitive *bool `yaml:"case_sensitive,omitempty" json:"case_sensitive,omitempty"`
	// Trim: white space around the key is not part of it. Default true for
	// header and bearer (HTTP strips it from header values), false for
	// query and cookie.
	Trim *bool `yaml:"trim,omitempty" json:"trim,omitempty"`
	// MaxLength is the longest key the limiter accepts (0: not declared).
	MaxLength int `yaml:"max_length,omitempty" json:"max_length,omitempty"`
	// TooLong is what happens to a longer key: reject (default: refused)
	// or cut (only its first MaxLength characters count).
	TooLong string `yaml:"too_long,omitempty" json:"too_long,omitempty"`
	// TrustedProxies are the peer addresses (CIDR) whose X-Forwarded-For is
	// believed; empty means never.
	TrustedProxies []string `yaml:"trusted_proxies,omitempty" json:"trusted_proxies,omitempty"`
	// PathVariants are spellings of the request path the limiter counts as
	// the same route (and so the same limit): trailing-slash, double-slash,
	// case, query (an extra query parameter).
	PathVariants []string `yaml:"path_variants,omitempty" json:"path_variants,omitempty"`
	// PathPrefix, when set, says every path under it shares the key's one
	// quota (one limit for /search/*, not one per route); the path variant
	// sibling then sends another path under it.
	PathPrefix string `yaml:"path_prefix,omitempty" json:"path_prefix,omitempty"`
}

// Where the identity travels.
const (
	InHeader = "header"
	InBearer = "bearer"
	InQuery  = "query"
	InCookie = "cookie"
)

// Which occurrence of a repeated identity counts.
const (
	RepeatedFirst    = "first"
	RepeatedLast     = "last"
	RepeatedRejected = "rejected"
)

// What happens to a key longer than MaxLength.
const (
	TooLongReject = "reject"
	TooLongCut    = "cut"
)

// PathVariantNames lists the path spellings a policy may declare the same route.
var PathVariantNames = []string{"trailing-slash", "double-slash", "case", "query", "sibling"}

// SiblingPath is the path the sibling variant asks for under a policy's
// identity.path_prefix.
const SiblingPath = "rlverify-sibling"

// DefaultIdentityHeader is the header that carries the key by default.
const DefaultIdentityHeader = "X-API-Key"

// CaseFolded reports whether keys differing only in case are one key.
func (id *Identity) CaseFolded() bool { return id.CaseSensitive != nil && !*id.CaseSensitive }

// Trimmed reports whether white space around a key is ignored.
func (id *Identity) Trimmed() bool {
	if id.Trim != nil {
		return *id.Trim
	}
	return id.In == InHeader || id.In == InBearer || id.In == ""
}

// TrustsLoopback reports whether X-Forwarded-For from a loopback peer (the
// load generator) is believed, so spoofed addresses legitimately change the
// identity.
func (id *Identity) TrustsLoopback() bool {
	for _, c := range id.TrustedProxies {
		if _, n, err := net.ParseCIDR(c); err == nil && (n.Contains(net.IPv4(127, 0, 0, 1)) || n.Contains(net.IPv6loopback)) {
			return true
		}
	}
	return false
}

// Describe says where the key travels, for messages: "header X-API-Key".
func (id *Identity) Describe() string {
	switch id.In {
	case InBearer:
		return "Authorization: Bearer (header " + id.Name + ")"
	case InQuery:
		return "query parameter " + id.Name
	case InCookie:
		return "cookie " + id.Name
	}
	return "header " + id.Name
}

func (id *Identity) normalize(errf func(string, string, ...any) error) error {
	if id.In == "" {
		id.In = InHeader
	}
	switch id.In {
	case InHeader:
		if id.Name == "" {
			id.Name = id.Header
		}
		if id.Name == "" {
			id.Name = DefaultIdentityHeader
		}
		if id.Header != "" && id.Header != id.Name {
			return errf("identity.header", "%q disagrees with identity.name %q: give one of them", id.Header, id.Name)
		}
		id.Header = id.Name
	case InBearer:
		if id.Name == "" {
			id.Name = "Authorization"
		}
		id.Header = id.Name
	case InQuery, InCookie:
		if id.Header != "" {
			return errf("identity.header", "the key travels in a %s: give identity.name, not header", id.In)
		}
		if id.Name == "" {
			id.Name = "api_key"
		}
	default:
		return errf("identity.in", "%q: want header, bearer, query or cookie", id.In)
	}
	if !validToken(id.Name) {
		return errf("identity.name", "%q is not a valid %s name (letters, digits and !#$%%&'*+-.^_`|~)", id.Name, id.In)
	}
	repField := "identity.repeated"
	if id.LimiterOccurrence != "" {
		repField = "identity.limiter_occurrence"
		if id.Repeated != "" && id.Repeated != id.LimiterOccurrence {
			return errf("identity.repeated", "%q disagrees with identity.limiter_occurrence %q: give one of them", id.Repeated, id.LimiterOccurrence)
		}
		id.Repeated, id.LimiterOccurrence = id.LimiterOccurrence, ""
	}
	if id.Repeated == "" {
		id.Repeated = RepeatedFirst
	}
	switch id.Repeated {
	case RepeatedFirst, RepeatedLast, RepeatedRejected:
	default:
		return errf(repField, "%q: want first, last or rejected (which occurrence of a repeated identity the limiter counts)", id.Repeated)
	}
	switch id.TenantOccurrence {
	case "", RepeatedFirst, RepeatedLast:
	default:
		return errf("identity.tenant_occurrence", "%q: want first or last (which occurrence of a repeated identity the application serves; say limiter_occurrence: rejected when repeats are refused)", id.TenantOccurrence)
	}
	if id.MaxLength < 0 || id.MaxLength > 1<<16 {
		return errf("identity.max_length", "%d: want 1 … 65536 (or leave it out)", id.MaxLength)
	}
	if id.TooLong == "" {
		id.TooLong = TooLongReject
	}
	switch id.TooLong {
	case TooLongReject, TooLongCut:
	default:
		return errf("identity.too_long", "%q: want reject or cut", id.TooLong)
	}
	if id.TooLong == TooLongCut && id.MaxLength == 0 {
		return errf("identity.too_long", "cut needs identity.max_length")
	}
	for i, c := range id.TrustedProxies {
		if _, _, err := net.ParseCIDR(c); err != nil {
			return errf(fmt.Sprintf("identity.trusted_proxies.%d", i), "%q is not a CIDR such as 10.0.0.0/8", c)
		}
	}
	if id.PathPrefix != "" && (!strings.HasPrefix(id.PathPrefix, "/") || strings.ContainsAny(id.PathPrefix, "?# \t\r\n")) {
		return errf("identity.path_prefix", "%q: want a path starting with / (no query), e.g. /search/", id.PathPrefix)
	}
	seen := map[string]bool{}
	for i, v := range id.PathVariants {
		if v == "sibling" && id.PathPrefix == "" {
			return errf(fmt.Sprintf("identity.path_variants.%d", i), "sibling needs identity.path_prefix (the prefix whose paths share one quota)")
		}
		ok := false
		for _, k := range PathVariantNames {
			ok = ok || v == k
		}
		if !ok {
			return errf(fmt.Sprintf("identity.path_variants.%d", i), "%q: want one of %s", v, strings.Join(PathVariantNames, ", "))
		}
		if seen[v] {
			return errf(fmt.Sprintf("identity.path_variants.%d", i), "%q is listed twice", v)
		}
		seen[v] = true
	}
	return nil
}

// validToken reports whether s is an RFC 9110 token (a header name, and a
// safe query parameter or cookie name).
func validToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// StatusSet is a set of HTTP statuses written as a list of classes ("2xx"),
// single codes ("429") and ranges ("200-204").
type StatusSet []StatusRange

// StatusRange is an inclusive range of statuses.
type StatusRange struct{ Lo, Hi int }

// ParseStatusSet parses "2xx,429,500-504" (or the same as list items).
func ParseStatusSet(items ...string) (StatusSet, error) {
	var s StatusSet
	for _, item := range items {
		for _, tok := range strings.Split(item, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				continue
			}
			r, err := parseStatusRange(tok)
			if err != nil {
				return nil, err
			}
			s = append(s, r)
		}
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("empty status set: want e.g. 2xx, 429 or 200-204")
	}
	sort.Slice(s, func(i, j int) bool { return s[i].Lo < s[j].Lo })
	return s, nil
}

func parseStatusRange(tok string) (StatusRange, error) {
	bad := fmt.Errorf("status %q: want a class such as 2xx, a code such as 429 or a range such as 200-204 (codes 100 … 599)", tok)
	if len(tok) == 3 && (tok[1:] == "xx" || tok[1:] == "XX") {
		if tok[0] < '1' || tok[0] > '5' {
			return StatusRange{}, bad
		}
		c := int(tok[0]-'0') * 100
		return StatusRange{c, c + 99}, nil
	}
	a, b, isRange := strings.Cut(tok, "-")
	lo, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil {
		return StatusRange{}, bad
	}
	hi := lo
	if isRange {
		if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil {
			return StatusRange{}, bad
		}
	}
	if lo < 100 || hi > 599 || hi < lo {
		return StatusRange{}, bad
	}
	return StatusRange{lo, hi}, nil
}

// Has reports whether status is in the set.
func (s StatusSet) Has(status int) bool {
	for _, r := range s {
		if status >= r.Lo && status <= r.Hi {
			return true
		}
	}
	return false
}

// Overlaps reports whether s and o share a status.
func (s StatusSet) Overlaps(o StatusSet) bool {
	for _, a := range s {
		for _, b := range o {
			if a.Lo <= b.Hi && b.Lo <= a.Hi {
				return true
			}
		}
	}
	return false
}

// String writes the set back as "2xx, 429".
func (s StatusSet) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		switch {
		case r.Lo == r.Hi:
			parts[i] = strconv.Itoa(r.Lo)
		case r.Lo%100 == 0 && r.Hi == r.Lo+99:
			parts[i] = fmt.Sprintf("%dxx", r.Lo/100)
		default:
			parts[i] = fmt.Sprintf("%d-%d", r.Lo, r.Hi)
		}
	}
	return strings.Join(parts, ", ")
}

// UnmarshalYAML accepts a list ("[2xx, 429]") or one string ("2xx, 304").
func (s *StatusSet) UnmarshalYAML(n *yaml.Node) error {
	var items []string
	switch n.Kind {
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: want statuses such as 2xx or 429", c.Line)
			}
			items = append(items, c.Value)
		}
	case yaml.ScalarNode:
		items = []string{n.Value}
	default:
		return fmt.Errorf("line %d: want a list of statuses such as [2xx, 429]", n.Line)
	}
	v, err := ParseStatusSet(items...)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = v
	return nil
}

// MarshalYAML writes the set as a list of strings.
func (s StatusSet) MarshalYAML() (any, error) {
	if len(s) == 0 {
		return []string{}, nil
	}
	return strings.Split(s.String(), ", "), nil
}

// MarshalJSON writes the set as a list of strings.
func (s StatusSet) MarshalJSON() ([]byte, error) {
	parts := strings.Split(s.String(), ", ")
	if len(s) == 0 {
		parts = []string{}
	}
	return json.Marshal(parts)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *StatusSet) UnmarshalJSON(b []byte) error {
	var items []string
	if err := json.Unmarshal(b, &items); err != nil {
		return err
	}
	if len(items) == 0 {
		*s = nil
		return nil
	}
	v, err := ParseStatusSet(items...)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Statuses is the response contract: which statuses mean the limiter
// admitted a request and which that it refused it. Any other status is an
// error, counted and shown.
type Statuses struct {
	// Admitted defaults to 2xx.
	Admitted StatusSet `yaml:"admitted,omitempty" json:"admitted,omitempty"`
	// Rejected defaults to 429.
	Rejected StatusSet `yaml:"rejected,omitempty" json:"rejected,omitempty"`
	// Closed is what a fail-closed limiter answers while its store is down
	// (default 503); such an answer is a refusal when it carries
	// Retry-After, else an error.
	Closed StatusSet `yaml:"closed,omitempty" json:"closed,omitempty"`
}

func (s *Statuses) normalize(errf func(string, string, ...any) error) error {
	if len(s.Admitted) == 0 {
		s.Admitted = StatusSet{{200, 299}}
	}
	if len(s.Rejected) == 0 {
		s.Rejected = StatusSet{{429, 429}}
	}
	if len(s.Closed) == 0 {
		s.Closed = StatusSet{{503, 503}}
	}
	if s.Admitted.Overlaps(s.Rejected) {
		return errf("statuses", "admitted (%s) and rejected (%s) share a status", s.Admitted, s.Rejected)
	}
	if s.Admitted.Overlaps(s.Closed) {
		return errf("statuses", "admitted (%s) and closed (%s) share a status", s.Admitted, s.Closed)
	}
	return nil
}

// Class of a response under the contract.
type Class int8

// Classes of a response.
const (
	// ClassError: no response, or a status the contract does not name.
	ClassError Class = iota
	ClassAdmitted
	ClassRejected
)

// Classify returns what a response of status (with or without a
// Retry-After header) means. Status 0 (no response) is an error.
func (s *Statuses) Classify(status int, hasRetryAfter bool) Class {
	adm, rej, closed := s.Admitted, s.Rejected, s.Closed
	if len(adm) == 0 {
		adm = StatusSet{{200, 299}}
	}
	if len(rej) == 0 {
		rej = StatusSet{{429, 429}}
	}
	if len(closed) == 0 {
		closed = StatusSet{{503, 503}}
	}
	switch {
	case status == 0:
		return ClassError
	case adm.Has(status):
		return ClassAdmitted
	case rej.Has(status):
		return ClassRejected
	case closed.Has(status) && hasRetryAfter:
		return ClassRejected
	}
	return ClassError
}

// Describe says the contract for messages: "admitted: 2xx, rejected: 429".
func (s *Statuses) Describe() string {
	return fmt.Sprintf("admitted: %s, rejected: %s (%s with Retry-After when failing closed)", orDefault(s.Admitted, "2xx"), orDefault(s.Rejected, "429"), orDefault(s.Closed, "503"))
}

func orDefault(s StatusSet, def string) string {
	if len(s) == 0 {
		return def
	}
	return s.String()
}

// RateLimitHeaders names the generation of IETF RateLimit headers a limiter
// sends. The drafts changed the format twice:
//
//   - structured (draft-ietf-httpapi-ratelimit-headers-08 and later):
//     RateLimit: "name";r=REMAINING;t=RESET and
//     RateLimit-Policy: "name";q=QUOTA;w=WINDOW, Structured Field lists;
//   - dictionary (drafts 07): RateLimit: limit=N, remaining=R, reset=T (a
//     Structured Field dictionary), optionally RateLimit-Policy: N;w=W;
//   - split (drafts 00–06): RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset (delta seconds), optionally RateLimit-Policy.
//
// The empty value means none. In YAML, true means structured and false none.
type RateLimitHeaders string

// The RateLimit header generations.
const (
	RateLimitNone       RateLimitHeaders = ""
	RateLimitStructured RateLimitHeaders = "structured"
	RateLimitDictionary RateLimitHeaders = "dictionary"
	RateLimitSplit      RateLimitHeaders = "split"
)

// Declared reports whether some generation is declared.
func (g RateLimitHeaders) Declared() bool { return g != RateLimitNone }

func (g *RateLimitHeaders) set(v string) error {
	switch v {
	case "true", "structured":
		*g = RateLimitStructured
	case "false", "", "none":
		*g = RateLimitNone
	case "dictionary":
		*g = RateLimitDictionary
	case "split":
		*g = RateLimitSplit
	default:
		return fmt.Errorf("ratelimit %q: want structured (RateLimit + RateLimit-Policy lists, draft 08+), dictionary (RateLimit: limit=, remaining=, reset=, draft 07), split (RateLimit-Limit/-Remaining/-Reset, drafts 00–06), true (structured) or false", v)
	}
	return nil
}

// UnmarshalYAML accepts a generation name or a boolean.
func (g *RateLimitHeaders) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want structured, dictionary, split, true or false", n.Line)
	}
	if err := g.set(strings.ToLower(strings.TrimSpace(n.Value))); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// UnmarshalJSON accepts a generation name or a boolean (histories written
// before generations existed carry true or false).
func (g *RateLimitHeaders) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case bool:
		return g.set(strconv.FormatBool(x))
	case string:
		return g.set(x)
	case nil:
		*g = RateLimitNone
		return nil
	}
	return fmt.Errorf("ratelimit: want a string or a boolean")
}

// Tolerance is what the checks allow beyond exact arithmetic.
type Tolerance struct {
	// Regions is the declared relative overrun allowed across regions
	// (0.05 = 5%).
	Regions float64 `yaml:"regions,omitempty" json:"regions"`
	// Timing is how much later than the exact arithmetic a limiter may
	// free capacity before a refusal counts as wrong (under-admission) or
	// advice as unhonoured (retry-after): real limiters keep conservative
	// guards of a few to tens of milliseconds. Zero means the default, the
	// larger of 10ms, 2% of the shortest window and twice the run's p99
	// decision latency. Oversell never loosens.
	Timing Duration `yaml:"timing,omitempty" json:"timing,omitempty"`
	// Propagation is how long a declared limit change (changes) may take
	// to be in force after it is made: requests decided within it may meet
	// either limit. Zero means DefaultPropagation.
	Propagation Duration `yaml:"propagation,omitempty" json:"propagation,omitempty"`
}

// UnmarshalYAML accepts a number (the regions' overrun) or a mapping.
func (t *Tolerance) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		f, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
		if err != nil {
			return fmt.Errorf("line %d: tolerance %q: want a fraction (0.05) or a mapping {regions: 0.05, timing: 20ms}", n.Line, n.Value)
		}
		t.Regions = f
		return nil
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; k != "regions" && k != "timing" && k != "propagation" {
				return fmt.Errorf("line %d: field %s not found in tolerance (want regions, timing, propagation)", n.Content[i].Line, k)
			}
		}
	}
	type plain Tolerance
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*t = Tolerance(p)
	return nil
}

// UnmarshalJSON accepts a number (histories written before timing
// tolerances) or an object.
func (t *Tolerance) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		t.Regions = f
		return nil
	}
	type plain Tolerance
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = Tolerance(p)
	return nil
}

// Tenant is the occurrence of a repeated identity the application serves:
// TenantOccurrence, else the limiter's (first when it refuses repeats).
func (id *Identity) Tenant() string {
	switch {
	case id.TenantOccurrence != "":
		return id.TenantOccurrence
	case id.Repeated == RepeatedLast:
		return RepeatedLast
	}
	return RepeatedFirst
}

// Mismatched reports whether the limiter counts another occurrence of a
// repeated identity than the one the application serves (a limiter that
// refuses repeats matches any).
func (id *Identity) Mismatched() bool {
	return id.Repeated != RepeatedRejected && id.Repeated != "" && id.Repeated != id.Tenant()
}

// TenantKey is the tenant a request with the identity values vals is
// served as (vals in the order sent, not empty): the tenant occurrence,
// normalised as Key normalises. Key is what the limiter counts; the two
// differ only for a repeated identity under a Mismatched declaration.
func (id *Identity) TenantKey(vals []string) string {
	v := vals[0]
	if id.Tenant() == RepeatedLast {
		v = vals[len(vals)-1]
	}
	k, _, _ := id.Key([]string{v})
	return k
}

// Key is what the identity makes of the values a request carried for it,
// in the order sent (vals must not be empty): the occurrence that counts
// (first or last; the first when repeats are refused), trimmed and case
// folded as declared, cut at MaxLength when the declaration cuts. repeated
// reports a repeat the declaration refuses, tooLong a key beyond MaxLength
// it refuses (the key is then returned whole). The reference service and
// the importers read keys through it, so they agree on what a key is.
func (id *Identity) Key(vals []string) (key string, repeated, tooLong bool) {
	key = vals[0]
	if len(vals) > 1 {
		switch id.Repeated {
		case RepeatedLast:
			key = vals[len(vals)-1]
		case RepeatedRejected:
			repeated = true
		}
	}
	if id.Trimmed() {
		key = strings.TrimSpace(key)
	}
	if id.CaseFolded() {
		key = strings.ToLower(key)
	}
	if id.MaxLength > 0 && len(key) > id.MaxLength {
		if id.TooLong == TooLongCut {
			key = key[:id.MaxLength]
		} else {
			tooLong = true
		}
	}
	return key, repeated, tooLong
}

// BearerToken is the token of an Authorization value "Bearer TOKEN" (the
// scheme in any case); ok is false for any other credential.
func BearerToken(v string) (token string, ok bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return tok, true
}
