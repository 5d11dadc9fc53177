package catalog

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

func TestEveryEntryBuildsAndDecides(t *testing.T) {
	var env Env
	if err := redisproc.Available(); err == nil {
		s, err := redisproc.Start()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		c := limiters.NewRedisClient(s.Addr, time.Second)
		defer c.Close()
		env.Redis = c
	} else if os.Getenv("CI") == "true" {
		t.Fatal(err)
	}
	limits := []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: 3, Rate: 1, Count: 3, Window: policy.Duration(3 * time.Second)}}
	seen := map[string]bool{}
	for _, e := range All() {
		id := e.Name + "@" + e.Store
		if seen[id] {
			t.Errorf("duplicate entry %s", id)
		}
		seen[id] = true
		if e.Mapping() == "" || e.Description == "" || !e.Algorithm.Valid() {
			t.Errorf("%s: incomplete entry %+v (mapping %q)", id, e, e.Mapping())
		}
		if e.Faulty && e.Breaks == "" {
			t.Errorf("%s: faulty without Breaks", id)
		}
		if e.Gateway != nil {
			// Gateways run as their own processes or cluster
			// (envs/gateway); the reference service cannot hold them.
			if _, err := e.New(limits, env); err == nil || e.Gateway.Kind == "" || e.Gateway.Docs == "" {
				t.Errorf("%s: a gateway entry builds in process or lacks its kind or documentation", id)
			}
			continue
		}
		if e.Store == Redis && env.Redis == nil {
			if _, err := e.New(limits, Env{}); err == nil {
				t.Errorf("%s: built without a Redis client", id)
			}
			continue
		}
		l, err := e.New(limits, env)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		d, err := l.Allow(context.Background(), time.Now(), "rl:{free:cat-"+id+"}:api:v1", 1)
		if err != nil || !d.Allowed {
			t.Errorf("%s: first request: %+v %v", id, d, err)
		}
	}
	for _, a := range policy.Algorithms {
		for _, st := range []string{Memory, Redis} {
			if _, err := Lookup(string(a), st); err != nil {
				t.Error(err)
			}
		}
	}
	if e, err := Lookup("faulty/local-only", ""); err != nil || e.Store != Redis {
		t.Errorf("lookup local-only: %+v %v", e, err)
	}
	if _, err := Lookup("faulty/uncapped-refill", Redis); err == nil {
		t.Error("uncapped-refill has no redis store")
	}
	if e, _ := Lookup("faulty/trust-xff", Memory); !e.TrustXFF {
		t.Error("trust-xff entry does not set TrustXFF")
	}
}
