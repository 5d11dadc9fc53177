package envs

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

func TestEmbeddedStoreDownFailsOpenAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis")
	}
	pol := policy.Default()
	stack, err := Embedded{}.Start(context.Background(), Spec{Policy: pol, Limiter: "token-bucket", Store: catalog.Redis, Instances: 2})
	require.NoError(t, err)
	defer stack.Close()
	require.Len(t, stack.Instances, 2)
	require.True(t, stack.Faults.Supports(FaultStoreDown))
	client := &http.Client{Timeout: 3 * time.Second}
	hit := func() int {
		req, _ := http.NewRequest(http.MethodGet, stack.Instances[0]+"/api", nil)
		req.Header.Set("X-API-Key", "free-down")
		resp, err := client.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := 0; i < 10; i++ {
		require.Equal(t, 200, hit())
	}
	require.Equal(t, 429, hit(), "redis enforces the quota")
	require.NoError(t, stack.Faults.Inject(context.Background(), FaultStoreDown, ""))
	start := time.Now()
	require.Equal(t, 200, hit(), "fail open while the store is down")
	require.Less(t, time.Since(start), time.Second, "decided within the store timeout, not hung")
	require.NoError(t, stack.Faults.Clear(context.Background(), FaultStoreDown))
	deadline := time.Now().Add(3 * time.Second)
	for hit() == 200 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, 429, hit(), "enforcement resumes after recovery")
	require.NoError(t, stack.Close())
}

func TestParseSkews(t *testing.T) {
	s, err := ParseSkews("2s", 3)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{2 * time.Second, -2 * time.Second, 2 * time.Second}, s)
	s, err = ParseSkews("1=-1500ms", 3)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{0, -1500 * time.Millisecond, 0}, s)
	s, err = ParseSkews("+2s@1", 3)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{0, 2 * time.Second, 0}, s)
	for _, bad := range []string{"", "soon", "7=1s", "x=1s", "2s@9", "2s@1,3s"} {
		_, err := ParseSkews(bad, 3)
		require.Error(t, err, bad)
	}
	require.True(t, strings.HasPrefix("x", "x"))
}
