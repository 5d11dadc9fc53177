package rlverify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/envoyrls"
	"github.com/rlverify/rlverify/policy"
)

// ErrServiceUnfit is a rate-limit service (a grpc:// target) whose first
// call showed that no run against it could be judged: it does not speak
// the protocol, refuses the domain, or applies no limit to the declared
// descriptors ("unlimited: no descriptor matched"). An audit stops at it.
var ErrServiceUnfit = errors.New("the rate-limit service cannot be judged")

// serviceTargets reports whether targets are Envoy rate-limit services
// (grpc://HOST:PORT) rather than HTTP base URLs; a mix is an error.
func serviceTargets(targets []string) (bool, error) {
	n := 0
	for _, t := range targets {
		if strings.HasPrefix(strings.ToLower(t), envoyrls.Scheme+"://") {
			n++
			u, err := url.Parse(t)
			if err != nil || u.Host == "" || u.Port() == "" {
				return false, fieldErr("Targets", "%q: want grpc://HOST:PORT", t)
			}
			if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
				return false, fieldErr("Targets", "%q: a rate-limit service is grpc://HOST:PORT, without a path, query or credentials", t)
			}
		}
	}
	if n > 0 && n < len(targets) {
		return false, fieldErr("Targets", "mixes grpc:// rate-limit services with HTTP services (%s): judge one kind of target per run", strings.Join(targets, " "))
	}
	return n > 0, nil
}

// serviceCall is the ShouldRateLimit call of one request of the run: the
// declared domain and the descriptor's entries rendered for its key.
func serviceCall(svc *policy.RateLimitService, info attacks.RequestInfo) *envoyrls.Request {
	d := make([]envoyrls.Entry, len(svc.Descriptors))
	for i, e := range svc.Descriptors {
		d[i] = envoyrls.Entry{Key: e.Key, Value: e.Render(info.Key, info.Tenant, info.Tier)}
	}
	return &envoyrls.Request{Domain: svc.Domain, Descriptors: [][]envoyrls.Entry{d}}
}

// serviceClient is the client whose transport answers the engine's
// requests to grpc:// targets with the service's decisions.
func serviceClient(c *envoyrls.Client, svc *policy.RateLimitService) *http.Client {
	return &http.Client{Transport: &envoyrls.Transport{Client: c, Call: func(r *http.Request) (*envoyrls.Request, error) {
		info, ok := attacks.InfoOf(r.Context())
		if !ok {
			// The engine's connection warm-up: a call would count a hit.
			return nil, errors.New("not a request of the plan: no call made")
		}
		return serviceCall(svc, info), nil
	}}}
}

// probeService makes one call per tier on every instance, for a key of the
// tier no plan uses, before any load: an instance that does not speak the
// protocol, refuses the domain or matches no rule for the descriptors
// ends the run here, with the reason, rather than as a table of errors or
// of admissions no limit was ever applied to.
func probeService(ctx context.Context, c *envoyrls.Client, pol *policy.Policy, instances []string, runID string) error {
	if runID == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		runID = hex.EncodeToString(b[:])
	}
	for _, inst := range instances {
		u, err := url.Parse(inst)
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrServiceUnfit, inst, err)
		}
		for _, t := range pol.Tiers {
			key := t.KeyPrefix + "rlverify-probe-" + runID
			call := serviceCall(pol.Service, attacks.RequestInfo{Key: key, Tenant: "rlverify-probe", Tier: t.Name})
			var err error
			for attempt := 0; attempt < probeAttempts; attempt++ {
				if attempt > 0 {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(probeRetry):
					}
				}
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = c.Probe(pctx, u.Host, call)
				cancel()
				if !transient(err) {
					break
				}
			}
			if err != nil {
				var se *envoyrls.StatusError
				if errors.As(err, &se) && !errors.Is(err, envoyrls.ErrNotRateLimitService) {
					return fmt.Errorf("%w: tier %s, domain %q: the service refused the call: %w", ErrServiceUnfit, t.Name, pol.Service.Domain, err)
				}
				return fmt.Errorf("%w: tier %s: %w", ErrServiceUnfit, t.Name, err)
			}
		}
	}
	return nil
}

// The probe tries a call that failed for a reason that may pass (a store
// connection the service has not yet re-established) a few times before it
// gives up: a first call is not a verdict.
const (
	probeAttempts = 3
	probeRetry    = 300 * time.Millisecond
)

// transient reports an error a second call may not get: gRPC UNKNOWN,
// DEADLINE_EXCEEDED, UNAVAILABLE, or a deadline of the client's own.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var se *envoyrls.StatusError
	if errors.As(err, &se) {
		return se.Code == 2 || se.Code == 4 || se.Code == 14
	}
	return errors.Is(err, context.DeadlineExceeded)
}
