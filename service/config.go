package service

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/limitread"
	"github.com/rlverify/rlverify/policy"
)

// Config is one standalone instance's whole configuration as data: what
// `rlverify serve --config FILE` reads, and what the docker environment
// writes into each limiter container (so no environment depends on the
// command's flag names).
type Config struct {
	// Addr is the listen address (HOST:PORT).
	Addr string `yaml:"addr"`
	// Limiter is the catalog name; Store memory or redis.
	Limiter string `yaml:"limiter"`
	Store   string `yaml:"store,omitempty"`
	// Redis is the store's address (HOST:PORT) for Store redis.
	Redis string `yaml:"redis,omitempty"`
	// RedisLatency delays every exchange with Redis each way.
	RedisLatency policy.Duration `yaml:"redis_latency,omitempty"`
	// ClockOffset shifts the instance's clock.
	ClockOffset policy.Duration `yaml:"clock_offset,omitempty"`
	// RegionMode runs the instance as one of a region (RegionReplicated …).
	RegionMode string `yaml:"region_mode,omitempty"`
	// Downstream is the URL admitted requests are forwarded to.
	Downstream string `yaml:"downstream,omitempty"`
	// Control serves the control endpoint, behind ControlToken when set.
	Control      bool   `yaml:"control,omitempty"`
	ControlToken string `yaml:"control_token,omitempty"`
	// Policy is the declared policy (the built-in one when nil).
	Policy *policy.Policy `yaml:"-"`
}

// configFile is Config with the policy as it appears in the file.
type configFile struct {
	Config `yaml:",inline"`
	Policy yaml.Node `yaml:"policy,omitempty"`
}

// MaxConfigBytes bounds a configuration file.
const MaxConfigBytes = 1 << 20

// Marshal writes c as YAML that ParseConfig reads back to the same
// configuration (the policy included, checked by reading it back).
func (c Config) Marshal() ([]byte, error) {
	f := configFile{Config: c}
	if c.Policy != nil {
		if err := f.Policy.Encode(c.Policy); err != nil {
			return nil, fmt.Errorf("serve config: policy %s: %w", c.Policy.Name, err)
		}
	}
	out, err := yaml.Marshal(&f)
	if err != nil {
		return nil, fmt.Errorf("serve config: %w", err)
	}
	if _, err := ParseConfig("generated", out); err != nil {
		return nil, fmt.Errorf("serve config does not survive YAML: %w", err)
	}
	return out, nil
}

// ParseConfig reads a configuration written by Marshal (or by hand); name
// is the file's, for messages. Unknown fields are errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var f configFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Config{}, fmt.Errorf("serve config %s: %w", name, err)
	}
	c := f.Config
	if c.Limiter == "" || c.Addr == "" {
		return Config{}, fmt.Errorf("serve config %s: addr and limiter are required", name)
	}
	if f.Policy.Kind != 0 {
		b, err := yaml.Marshal(&f.Policy)
		if err != nil {
			return Config{}, fmt.Errorf("serve config %s: policy: %w", name, err)
		}
		if c.Policy, err = policy.Parse(name+": policy", b); err != nil {
			return Config{}, fmt.Errorf("serve config %s: %w", name, err)
		}
	}
	return c, nil
}

// ReadConfig reads the configuration in file.
func ReadConfig(file string) (Config, error) {
	data, err := limitread.File(file, MaxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("serve config: %w", err)
	}
	return ParseConfig(file, data)
}
