package targets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// External is the user's own running instances. Nothing is started; Start
// checks that every instance accepts connections, and reads downstream
// arrivals from an `rlverify sink` when SinkURL is set.
type External struct {
	SinkURL string
}

// Name implements Environment.
func (External) Name() string { return "external" }

// Start implements Environment.
func (x External) Start(ctx context.Context, spec Spec) (*Stack, error) {
	if len(spec.Targets) == 0 {
		return nil, errors.New("external: no --target given")
	}
	st := &Stack{Env: "external", StoreDesc: "the target's own"}
	for _, raw := range spec.Targets {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("external: target %q is not a URL", raw)
		}
		host := u.Host
		if u.Port() == "" {
			if u.Scheme == "https" {
				host = net.JoinHostPort(u.Hostname(), "443")
			} else {
				host = net.JoinHostPort(u.Hostname(), "80")
			}
		}
		d := net.Dialer{Timeout: 3 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, fmt.Errorf("external: target %s is unreachable: %w", raw, err)
		}
		conn.Close()
		st.Instances = append(st.Instances, trimSlash(raw))
	}
	if x.SinkURL != "" {
		rs := &RemoteSink{URL: x.SinkURL}
		st.Sink = rs
		st.Notes = append(st.Notes, "downstream arrivals read from the sink at "+x.SinkURL)
	}
	return st, nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}
