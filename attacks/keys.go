package attacks

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// KeyFile holds real API keys by tier, for services that accept only keys
// they issued. In YAML or JSON:
//
//	free: [key-1, key-2, key-3]
//	paid: [key-4]
//
// Each logical key of a plan (free-burst, free-noisy, …) gets its own key of
// its tier, in the file's order. The keys are secrets: histories and
// reports show them redacted (see Redact).
type KeyFile struct {
	Source string
	ByTier map[string][]string
}

// MaxKeyFileBytes bounds a keys file.
const MaxKeyFileBytes = 4 << 20

// LoadKeyFile reads and checks a keys file against the policy's tiers.
func LoadKeyFile(file string, p *policy.Policy) (*KeyFile, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("keys file: %w", err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, MaxKeyFileBytes+1)); err != nil {
		return nil, fmt.Errorf("keys file %s: %w", file, err)
	}
	if b.Len() > MaxKeyFileBytes {
		return nil, fmt.Errorf("keys file %s is larger than %d bytes", file, MaxKeyFileBytes)
	}
	return ParseKeyFile(file, b.Bytes(), p)
}

// ParseKeyFile decodes a keys file (file names it in errors).
func ParseKeyFile(file string, data []byte, p *policy.Policy) (*KeyFile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("keys file %s is empty: want tier: [key, …] lines, e.g. free: [k1, k2]", file)
	}
	var raw map[string][]string
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("keys file %s: want a mapping of tier name to a list of keys: %w", file, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("keys file %s holds no keys: want tier: [key, …] lines, e.g. free: [k1, k2]", file)
	}
	kf := &KeyFile{Source: file, ByTier: map[string][]string{}}
	seen := map[string]string{}
	tiers := make([]string, 0, len(raw))
	for t := range raw {
		tiers = append(tiers, t)
	}
	sort.Strings(tiers)
	for _, t := range tiers {
		if _, ok := p.Tier(t); !ok {
			if _, ok := p.ExemptNamed(t); !ok {
				return nil, fmt.Errorf("keys file %s: tier %q is not a tier or exempt class of policy %s (tiers: %s)", file, t, p.Name, strings.Join(p.TierNames(), ", "))
			}
		}
		if len(raw[t]) == 0 {
			return nil, fmt.Errorf("keys file %s: tier %s has no keys", file, t)
		}
		for i, k := range raw[t] {
			if k == "" || strings.ContainsAny(k, "\r\n\x00") {
				return nil, fmt.Errorf("keys file %s: %s key %d is empty or holds a control character", file, t, i+1)
			}
			if other, dup := seen[k]; dup {
				return nil, fmt.Errorf("keys file %s: %s key %d is listed twice (also under %s)", file, t, i+1, other)
			}
			seen[k] = t
		}
		kf.ByTier[t] = raw[t]
	}
	return kf, nil
}

// PlanTier is the tier a plan's logical key belongs to under p: the tier
// whose key_prefix it carries, else the tier named by its first
// dash-separated word ("free-burst" → free), else the default tier.
func PlanTier(p *policy.Policy, logical string) (*policy.Tier, bool) {
	if _, ok := PlanExempt(p, logical); ok {
		return nil, false
	}
	best := -1
	for i := range p.Tiers {
		pre := p.Tiers[i].KeyPrefix
		if pre != "" && strings.HasPrefix(logical, pre) && (best < 0 || len(pre) > len(p.Tiers[best].KeyPrefix)) {
			best = i
		}
	}
	if best >= 0 {
		return &p.Tiers[best], true
	}
	word, _, _ := strings.Cut(logical, "-")
	if t, ok := p.Tier(word); ok {
		return t, true
	}
	if t, ok := delayingTier(p, word); ok {
		return t, true
	}
	return p.TierFor(logical)
}

