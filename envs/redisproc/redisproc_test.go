package redisproc

import (
	"os"
	"strings"
	"testing"
)

// need skips when redis-server is missing, except in CI where it must exist.
func need(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

func TestServerStartStopRestart(t *testing.T) {
	need(t)
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if r, err := Do(s.Addr, "SET", "k", "v"); err != nil || r != "OK" {
		t.Fatalf("SET: %q %v", r, err)
	}
	s.Stop()
	if _, err := Do(s.Addr, "PING"); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
	s.Stop() // idempotent
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if r, err := Do(s.Addr, "GET", "k"); err == nil && r == "v" {
		t.Fatal("state survived a restart")
	}
}

func TestCluster(t *testing.T) {
	need(t)
	c, err := StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	info, err := Do(c.Nodes[0].Addr, "CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("cluster info: %v %s", err, info)
	}
}
