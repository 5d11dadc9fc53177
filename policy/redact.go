package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// RedactKey is how a secret key (a real API key) is shown in a history and
// everything derived from it: its tier's key prefix (or the tier name and
// a colon when the prefix does not match), an ellipsis and 8 hex digits of
// its SHA-256. Distinct keys stay distinct and keep their tier, and
// nothing of the secret is shown.
func (p *Policy) RedactKey(key, tier string) string {
	prefix := ""
	if t, ok := p.Tier(tier); ok && t.KeyPrefix != "" && strings.HasPrefix(key, t.KeyPrefix) {
		prefix = t.KeyPrefix
	} else if tier != "" {
		prefix = tier + ":"
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + "…" + hex.EncodeToString(sum[:4])
}