// delayingTier is, for the word "delayed" (not a tier's name), the first
// tier the policy declares to delay (policy.DelayFor): "delayed-burst" is
// a key of it.
func delayingTier(p *policy.Policy, word string) (*policy.Tier, bool) {
	if word != "delayed" {
		return nil, false
	}
	for i := range p.Tiers {
		if p.DelayFor(&p.Tiers[i]) != nil {
			return &p.Tiers[i], true
		}
	}
	return nil, false
}

// PlanExempt is the exempt class a plan's logical key belongs to under p:
// the one whose key_prefix it carries (longer than any tier's), else the one
// named by its first dash-separated word, else the first class for the word
// "exempt" ("exempt-burst" is a key of the policy's first exempt class).
func PlanExempt(p *policy.Policy, logical string) (*policy.Exempt, bool) {
	if len(p.Exempt) == 0 {
		return nil, false
	}
	if e, ok := p.ExemptFor(logical); ok {
		return e, true
	}
	word, _, _ := strings.Cut(logical, "-")
	if e, ok := p.ExemptNamed(word); ok {
		return e, true
	}
	if _, isTier := p.Tier(word); word == "exempt" && !isTier {
		return &p.Exempt[0], true
	}
	return nil, false
}

// keyMapper turns the plan's logical keys into the keys sent, one per
// logical key for the whole run.
type keyMapper struct {
	p    *policy.Policy
	run  string
	keep bool
	kf   *KeyFile

	mu       sync.Mutex
	assigned map[string]string // logical → sent
	used     map[string]int    // tier → keys of the file handed out
	tierOf   map[string]string // sent → tier name
	// scrub knows every secret key handed out (and every key of the keys
	// file): a target may echo one in any header.
	scrub history.Scrubber
}

func newKeyMapper(p *policy.Policy, run string, keep bool, kf *KeyFile) *keyMapper {
	m := &keyMapper{p: p, run: run, keep: keep, kf: kf,
		assigned: map[string]string{}, used: map[string]int{}, tierOf: map[string]string{}}
	if kf != nil {
		for tier, keys := range kf.ByTier {
			for _, k := range keys {
				m.scrub.Add(k, Redact(p, k, tier))
			}
		}
	}
	return m
}

// secret reports whether the keys sent are the user's own (redacted in
// the history).
func (m *keyMapper) secret() bool { return m.keep || m.kf != nil }

// key returns the key sent for logical. A generated key puts the run id
// right after the tier's prefix ("free-" + run + "-burst"), so keys of two
// runs differ in their first characters after the prefix: a limiter that
// keys on a cut or hashed prefix of the key still never mixes runs.
func (m *keyMapper) key(logical string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.assigned[logical]; ok {
		return k, nil
	}
	tier, pre, ok := m.class(logical)
	var k string
	switch {
	case m.keep:
		k = logical
	case m.kf != nil:
		if !ok {
			return "", fmt.Errorf("key %q matches no tier of policy %s and there is no default tier", logical, m.p.Name)
		}
		keys := m.kf.ByTier[tier]
		n := m.used[tier]
		if n >= len(keys) {
			return "", fmt.Errorf("the plan needs more %s keys than the keys file %s gives (%d): each logical key (%s, …) takes its own", tier, m.kf.Source, len(keys), logical)
		}
		m.used[tier] = n + 1
		k = keys[n]
	default:
		k = pre + m.run + "-" + strings.TrimPrefix(logical, pre)
	}
	m.assigned[logical] = k
	if ok {
		m.tierOf[k] = tier
	}
	if m.secret() {
		m.scrub.Add(k, Redact(m.p, k, tier))
	}
	return k, nil
}

// class is the tier or exempt class of a logical key: its name and key
// prefix; ok is false when neither applies.
func (m *keyMapper) class(logical string) (name, prefix string, ok bool) {
	if e, ok := PlanExempt(m.p, logical); ok {
		return e.Name, e.KeyPrefix, true
	}
	if t, ok := PlanTier(m.p, logical); ok {
		return t.Name, t.KeyPrefix, true
	}
	return "", "", false
}

