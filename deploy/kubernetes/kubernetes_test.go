// Package kubernetes_test validates the manifests of deploy/kubernetes
// against the Kubernetes API types (no cluster needed), and runs the Jobs'
// own arguments on this machine: the Indexed Job's shards as three
// processes that start together, then the check Job's merge, whose verdict
// must equal a single process's run of the same plan.
package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// manifests are every object of this directory's YAML files, decoded
// strictly (an unknown or misspelt field is an error) into the API types.
type manifests struct {
	jobs        map[string]*batchv1.Job
	configMaps  map[string]*corev1.ConfigMap
	claims      map[string]*corev1.PersistentVolumeClaim
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
}

func load(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	m := &manifests{jobs: map[string]*batchv1.Job{}, configMaps: map[string]*corev1.ConfigMap{},
		claims: map[string]*corev1.PersistentVolumeClaim{}, deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}}
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			where := fmt.Sprintf("%s document %d", file, i+1)
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(doc), &head), where)
			switch head.APIVersion + " " + head.Kind {
			case "batch/v1 Job":
				o := strict[batchv1.Job](t, doc, where)
				m.jobs[o.Name] = o
			case "v1 ConfigMap":
				o := strict[corev1.ConfigMap](t, doc, where)
				m.configMaps[o.Name] = o
			case "v1 PersistentVolumeClaim":
				o := strict[corev1.PersistentVolumeClaim](t, doc, where)
				m.claims[o.Name] = o
			case "apps/v1 Deployment":
				o := strict[appsv1.Deployment](t, doc, where)
				m.deployments[o.Name] = o
			case "v1 Service":
				o := strict[corev1.Service](t, doc, where)
				m.services[o.Name] = o
			default:
				t.Fatalf("%s: unexpected %s %s", where, head.APIVersion, head.Kind)
			}
		}
	}
	return m
}

// strict decodes doc into a T, refusing unknown fields.
func strict[T any](t *testing.T, doc, where string) *T {
	t.Helper()
	var o T
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &o), where)
	return &o
}

// refVar matches a $(VAR) reference of a container's command or args.
var refVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) as the kubelet does with env; an undefined
// reference is an error here (the kubelet would pass it on literally).
func expand(s string, env map[string]string) (string, error) {
	var missing []string
	out := refVar.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := env[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q refers to $(%s), which the container does not define", s, strings.Join(missing, "), $("))
	}
	return out, nil
}

// containerEnv resolves c's environment: values as given, configMapKeyRef
// from cms (the key must exist: the kubelet refuses to start the pod
// otherwise), the completion index annotation as index.
func containerEnv(t *testing.T, c *corev1.Container, cms map[string]map[string]string, index int) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := cms[ref.Name][ref.Key]
			require.True(t, ok, "env %s: ConfigMap %s has no key %s", e.Name, ref.Name, ref.Key)
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			require.Equal(t, "metadata.annotations['batch.kubernetes.io/job-completion-index']", e.ValueFrom.FieldRef.FieldPath, "env %s", e.Name)
			env[e.Name] = strconv.Itoa(index)
		default:
			t.Fatalf("env %s: unsupported source", e.Name)
		}
	}
	return env
}

// args are c's arguments with $(VAR) expanded and paths under its volume
// mounts moved to the directories of mounts.
func args(t *testing.T, c *corev1.Container, env map[string]string, mounts map[string]string) []string {
	t.Helper()
	var out []string
	for _, a := range c.Args {
		x, err := expand(a, env)
		require.NoError(t, err, "container %s", c.Name)
		for _, vm := range c.VolumeMounts {
			dir, ok := mounts[vm.Name]
			require.True(t, ok, "volume %s", vm.Name)
			if x == vm.MountPath || strings.HasPrefix(x, vm.MountPath+"/") {
				x = dir + strings.TrimPrefix(x, vm.MountPath)
			}
		}
		out = append(out, x)
	}
	return out
}

// flagValues are the values of every --name in a.
func flagValues(a []string, name string) []string {
	var out []string
	for i := 0; i+1 < len(a); i++ {
		if a[i] == name {
			out = append(out, a[i+1])
		}
	}
	return out
}

