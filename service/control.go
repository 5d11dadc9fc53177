package service

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/limiters"
)

// Control paths of an instance started with its control endpoint on
// (`rlverify serve --control`): the harness injects instance faults and
// drains regional consumption through them. Anyone who can reach them can
// break the limiter, so they exist only when asked for.
// Faults the control endpoint injects into an instance (faults/ is their
// home).
const (
	FaultClockSkew = faults.ClockSkew
	FaultRulesDown = faults.RulesDown
	// FaultLimitChange's param names a limit change the instance's policy
	// declares (changes); clearing it gives the changed tiers their
	// declared limits back.
	FaultLimitChange = faults.LimitChange
)

// EnvControlToken is the environment variable serve reads its control
// token from (the docker environment sets it in every limiter container).
const EnvControlToken = "RLVERIFY_CONTROL_TOKEN"

const (
	// ControlFaultPath: POST ?kind=K&param=P injects, DELETE ?kind=K clears.
	ControlFaultPath = "/_rlverify/fault"
	// ControlDrainPath: POST returns {"tier": {"key": n}}, what this
	// instance admitted since the last drain (regional replicas only).
	ControlDrainPath = "/_rlverify/drain"
)

// Control serves an instance's control endpoint in front of Next.
// clock-skew's param is this instance's shift, a signed Go duration
// ("+2s", "-1500ms"); rules-down takes none.
type Control struct {
	Next http.Handler
	// Clock is moved by clock-skew (nil: not supported).
	Clock *SkewClock
	// Rules is taken down by rules-down (nil: not supported).
	Rules *RuleSource
	// Limits takes limit-change (nil: not supported; nor when its policy
	// declares no change).
	Limits *Service
	// Replicas are drained by ControlDrainPath (nil: not regional).
	Replicas map[string]*limiters.Regional
	// Token, when set, must come with every control request as
	// Authorization: Bearer TOKEN (ControlClient.Token).
	Token string
}

// Supports reports whether the instance can take a fault of kind.
func (c *Control) Supports(kind string) bool {
	switch kind {
	case FaultClockSkew:
		return c.Clock != nil
	case FaultRulesDown:
		return c.Rules != nil
	case FaultLimitChange:
		return c.Limits != nil && c.Limits.Policy != nil && len(c.Limits.Policy.Changes) > 0
	}
	return false
}

// ServeHTTP implements http.Handler.
func (c *Control) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.URL.Path == ControlFaultPath || r.URL.Path == ControlDrainPath) && c.Token != "" &&
		subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+c.Token)) != 1 {
		http.Error(w, "control: a token is required", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case ControlFaultPath:
		c.serveFault(w, r)
	case ControlDrainPath:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "drain: use POST", http.StatusMethodNotAllowed)
			return
		}
		if c.Replicas == nil {
			http.Error(w, "drain: this instance keeps no regional replica (one started with RegionMode replicated)", http.StatusNotFound)
			return
		}
		out, _ := RegionReplicas(c.Replicas).Drain(r.Context())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	default:
		c.Next.ServeHTTP(w, r)
	}
}

func (c *Control) serveFault(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	if !c.Supports(kind) {
		http.Error(w, fmt.Sprintf("fault %q: this instance takes %s", kind, c.supported()), http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPost:
		switch kind {
		case FaultClockSkew:
			param := r.URL.Query().Get("param")
			d, err := time.ParseDuration(strings.TrimSpace(param))
			if err != nil {
				http.Error(w, fmt.Sprintf("clock-skew: param %q: want a signed duration such as +2s: %v", param, err), http.StatusBadRequest)
				return
			}
			c.Clock.Shift(d)
		case FaultRulesDown:
			c.Rules.SetDown(true)
		case FaultLimitChange:
			name := strings.TrimSpace(r.URL.Query().Get("param"))
			if name == "" {
				http.Error(w, "limit-change: param needs the name of a change the policy declares (changes)", http.StatusBadRequest)
				return
			}
			if err := c.Limits.ApplyChange(name); err != nil {
				http.Error(w, "limit-change: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
	case http.MethodDelete:
		switch kind {
		case FaultClockSkew:
			c.Clock.Reset()
		case FaultRulesDown:
			c.Rules.SetDown(false)
		case FaultLimitChange:
			if err := c.Limits.ApplyChange(""); err != nil {
				http.Error(w, "limit-change: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "fault: use POST to inject, DELETE to clear", http.StatusMethodNotAllowed)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Control) supported() string {
	var kinds []string
	for _, k := range []string{FaultClockSkew, FaultRulesDown, FaultLimitChange} {
		if c.Supports(k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return "no faults"
	}
	return strings.Join(kinds, ", ")
}

// ControlClient calls instances' control endpoints.
type ControlClient struct {
	// Client defaults to one with a 5 s timeout.
	Client *http.Client
	// Token is sent as Authorization: Bearer TOKEN when set.
	Token string
}

func (cc ControlClient) client() *http.Client {
	if cc.Client != nil {
		return cc.Client
	}
	return controlHTTP
}

var controlHTTP = &http.Client{Timeout: 5 * time.Second}

// Fault injects (inject true) or clears a fault of kind on the instance at
// base (its URL).
func (cc ControlClient) Fault(ctx context.Context, base, kind, param string, inject bool) error {
	q := url.Values{"kind": {kind}}
	method := http.MethodDelete
	if inject {
		method = http.MethodPost
		if param != "" {
			q.Set("param", param)
		}
	}
	_, err := cc.do(ctx, method, strings.TrimRight(base, "/")+ControlFaultPath+"?"+q.Encode())
	return err
}

// Drain takes what the instance at base admitted since its last drain.
func (cc ControlClient) Drain(ctx context.Context, base string) (map[string]map[string]int64, error) {
	body, err := cc.do(ctx, http.MethodPost, strings.TrimRight(base, "/")+ControlDrainPath)
	if err != nil {
		return nil, err
	}
	var out map[string]map[string]int64
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("drain %s: decode %q: %w", base, truncate(body, 200), err)
	}
	return out, nil
}

func (cc ControlClient) do(ctx context.Context, method, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("control %s %s: %w", method, u, err)
	}
	if cc.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cc.Token)
	}
	resp, err := cc.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("control %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("control %s %s: read reply: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("control %s %s: %s: %s", method, u, resp.Status, truncate(bytes.TrimSpace(body), 200))
	}
	return body, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