// DefaultLongKey is the length of a long key (Tenant.Long) when the policy
// declares no identity.max_length.
const DefaultLongKey = 128

// longKey is key(logical) padded with zeros after the run tag to the
// longest key the policy accepts, so long keys that differ only at their
// end are tried. A keys file's or --keep-keys' keys are sent as they are.
func (m *keyMapper) longKey(logical string) (string, error) {
	want := m.p.Identity.MaxLength
	if want == 0 {
		want = DefaultLongKey
	}
	return m.paddedKey(logical, want)
}

// paddedKey is longKey padded to want bytes.
func (m *keyMapper) paddedKey(logical string, want int) (string, error) {
	if m.keep || m.kf != nil {
		return m.key(logical)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	slot := fmt.Sprintf("%s\x00long%d", logical, want)
	if k, ok := m.assigned[slot]; ok {
		return k, nil
	}
	t, ok := PlanTier(m.p, logical)
	pre := ""
	if ok {
		pre = t.KeyPrefix
	}
	base, rest := pre+m.run+"-", strings.TrimPrefix(logical, pre)
	k := base + rest
	if n := want - len(base) - len(rest) - 1; n > 0 {
		k = base + strings.Repeat("0", n) + "-" + rest
	}
	m.assigned[slot] = k
	if ok {
		m.tierOf[k] = t.Name
	}
	return k, nil
}

// spare returns another key of the same tier as logical that the plan does
// not use (a duplicated-identity variant sends it beside the real one);
// false when a keys file has none left.
func (m *keyMapper) spare(logical string) (string, bool) {
	if m.kf == nil && !m.keep {
		k, err := m.key(logical + "-spare")
		return k, err == nil
	}
	if m.kf == nil {
		return "", false
	}
	k, err := m.key(logical + "\x00spare")
	return k, err == nil
}

// tier is the tier name of a sent key ("" when none applies).
func (m *keyMapper) tier(sent string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tierOf[sent]; ok {
		return t
	}
	if t, ok := m.p.TierFor(sent); ok {
		return t.Name
	}
	return ""
}

// recorded is a sent key as the history shows it.
func (m *keyMapper) recorded(sent string) string {
	if !m.secret() {
		return sent
	}
	return Redact(m.p, sent, m.tier(sent))
}

// Redact replaces a secret key as the history shows it (see
// policy.Policy.RedactKey).
func Redact(p *policy.Policy, key, tier string) string { return p.RedactKey(key, tier) }

// PlanKeys lists the plan's logical keys in order of first use.
func PlanKeys(p *Plan) []string {
	var out []string
	seen := map[string]bool{}
	add := func(k string) {
		if k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, ph := range p.Phases {
		add(ph.Key)
		for _, t := range ph.Tenants {
			add(t.Key)
		}
	}
	return out
}

// CheckRequest compiles every phase's request shape with over (the command
// line's) on top, so a malformed template or body file is reported before
// anything starts.
func CheckRequest(plan *Plan, over Request) error {
	over = over.fromCaller()
	if _, field, err := over.compile(bodyFiles{}); err != nil {
		return fmt.Errorf("request %s: %w", field, err)
	}
	for i := range plan.Phases {
		ph := &plan.Phases[i]
		if _, field, err := plan.PhaseRequest(ph).merge(over).compile(plan.bodyFiles()); err != nil {
			return fmt.Errorf("phase %s: request %s: %w", ph.Name, field, err)
		}
	}
	return nil
}

// CheckKeys reports whether a keys file gives every logical key of the plan
// its own key.
func CheckKeys(plan *Plan, p *policy.Policy, kf *KeyFile) error {
	m := newKeyMapper(p, "check", false, kf)
	for _, k := range PlanKeys(plan) {
		if _, err := m.key(k); err != nil {
			return err
		}
	}
	return nil
}
