package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
)

// shapeFlags say what a user's service needs to be reached and judged:
// the request shape, where the identity goes, real keys, and which statuses
// mean admitted and rejected. attack, audit and compare share them.
type shapeFlags struct {
	method       string
	headers      []string
	body         string
	identity     string
	keysFile     string
	admitted     []string
	rejected     []string
	maxErrorRate float64
	bodyAnywhere bool
}

func addShapeFlags(fl *pflag.FlagSet, f *shapeFlags) {
	fl.StringVar(&f.method, "method", "", "HTTP method of every request (default: the plan's, else GET)")
	fl.StringArrayVar(&f.headers, "header", nil, "extra request header 'Name: value' (repeatable; templates {key} {tenant} {tier} {i} {run})")
	fl.StringVar(&f.body, "body", "", "request body, or @FILE to read it from FILE (templates as for --header)")
	fl.BoolVar(&f.bodyAnywhere, "body-files-anywhere", false, "let a plan's body: \"@FILE\" read any file, not only files inside the plan's folder (only for plans you trust: the body is sent to the target)")
	fl.StringVar(&f.identity, "identity", "", "where the key goes, overriding the policy: header:NAME, bearer, query:NAME or cookie:NAME")
	fl.StringVar(&f.keysFile, "keys", "", "YAML file of real API keys by tier (free: [k1, k2], paid: [k3]); each logical key of the plan takes its own, redacted in the history")
	fl.StringSliceVar(&f.admitted, "admitted", nil, "statuses that mean admitted, overriding the policy (default 2xx), e.g. 2xx,304")
	fl.StringSliceVar(&f.rejected, "rejected", nil, "statuses that mean rejected by the limit, overriding the policy (default 429)")
	fl.Float64Var(&f.maxErrorRate, "max-error-rate", checks.DefaultMaxErrorRate, "largest share of requests that may end in an error (no response or an undeclared status) before the run counts as no evidence (verdict unknown)")
}

// planOptions are the attacks.Load options the flags ask for.
func (f *shapeFlags) planOptions() []attacks.LoadOption {
	if f.bodyAnywhere {
		return []attacks.LoadOption{attacks.BodyFilesAnywhere()}
	}
	return nil
}

// request is the shape given on the command line.
func (f *shapeFlags) request() (attacks.Request, error) {
	h, err := attacks.ParseHeaders(f.headers)
	if err != nil {
		return attacks.Request{}, fmt.Errorf("--header %w", err)
	}
	return attacks.Request{Method: f.method, Body: f.body, Headers: h}, nil
}

// overrides are the changes to the declared policy the flags ask for.
func (f *shapeFlags) overrides() rlverify.PolicyOverrides {
	return rlverify.PolicyOverrides{Identity: f.identity, Admitted: f.admitted, Rejected: f.rejected}
}

// checkRate validates --max-error-rate.
func (f *shapeFlags) checkRate() error {
	if !(f.maxErrorRate > 0 && f.maxErrorRate <= 1) {
		return fmt.Errorf("--max-error-rate %g: want a share in (0, 1], e.g. 0.01 for 1%%", f.maxErrorRate)
	}
	return nil
}
