package envs

import (
	"fmt"
	"net"
	neturl "net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ParseRedis reads redis://HOST:PORT[/DB] (rediss:// too) or HOST:PORT
// and returns it as a URL and as HOST:PORT.
func ParseRedis(s string) (url, addr string, err error) {
	u := s
	if !strings.Contains(s, "://") {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", "", fmt.Errorf("%q: want redis://HOST:PORT (or HOST:PORT)", s)
		}
		u = "redis://" + s
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		return "", "", fmt.Errorf("%q: want redis://HOST:PORT (or HOST:PORT): %w", s, err)
	}
	if pu, err := neturl.Parse(u); err != nil || pu.Host == "" {
		return "", "", fmt.Errorf("%q: want redis://HOST:PORT (or HOST:PORT): no host", s)
	}
	return u, opt.Addr, nil
}
