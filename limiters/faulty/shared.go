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