// without is a with the flags names and their values left out.
func without(a []string, names ...string) []string {
	var out []string
	for i := 0; i < len(a); i++ {
		if slices.Contains(names, a[i]) {
			i++
			continue
		}
		out = append(out, a[i])
	}
	return out
}

func TestManifests(t *testing.T) {
	m := load(t)
	shards, check := m.jobs["rlverify-shards"], m.jobs["rlverify-check"]
	require.NotNil(t, shards, "shards.yaml: Job rlverify-shards")
	require.NotNil(t, check, "check.yaml: Job rlverify-check")
	require.NotNil(t, m.configMaps["rlverify-run"])
	require.NotNil(t, m.claims["rlverify-results"])

	// The Indexed Job: every shard at once, never retried late.
	spec := shards.Spec
	require.NotNil(t, spec.CompletionMode)
	require.Equal(t, batchv1.IndexedCompletion, *spec.CompletionMode)
	require.NotNil(t, spec.Completions)
	n := int(*spec.Completions)
	require.GreaterOrEqual(t, n, 2)
	require.Equal(t, spec.Completions, spec.Parallelism, "parallelism = completions: a shard waiting for a slot misses the start")
	require.NotNil(t, spec.BackoffLimit)
	require.Zero(t, *spec.BackoffLimit, "a retried shard would start late")
	require.Equal(t, corev1.RestartPolicyNever, spec.Template.Spec.RestartPolicy)
	require.Len(t, spec.Template.Spec.Containers, 1)
	shard := &spec.Template.Spec.Containers[0]
	require.Equal(t, "attack", shard.Args[0])
	require.Equal(t, []string{fmt.Sprintf("$(JOB_COMPLETION_INDEX)/%d", n)}, flagValues(shard.Args, "--shard-index"))
	startAt := flagValues(shard.Args, "--start-at")
	require.Len(t, startAt, 1)
	require.Equal(t, []string{"none"}, flagValues(shard.Args, "--fail-on"), "the check Job judges; a shard's verdict must not fail its pod")
	// The start instant comes from a ConfigMap key made per run, so a pod
	// without it never starts (the key is not optional).
	for _, e := range shard.Env {
		if "$("+e.Name+")" == startAt[0] {
			ref := e.ValueFrom.ConfigMapKeyRef
			require.NotNil(t, ref)
			require.False(t, ref.Optional != nil && *ref.Optional, "the start instant must not be optional")
		}
	}

	// The check Job merges exactly the shards' histories with the skew.
	require.Len(t, check.Spec.Template.Spec.Containers, 1)
	judge := &check.Spec.Template.Spec.Containers[0]
	require.Equal(t, "check", judge.Args[0])
	hist := flagValues(shard.Args, "--history")
	require.Len(t, hist, 1)
	var want []string
	for i := range n {
		want = append(want, strings.ReplaceAll(hist[0], "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)))
	}
	require.Equal(t, want, flagValues(judge.Args, "--history"), "check.yaml lists every shard's history")
	require.Len(t, flagValues(judge.Args, "--clock-skew"), 1)

	// Both Jobs mount the shared claim and the declared policy, which
	// they pass as --policy (never judging against rlverify's own); every
	// $(VAR) is defined.
	for _, j := range []*batchv1.Job{shards, check} {
		vols := j.Spec.Template.Spec.Volumes
		require.Len(t, vols, 2, j.Name)
		require.NotNil(t, vols[0].PersistentVolumeClaim, j.Name)
		require.Equal(t, "rlverify-results", vols[0].PersistentVolumeClaim.ClaimName, j.Name)
		require.NotNil(t, vols[1].ConfigMap, j.Name)
		require.Equal(t, "rlverify-policy", vols[1].ConfigMap.Name, j.Name)
		c := &j.Spec.Template.Spec.Containers[0]
		require.Equal(t, []string{"/etc/rlverify/policy.yaml"}, flagValues(c.Args, "--policy"), j.Name)
		defined := map[string]string{}
		for _, e := range c.Env {
			defined[e.Name] = "x"
		}
		for _, a := range c.Args {
			_, err := expand(a, defined)
			require.NoError(t, err, j.Name)
		}
	}
	// The declared policy is what the sample target enforces (serve
	// without --policy: the built-in one), and it loads.
	declared, err := policy.Parse("config.yaml rlverify-policy", []byte(m.configMaps["rlverify-policy"].Data["policy.yaml"]))
	require.NoError(t, err)
	require.Equal(t, policy.Default().Tiers, declared.Tiers, "the ConfigMap's policy is the sample target's")
	require.NotContains(t, m.deployments["rlverify-limiter"].Spec.Template.Spec.Containers[0].Args, "--policy")
	skew, err := time.ParseDuration(m.configMaps["rlverify-run"].Data["clock-skew"])
	require.NoError(t, err, "config.yaml clock-skew")
	require.Positive(t, skew)

	// The sample target is what config.yaml's target names.
	svc := m.services["rlverify-limiter"]
	require.NotNil(t, svc)
	u, err := url.Parse(m.configMaps["rlverify-run"].Data["target"])
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%s:%d", svc.Name, svc.Spec.Ports[0].Port), u.Host)
	require.Equal(t, svc.Spec.Selector, m.deployments["rlverify-limiter"].Spec.Template.Labels)
}

// free returns a free loopback port.
func free(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a started process and its combined output.
type proc struct {
	cmd *exec.Cmd
	out *bytes.Buffer
}

func start(t *testing.T, ctx context.Context, bin string, a ...string) *proc {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, a...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start(), "%s %s", bin, strings.Join(a, " "))
	return &proc{cmd, &out}
}

// daemon starts a process that runs until the test ends.
func daemon(t *testing.T, bin string, a ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := start(t, ctx, bin, a...)
	t.Cleanup(func() {
		cancel()
		_ = p.cmd.Wait()
	})
}

func waitUp(t *testing.T, addr string, get bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if get {
			var resp *http.Response
			resp, err = http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
		} else {
			var c net.Conn
			c, err = net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
		}
		if err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s not up: %v", addr, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs a process to its end and returns its exit code and output.
func run(t *testing.T, bin string, a ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := start(t, ctx, bin, a...)
	err := p.cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, p.out.String()
}

// TestThreeShardsJudgeAsOne runs the manifests on this machine: the sample
// target's Redis and limiter replicas (target.yaml's arguments) behind a
// round-robin proxy for its Service, the Indexed Job's shards as one
// process per completion index with the Job's own arguments, all waiting
// for one start instant, then the check Job's arguments on their
// histories. The merged verdict, check by check, must be the one a single
// process gets running the same attack without the shard flags.
func TestThreeShardsJudgeAsOne(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds rlverify and runs it as separate processes")
	}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is missing and CI=true: apt-get install -y redis-server")
		}
		t.Skip("redis-server not found (apt-get install -y redis-server): the sample target keeps its state in Redis")
	}
	m := load(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "rlverify")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rlverify")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/rlverify: %s", out)

	// The target: target.yaml's Redis and limiter containers, their
	// addresses moved to loopback.
	redisPort := free(t)
	rc := m.deployments["rlverify-redis"].Spec.Template.Spec.Containers[0]
	daemon(t, redis, append(slices.Clone(rc.Args), "--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1")...)
	waitUp(t, fmt.Sprintf("127.0.0.1:%d", redisPort), false)
	svcRedis := m.services["rlverify-redis"]
	lim := m.deployments["rlverify-limiter"]
	var backends []*url.URL
	for range int(*lim.Spec.Replicas) {
		port := free(t)
		var a []string
		for _, x := range lim.Spec.Template.Spec.Containers[0].Args {
			x = strings.ReplaceAll(x, fmt.Sprintf("0.0.0.0:%d", lim.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort), fmt.Sprintf("127.0.0.1:%d", port))
			x = strings.ReplaceAll(x, fmt.Sprintf("%s:%d", svcRedis.Name, svcRedis.Spec.Ports[0].Port), fmt.Sprintf("127.0.0.1:%d", redisPort))
			a = append(a, x)
		}
		daemon(t, bin, a...)
		waitUp(t, fmt.Sprintf("127.0.0.1:%d", port), true)
		backends = append(backends, &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)})
	}
	require.GreaterOrEqual(t, len(backends), 2, "the sample target has replicas to share a Redis")
	// The Service: round robin over the replicas.
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(backends[next.Add(1)%uint64(len(backends))])
	}}
	svc := httptest.NewServer(proxy)
	t.Cleanup(svc.Close)

	// The shards: one process per completion index, the Job's arguments.
	job := m.jobs["rlverify-shards"]
	n := int(*job.Spec.Completions)
	results := filepath.Join(dir, "results")
	require.NoError(t, os.MkdirAll(results, 0o755))
	// The policy ConfigMap's files, as the kubelet mounts them.
	polDir := filepath.Join(dir, "policy")
	require.NoError(t, os.MkdirAll(polDir, 0o755))
	for name, text := range m.configMaps["rlverify-policy"].Data {
		require.NoError(t, os.WriteFile(filepath.Join(polDir, name), []byte(text), 0o644))
	}
	mounts := map[string]string{"results": results, "policy": polDir}
	at := time.Now().Add(4 * time.Second).UTC().Truncate(time.Millisecond)
	cms := map[string]map[string]string{
		"rlverify-run":   {"target": svc.URL, "clock-skew": m.configMaps["rlverify-run"].Data["clock-skew"]},
		"rlverify-start": {"at": at.Format(time.RFC3339Nano), "run-id": fmt.Sprintf("t%d", time.Now().UnixNano())},
	}
	c := &job.Spec.Template.Spec.Containers[0]
	type result struct {
		code int
		out  string
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	var shardArgs []string
	for i := range n {
		a := args(t, c, containerEnv(t, c, cms, i), mounts)
		shardArgs = a
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].code, res[i].out = run(t, bin, a...)
		}()
	}
	wg.Wait()
	var starts []time.Time
	for i, r := range res {
		require.Equal(t, 0, r.code, "shard %d: %s", i, r.out)
		h, err := history.ReadFile(filepath.Join(results, fmt.Sprintf("shard-%d.jsonl", i)))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%d/%d", i+1, n), h.Run.Shard, "completion index %d runs shard %d/%d", i, i+1, n)
		require.False(t, h.Run.Start.Before(at), "shard %d began %s before the instant", i, at.Sub(h.Run.Start))
		starts = append(starts, h.Run.Start)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	spread := starts[len(starts)-1].Sub(starts[0])
	t.Logf("%d shards began within %s of each other, %s after the instant", n, spread, starts[0].Sub(at))
	require.Less(t, spread, time.Second, "the shards begin together")

	// The check Job's merge.
	cj := &m.jobs["rlverify-check"].Spec.Template.Spec.Containers[0]
	code, checkOut := run(t, bin, args(t, cj, containerEnv(t, cj, cms, 0), mounts)...)
	merged, err := reports.ReadFile(filepath.Join(results, "latest", "result.json"))
	require.NoError(t, err, "the check Job writes result.json: %s", checkOut)

	// One process, the same attack without the shard flags, fresh keys.
	single := filepath.Join(dir, "single")
	a := without(shardArgs, "--shard-index", "--start-at", "--history", "--out", "--run-id")
	a = append(a, "--out", single, "--run-id", "single")
	scode, sout := run(t, bin, a...)
	require.Equal(t, 0, scode, "single process: %s", sout)
	one, err := reports.ReadFile(filepath.Join(single, "latest", "result.json"))
	require.NoError(t, err)

	require.Equal(t, one.Stats.Requests, merged.Stats.Requests, "the shards together send the plan's requests")
	require.Equal(t, len(one.Keys), len(merged.Keys), "every shard sends the same keys")
	require.Equal(t, verdicts(one), verdicts(merged), "check by check, the merge judges as one process does\nmerged:\n%s", checkOut)
	require.Equal(t, one.Verdict, merged.Verdict)
	wantCode := 0
	if merged.Verdict == checks.Fail {
		wantCode = 1
	}
	require.Equal(t, wantCode, code, "the check Job's exit status is the verdict: %s", checkOut)
	t.Logf("merged and single verdict %s; admitted %d of %d (single %d)", merged.Verdict, merged.Stats.Admitted, merged.Stats.Requests, one.Stats.Admitted)
}

func verdicts(d *reports.Document) map[string]checks.Verdict {
	out := map[string]checks.Verdict{}
	for _, r := range d.Checks {
		out[r.Name] = r.Verdict
	}
	return out
}
