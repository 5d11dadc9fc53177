package faulty

import (
	"context"
	"strings"
	"time"

	"github.com/rlverify/rlverify/limiters"
)

// SharedBucket keys every request on its tier alone, so all tenants of a
// tier draw from one bucket: a noisy tenant starves the quiet ones. It
// breaks isolation ("keys that differ never share a quota"), though the
// aggregate stays within one quota.
type SharedBucket struct{ limiters.Limiter }

// Allow implements limiters.Limiter, keying on the tier only.
func (s SharedBucket) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	return s.Limiter.Allow(ctx, now, tierOnly(key), n)
}

// tierOnly reduces "rl:{tier:tenant}:action:version:i" to "rl:{tier}".
func tierOnly(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "shared"
	}
	rest := key[open+1:]
	if i := strings.IndexAny(rest, ":}"); i >= 0 {
		rest = rest[:i]
	}
	return "rl:{" + rest + "}:shared"
}

// SharedPrefix keys every request on the first PrefixLen characters of its
// tenant, so tenants whose keys share that prefix draw from one bucket (a
// fixed-width key column, a key cut short). It breaks isolation for similar
// keys only.
type SharedPrefix struct {
	limiters.Limiter
	PrefixLen int
}

// Allow implements limiters.Limiter, keying on the tenant's prefix.
func (s SharedPrefix) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	return s.Limiter.Allow(ctx, now, cutTenant(key, s.PrefixLen), n)
}

// cutTenant cuts the tenant of "rl:{tier:tenant}:…" to n characters.
func cutTenant(key string, n int) string {
	open := strings.IndexByte(key, '{')
	end := strings.IndexByte(key, '}')
	if open < 0 || end < open {
		return key
	}
	inner := key[open+1 : end]
	tier, tenant, ok := strings.Cut(inner, ":")
	if !ok || len(tenant) <= n {
		return key
	}
	return key[:open+1] + tier + ":" + tenant[:n] + key[end:]
}
