package rlverify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/policy"
)

// DiscoverOptions configure Discover: the probes' target and shape
// (discover.Options) and consent to probe beyond loopback.
type DiscoverOptions struct {
	discover.Options
	// AllowRemote allows targets outside loopback (only services you own).
	AllowRemote bool
	// Overrides set where the key goes and which statuses mean admitted
	// and rejected, as for an attack (over Identity, Admitted, Rejected).
	Overrides PolicyOverrides
	// KeysFile, when Keys is nil, is read into Keys (LoadDiscoveryKeys).
	KeysFile string
}

// Discovery is a discovered policy: the measurements, the policy file's
// text (every number commented) and the policy as rlverify loads it.
type Discovery struct {
	Result *discover.Result
	YAML   []byte
	Policy *policy.Policy
}

// Discover probes the service at o.Targets and writes its policy. Bad
// options are an OptionError; a service that cannot be measured (nothing
// admitted, no response) is another error.
func Discover(ctx context.Context, o DiscoverOptions) (*Discovery, error) {
	if len(o.Targets) == 0 {
		return nil, fieldErr("Targets", "is empty: give at least one URL (your service's, with the path to probe)")
	}
	if !o.Overrides.IsZero() {
		p, err := o.Overrides.Apply(policy.Default())
		if err != nil {
			return nil, err
		}
		if o.Overrides.Identity != "" {
			o.Identity = policy.Identity{In: p.Identity.In, Name: p.Identity.Name}
		}
		if len(o.Overrides.Admitted) > 0 {
			o.Admitted = p.Statuses.Admitted
		}
		if len(o.Overrides.Rejected) > 0 {
			o.Rejected = p.Statuses.Rejected
		}
	}
	if o.Keys == nil && o.KeysFile != "" {
		kf, err := LoadDiscoveryKeys(o.KeysFile)
		if err != nil {
			return nil, err
		}
		o.Keys = kf
	}
	if err := CheckTargets(o.Targets, o.AllowRemote); err != nil {
		return nil, optionWrap(err)
	}
	if o.Budget != 0 && o.Budget < discover.MinBudget {
		return nil, fieldErr("Budget", "%s: want at least %s", o.Budget, discover.MinBudget)
	}
	res, err := discover.Run(ctx, o.Options)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &InterruptedError{Err: err}
		}
		return nil, err
	}
	text, pol, err := discover.Policy(res)
	if err != nil {
		return nil, err
	}
	return &Discovery{Result: res, YAML: text, Policy: pol}, nil
}

// LoadDiscoveryKeys reads a keys file (tier: [key, …]) for discovery, where
// the tiers are whatever the file names: each is measured on its own keys.
func LoadDiscoveryKeys(file string) (*attacks.KeyFile, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, optionWrap(fmt.Errorf("keys file: %w", err))
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, attacks.MaxKeyFileBytes+1)); err != nil {
		return nil, optionWrap(fmt.Errorf("keys file %s: %w", file, err))
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b.Bytes(), &raw); err != nil || len(raw) == 0 {
		if err == nil {
			err = errors.New("no tiers")
		}
		return nil, optionWrap(fmt.Errorf("keys file %s: want tier: [key, …] lines, e.g. free: [k1, k2]: %w", file, err))
	}
	tiers := make([]string, 0, len(raw))
	for t := range raw {
		tiers = append(tiers, t)
	}
	sort.Strings(tiers)
	p := &policy.Policy{Name: "keys"}
	for _, t := range tiers {
		p.Tiers = append(p.Tiers, policy.Tier{Name: t, Limits: []policy.Limit{{Capacity: 1, Rate: 1}}})
	}
	if err := p.Validate(); err != nil {
		return nil, optionWrap(fmt.Errorf("keys file %s: %w", file, err))
	}
	kf, err := attacks.ParseKeyFile(file, b.Bytes(), p)
	return kf, optionWrap(err)
}
