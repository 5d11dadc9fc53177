package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/testsvc"
)

// readmeCommandTests maps every `rlverify …` command line of README.md's
// fenced code blocks (continuations joined, trailing comment dropped,
// whitespace normalized) to the test that runs it, or to "no test: WHY" when
// a test cannot run it. A new README command needs one row here
// (TestReadmeCommandsAreEachRunByATest says which); a row whose command left
// the README, or whose test does not exist, fails too.
var readmeCommandTests = map[string]string{
	// Using it
	"rlverify plans":                          "TestPlansListAndShow",
	"rlverify plans show boundary-burst":      "TestReadmePlansValidateCommand",
	"rlverify plans validate my-plan.yaml":    "TestReadmePlansValidateCommand",
	"rlverify limiters":                       "TestLimitersListsEveryAlgorithmStoreAndFaultyVariant",
	"rlverify version":                        "TestFlagsAreConsistentAcrossCommands",
	"rlverify attack --plan concurrent-burst": "TestReadmeCheckLatestCommand",
	"rlverify attack --plan concurrent-burst --limiter faulty/racy-token-bucket": "TestAttackRacyBucketFailsOversellWithEvidence",
	"rlverify attack --plan concurrent-burst --store redis --instances 3":        "TestReadmeAttackCommands",
	"rlverify attack --plan boundary-burst --limiter fixed-window":               "TestReadmeAttackCommands",
	"rlverify attack --plan tiers --policy policies/seed-tiers.yaml":             "TestReadmeTiersCommand",
	// Thresholds
	"rlverify attack --plan overload --threshold 'latency.p99<50ms' --threshold 'errors<1%' --threshold 'phase.overload.admitted.rate<=8/s'": "TestReadmeThresholdAndClockSkewCommands",
	// Verify your own limiter
	`rlverify discover --target http://127.0.0.1:8080/v1/orders --identity bearer --keys internal/testsvc/policies/orders-keys.yaml --method POST --header 'Content-Type: application/json' --body '{"sku": "A-{i}"}' -o my-policy.yaml`:           "TestReadmeVerifyYourOwnLimiter",
	`rlverify attack --plan concurrent-burst --target http://127.0.0.1:8080/v1/orders --policy my-policy.yaml --keys internal/testsvc/policies/orders-keys.yaml --method POST --header 'Content-Type: application/json' --body '{"sku": "A-{i}"}'`: "TestReadmeVerifyYourOwnLimiterCommands",
	`rlverify audit --target http://127.0.0.1:8080/v1/orders --policy my-policy.yaml --keys internal/testsvc/policies/orders-keys.yaml --method POST --header 'Content-Type: application/json' --body '{"sku": "A-{i}"}'`:                          "TestReadmeVerifyYourOwnLimiterCommands",
	// Verify your Envoy rate-limit service
	"rlverify attack --plan concurrent-burst --target grpc://127.0.0.1:8001 --policy examples/envoy-ratelimit/policy.yaml":       "TestReadmeEnvoyRateLimit",
	"rlverify audit --target grpc://127.0.0.1:8001 --target grpc://127.0.0.1:8011 --policy examples/envoy-ratelimit/policy.yaml": "TestReadmeEnvoyRateLimit",
	"rlverify attack --plan boundary-burst --target grpc://127.0.0.1:8001 --policy examples/envoy-ratelimit/rolling.yaml":        "TestReadmeEnvoyRateLimit",
	"rlverify attack --plan multi-instance --limiter envoy/ratelimit --honest":                                                   "TestEnvoyRateLimitGateway",
	// Your own limiter, plan by plan
	"rlverify sink --addr 127.0.0.1:9090 &": "TestReadmeSinkCommands",
	"rlverify attack --plan concurrent-burst --target http://127.0.0.1:8080 --target http://127.0.0.1:8081 --policy my-policy.yaml --sink http://127.0.0.1:9090":                                                                                   "TestReadmeSinkCommands",
	`rlverify attack --plan concurrent-burst --target http://127.0.0.1:8080/v1/orders --method POST --header 'Content-Type: application/json' --body '{"sku": "A-{i}"}' --identity bearer --keys keys.yaml --admitted 201 --policy my-policy.yaml`: "TestReadmeBearerKeysCommand",
	// Judging a saved history
	"rlverify check --history rlverify-out/latest/history.jsonl":                                        "TestReadmeCheckLatestCommand",
	"rlverify check --history rlverify-out/latest/history.jsonl --checks oversell,token-bounds,headers": "TestReadmeCheckLatestCommand",
	"rlverify check --history a.jsonl --history b.jsonl --clock-skew 5ms --policy p.yaml":               "TestReadmeThresholdAndClockSkewCommands",
	// Judging another load tool's results
	"rlverify import --from vegeta results.json -o history.jsonl --policy my-policy.yaml --key free-a": "TestReadmeImportCommands",
	"rlverify import --from k6 k6-out.json -o history.jsonl --key-tag key":                             "TestReadmeImportCommands",
	"rlverify import --from har session.har -o history.jsonl --instance api.local:8080=0":              "TestReadmeImportCommands",
	"rlverify check --history history.jsonl":                                                           "TestReadmeImportCommands",
	// Choose your numbers
	"rlverify calibrate --traffic examples/calibrate/access.log.gz --key-field extra1 --policy examples/calibrate/candidate.yaml --abusive-keys free-scraper --report text --report html=calibrate.html --write-policy recommended.yaml": "TestReadmeChooseYourNumbers",
	"rlverify serve --policy recommended.yaml --addr 127.0.0.1:8080 &":                                 "TestReadmeChooseYourNumbers",
	"rlverify audit --target http://127.0.0.1:8080 --policy recommended.yaml --plans concurrent-burst": "TestReadmeChooseYourNumbers",
	// Simulated time
	"rlverify simulate --at 0,0.1,0.2,0.3,0.4,0.5,0.6,0.8,1.0,1.2,2.0,2.1,2.5,3.0,3.1,3.2,3.3,3.4,3.5,3.6 --limiter token-bucket:capacity=5,rate=2 --limiter sliding-log:limit=5,window=1s": "TestReadmeSimulateCommand",
	// Comparing implementations
	"rlverify compare --plan concurrent-burst --limiter token-bucket --limiter gcra --limiter x/time/rate --limiter faulty/racy-token-bucket":             "TestCompareMatrix",
	"rlverify compare --plan store-outage --limiter token-bucket@fail-open --limiter token-bucket@fail-closed --limiter token-bucket@fail-local":          "TestCompareFailModesSideBySide",
	"rlverify compare --plan concurrent-burst --limiter token-bucket --target mine=http://127.0.0.1:8080 --policy my-policy.yaml":                         "TestReadmeCompareTargetCommand",
	"rlverify compare --plan concurrent-burst --limiter nginx/limit-req --limiter haproxy/stick-table --limiter gubernator/global --limiter token-bucket": "TestCompareGatewaysConcurrentBurst",
	// Failure modes, regions and rules. The docker tests run these plans
	// with the same policy and limiter on --env docker (where CI has a
	// daemon, needEnv fails rather than skips); the embedded runs would
	// add about 17 s to this package.
	"rlverify attack --plan store-outage --policy fail-closed":                 "TestStoreOutageOnDocker",
	"rlverify attack --plan slow-store":                                        "TestStoreOutageOnDocker",
	"rlverify attack --plan rules-unavailable":                                 "TestScenariosOnDocker",
	"rlverify attack --plan clock-skew --limiter faulty/instance-clock":        "TestReadmeAttackCommands",
	"rlverify attack --plan clock-step --limiter faulty/wall-clock":            "TestReadmeAttackCommands",
	"rlverify attack --plan limit-change --limiter faulty/reload-resets":       "TestReadmeAttackCommands",
	"rlverify attack --plan global-guard":                                      "TestGlobalGuardProtectsDownstream",
	"rlverify attack --plan regions --region-mode independent":                 "TestReadmeAttackCommands",
	"rlverify attack --plan regions --region-sync 500ms --region-latency 50ms": "TestReadmeRegionsCommands",
	"rlverify compare --plan regions --region-setting strict//50ms --region-setting replicated/100ms/50ms --region-setting replicated/500ms/50ms": "TestReadmeRegionsCommands",
	// Environments
	"rlverify attack --plan multi-instance --env local --redis-cluster 3": "TestMultiInstanceOnEveryEnvironment",
	// multi-instance-20 and faulty/local-only on docker
	"rlverify attack --plan multi-instance --env docker --limiter faulty/local-only": "TestScenariosOnDocker",
}

// noTest marks a row whose command a test cannot run; the rest says why.
const noTest = "no test: "

// trailingComment starts a shell comment after a command (README arguments
// hold no " # ").
var trailingComment = regexp.MustCompile(`\s#(\s|$)`)

// readmeFencedCommands returns README.md's `rlverify …` command lines in
// fenced code blocks, normalized as readmeCommandTests' keys are.
func readmeFencedCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	var out []string
	fenced := false
	text := strings.ReplaceAll(string(b), "\\\n", " ") // a continued line is one command
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced || !strings.HasPrefix(line, "rlverify ") {
			continue
		}
		if loc := trailingComment.FindStringIndex(line); loc != nil {
			line = line[:loc[0]]
		}
		out = append(out, strings.Join(strings.Fields(line), " "))
	}
	return out
}

func TestReadmeCommandsAreEachRunByATest(t *testing.T) {
	cmds := readmeFencedCommands(t)
	require.NotEmpty(t, cmds)
	inReadme := map[string]bool{}
	for _, c := range cmds {
		inReadme[c] = true
	}
	// The package's test functions, by name.
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	defined := map[string]bool{}
	fn := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range fn.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
	}
	var missing []string
	for _, c := range cmds {
		if _, ok := readmeCommandTests[c]; !ok {
			missing = append(missing, fmt.Sprintf("\t%q: \"TestThatRunsIt\",", c))
		}
	}
	require.Empty(t, missing, "README.md shows commands no test is named for; add a row to readmeCommandTests (cmd/rlverify/readme_commands_test.go) for each, naming the test that runs it:\n%s", strings.Join(missing, "\n"))
	var gone, undefined []string
	for c, test := range readmeCommandTests {
		if !inReadme[c] {
			gone = append(gone, c)
		}
		if reason, ok := strings.CutPrefix(test, noTest); ok {
			require.NotEmpty(t, strings.TrimSpace(reason), "%q: say why no test runs it", c)
			continue
		}
		if name, _, _ := strings.Cut(test, "/"); !defined[name] {
			undefined = append(undefined, test+" (for "+c+")")
		}
	}
	sort.Strings(gone)
	sort.Strings(undefined)
	require.Empty(t, gone, "readmeCommandTests has rows for commands README.md no longer shows (fenced, as written): remove or update them")
	require.Empty(t, undefined, "readmeCommandTests names tests that do not exist in cmd/rlverify/*_test.go")
}

// readmeArgs returns the README command cmd, which must be a row of
// readmeCommandTests and still shown in README.md, split into arguments the
// way sh would (the README quotes with single quotes only), without the
// program name and a trailing "&"; each old→new pair of replace is applied to
// every argument (addresses, ports and paths that must be the test's own).
func readmeArgs(t *testing.T, cmd string, replace ...string) []string {
	t.Helper()
	require.Contains(t, readmeCommandTests, cmd, "not a row of readmeCommandTests")
	require.Contains(t, readmeFencedCommands(t), cmd, "README.md no longer shows this command")
	var args []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range cmd {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			require.False(t, !quoted && strings.ContainsRune(`"\$`+"`", r), "%q: quoting this reader does not handle", cmd)
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "%q: unbalanced quote", cmd)
	if inWord {
		args = append(args, cur.String())
	}
	require.Equal(t, "rlverify", args[0])
	args = args[1:]
	if args[len(args)-1] == "&" {
		args = args[:len(args)-1]
	}
	r := strings.NewReplacer(replace...)
	for i, a := range args {
		args[i] = r.Replace(a)
	}
	return args
}

// runReadme runs the built rlverify binary in dir, as a user would, and
// returns its stdout, stderr and exit code.
func runReadme(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rlverifyBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

// copyInto copies the repository file src (relative to the module root) to
// dir/dst, creating dst's folder.
func copyInto(t *testing.T, dir, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", src))
	require.NoError(t, err)
	dst = filepath.Join(dir, dst)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, b, 0o644))
}

var verdictLine = regexp.MustCompile(`(?m)^verdict:?\s+(PASS|FAIL|UNKNOWN)`)

func requireVerdict(t *testing.T, want, stdout, stderr string) {
	t.Helper()
	m := verdictLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, "no verdict line; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Equal(t, want, m[1], "stdout:\n%s\nstderr:\n%s", stdout, stderr)
}

// "print a plan's YAML to copy and edit", then "check a plan file (file:line
// errors)": the copy validates, a broken edit names its line.
func TestReadmePlansValidateCommand(t *testing.T) {
	dir := t.TempDir()
	yaml, stderr, code := runReadme(t, dir, readmeArgs(t, "rlverify plans show boundary-burst")...)
	require.Equal(t, ExitPass, code, stderr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "my-plan.yaml"), []byte(yaml), 0o644))
	validate := readmeArgs(t, "rlverify plans validate my-plan.yaml")
	out, stderr, code := runReadme(t, dir, validate...)
	require.Equal(t, ExitPass, code, stderr)
	require.Contains(t, out, "my-plan.yaml: ok — plan boundary-burst")

	broken := yaml + "phases: [\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "my-plan.yaml"), []byte(broken), 0o644))
	_, stderr, code = runReadme(t, dir, validate...)
	require.Equal(t, ExitUsage, code, stderr)
	require.Regexp(t, `my-plan\.yaml:\d+`, stderr, "file:line errors")
}

// The tiers plan with the seed policy the README names, run from a folder
// that holds policies/seed-tiers.yaml as the repository does.
func TestReadmeTiersCommand(t *testing.T) {
	dir := t.TempDir()
	copyInto(t, dir, "policies/seed-tiers.yaml", "policies/seed-tiers.yaml")
	out, stderr, code := runReadme(t, dir, readmeArgs(t, "rlverify attack --plan tiers --policy policies/seed-tiers.yaml")...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	requireVerdict(t, "PASS", out, stderr)
	require.Contains(t, out, "policy seed-tiers (policies/seed-tiers.yaml)")
	require.Regexp(t, `(?m)^isolation\s+PASS\s+\d+ keys over tiers free, paid`, out)
	require.FileExists(t, filepath.Join(dir, "rlverify-out", "latest", "history.jsonl"))
}

// readmeOrdersService starts the README's test service (`testsvc --service
// orders`, its default allowlist) and returns its base URL.
func readmeOrdersService(t *testing.T) string {
	t.Helper()
	keys, err := testsvc.LoadKeys(filepath.Join("..", "..", "internal", "testsvc", "policies", "orders-keys.yaml"))
	require.NoError(t, err)
	o, err := testsvc.NewOrders(testsvc.OrdersConfig{Keys: keys})
	require.NoError(t, err)
	url, stop := testsvc.Serve(o)
	t.Cleanup(stop)
	return url
}

// readmeRow returns the one row of readmeCommandTests run by test whose
// command starts with prefix, so that a README edit to that command is one
// edited row.
func readmeRow(t *testing.T, test, prefix string) string {
	t.Helper()
	var found []string
	for c, name := range readmeCommandTests {
		if name == test && strings.HasPrefix(c, prefix) {
			found = append(found, c)
		}
	}
	require.Len(t, found, 1, "readmeCommandTests: want one row for %s starting %q", test, prefix)
	return found[0]
}

// "Verify your own limiter", steps 2 and 3, against the test service the
// README starts; only its address and the repository paths are the test's
// (the orders policy is also there as my-policy.yaml, the name a reader
// writes their own under).
func TestReadmeVerifyYourOwnLimiterCommands(t *testing.T) {
	url := readmeOrdersService(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	replace := []string{"http://127.0.0.1:8080", url, "internal/testsvc/policies/", filepath.Join(root, "internal", "testsvc", "policies") + "/"}
	const test = "TestReadmeVerifyYourOwnLimiterCommands"
	t.Run("attack", func(t *testing.T) {
		dir := t.TempDir()
		copyInto(t, dir, "internal/testsvc/policies/orders.yaml", "my-policy.yaml")
		out, stderr, code := runReadme(t, dir, readmeArgs(t, readmeRow(t, test, "rlverify attack "), replace...)...)
		require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		requireVerdict(t, "PASS", out, stderr)
		require.Regexp(t, `(?m)^\s*evidence\s+PASS`, out)
	})
	t.Run("audit", func(t *testing.T) {
		dir := t.TempDir()
		copyInto(t, dir, "internal/testsvc/policies/orders.yaml", "my-policy.yaml")
		args := readmeArgs(t, readmeRow(t, test, "rlverify audit "), replace...)
		// Every plan that applies takes about a minute; two of them keep
		// the test fast and still run the audit as documented.
		args = append(args, "--plans", "concurrent-burst,precision")
		out, stderr, code := runReadme(t, dir, args...)
		require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		requireVerdict(t, "PASS", out, stderr)
		require.Regexp(t, `(?m)^\s*concurrent-burst\s+PASS`, out)
		require.Regexp(t, `(?m)^\s*precision\s+PASS`, out)
	})
}

// The request-shaping example, with the orders service's policy and
// allowlist as my-policy.yaml and keys.yaml.
func TestReadmeBearerKeysCommand(t *testing.T) {
	url := readmeOrdersService(t)
	dir := t.TempDir()
	copyInto(t, dir, "internal/testsvc/policies/orders.yaml", "my-policy.yaml")
	copyInto(t, dir, "internal/testsvc/policies/orders-keys.yaml", "keys.yaml")
	out, stderr, code := runReadme(t, dir, readmeArgs(t, `rlverify attack --plan concurrent-burst --target http://127.0.0.1:8080/v1/orders --method POST --header 'Content-Type: application/json' --body '{"sku": "A-{i}"}' --identity bearer --keys keys.yaml --admitted 201 --policy my-policy.yaml`, "http://127.0.0.1:8080", url)...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	requireVerdict(t, "PASS", out, stderr)
	h, err := os.ReadFile(filepath.Join(dir, "rlverify-out", "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotContains(t, string(h), "fr_alpha", "--keys are redacted in the history")
}

// "passes", then the saved history judged again through the latest link.
func TestReadmeCheckLatestCommand(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := runReadme(t, dir, readmeArgs(t, "rlverify attack --plan concurrent-burst")...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	requireVerdict(t, "PASS", out, stderr)
	out, stderr, code = runReadme(t, dir, readmeArgs(t, "rlverify check --history rlverify-out/latest/history.jsonl")...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	requireVerdict(t, "PASS", out, stderr)
	require.Regexp(t, `(?m)^\s*oversell\s+PASS`, out)
	// The streaming path: the checks chosen all stream.
	out, stderr, code = runReadme(t, dir, readmeArgs(t, "rlverify check --history rlverify-out/latest/history.jsonl --checks oversell,token-bounds,headers")...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	requireVerdict(t, "PASS", out, stderr)
	require.Contains(t, stderr, "judged on the streaming path")
	require.Regexp(t, `(?m)^\s*oversell\s+PASS`, out)
}

// Each import from importers/testdata's correct samples, then `check`.
func TestReadmeImportCommands(t *testing.T) {
	const samples = "importers/testdata/"
	for _, tc := range []struct {
		cmd     string
		files   map[string]string // sample → name the README uses
		replace []string
		fails   string // the one check that fails, "" for none
	}{
		{"rlverify import --from vegeta results.json -o history.jsonl --policy my-policy.yaml --key free-a",
			map[string]string{"vegeta-ok.json": "results.json", "policy-query.yaml": "my-policy.yaml"}, nil, ""},
		{"rlverify import --from k6 k6-out.json -o history.jsonl --key-tag key",
			map[string]string{"k6-ok.json": "k6-out.json"}, nil, ""},
		// The sample HAR was recorded against 127.0.0.1:8080. The README's
		// line gives no --policy, so the default one judges it, and it
		// declares RateLimit headers the sample's service never sent.
		{"rlverify import --from har session.har -o history.jsonl --instance api.local:8080=0",
			map[string]string{"har-ok.har": "session.har"}, []string{"api.local:8080", "127.0.0.1:8080"}, "headers"},
	} {
		t.Run(strings.Fields(tc.cmd)[3], func(t *testing.T) {
			dir := t.TempDir()
			for src, dst := range tc.files {
				copyInto(t, dir, samples+src, dst)
			}
			out, stderr, code := runReadme(t, dir, readmeArgs(t, tc.cmd, tc.replace...)...)
			require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
			require.Contains(t, out, "judge it with: rlverify check --history history.jsonl")
			out, stderr, code = runReadme(t, dir, readmeArgs(t, "rlverify check --history history.jsonl")...)
			require.Regexp(t, `(?m)^oversell\s+PASS`, out)
			if tc.fails == "" {
				require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
				requireVerdict(t, "PASS", out, stderr)
				return
			}
			require.Equal(t, ExitFail, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
			requireVerdict(t, "FAIL", out, stderr)
			fails := regexp.MustCompile(`(?m)^([a-z-]+) +FAIL +`).FindAllStringSubmatch(out, -1)
			require.Len(t, fails, 1, out)
			require.Equal(t, tc.fails, fails[0][1])
		})
	}
}

// The README's simulate line is the seeds' table TestSimulateReproducesSeedsTable checks.
func TestReadmeSimulateCommand(t *testing.T) {
	out, stderr, code := runReadme(t, t.TempDir(), readmeArgs(t, "rlverify simulate --at 0,0.1,0.2,0.3,0.4,0.5,0.6,0.8,1.0,1.2,2.0,2.1,2.5,3.0,3.1,3.2,3.3,3.4,3.5,3.6 --limiter token-bucket:capacity=5,rate=2 --limiter sliding-log:limit=5,window=1s")...)
	require.Equal(t, ExitPass, code, stderr)
	want, _, code := rl(t, "simulate", "--at", seedTimes, "--limiter", "token-bucket:capacity=5,rate=2", "--limiter", "sliding-log:limit=5,window=1s")
	require.Equal(t, ExitPass, code)
	require.Equal(t, want, out)
}

// Regions with reconciliation pass; the comparison puts the three settings
// side by side.
func TestReadmeRegionsCommands(t *testing.T) {
	t.Run("attack", func(t *testing.T) {
		dir := t.TempDir()
		out, stderr, code := runReadme(t, dir, readmeArgs(t, "rlverify attack --plan regions --region-sync 500ms --region-latency 50ms")...)
		require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		requireVerdict(t, "PASS", out, stderr)
		require.Regexp(t, `(?m)^\s*regions\s+PASS`, out)
	})
	t.Run("compare", func(t *testing.T) {
		dir := t.TempDir()
		out, stderr, code := runReadme(t, dir, readmeArgs(t, "rlverify compare --plan regions --region-setting strict//50ms --region-setting replicated/100ms/50ms --region-setting replicated/500ms/50ms")...)
		require.Contains(t, []int{ExitPass, ExitFail}, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		require.Regexp(t, `(?m)^\s+strict//50ms\s+replicated/100ms/50ms\s+replicated/500ms/50ms$`, out)
		require.Regexp(t, `(?m)^regions\s+\S+\s+\S+\s+\S+$`, out)
		require.Regexp(t, `(?m)^overrun\s+`, out)
	})
}

// startReadme starts the built binary in the background (a README line
// ending in "&") and waits until it says it is listening.
func startReadme(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(rlverifyBinary(t), args...)
	cmd.Dir = dir
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	w.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		r.Close()
	})
	ready := make(chan string, 1)
	go func() {
		var seen bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "listening on") || err != nil {
				ready <- seen.String()
				return
			}
		}
	}()
	select {
	case s := <-ready:
		require.Contains(t, s, "listening on", "rlverify %s", strings.Join(args, " "))
	case <-time.After(30 * time.Second):
		t.Fatalf("rlverify %s: not listening after 30s", strings.Join(args, " "))
	}
}

// The sink the README starts in the background, two instances of a service
// that share one Redis and forward what they admit to it (`rlverify serve`,
// standing for the reader's service), and the two-target attack that reads
// the sink: the downstream check judges what reached it.
func TestReadmeSinkCommands(t *testing.T) {
	needEnv(t, "local")
	rs, err := redisproc.Start()
	require.NoError(t, err)
	t.Cleanup(func() { rs.Stop() })
	dir := t.TempDir()
	sink, a, b := freeAddr(t), freeAddr(t), freeAddr(t)
	startReadme(t, dir, readmeArgs(t, "rlverify sink --addr 127.0.0.1:9090 &", "127.0.0.1:9090", sink)...)
	for _, addr := range []string{a, b} {
		startReadme(t, dir, "serve", "--addr", addr, "--store", "redis", "--redis", "redis://"+rs.Addr, "--downstream", "http://"+sink)
	}
	copyInto(t, dir, "policy/default.yaml", "my-policy.yaml")
	args := readmeArgs(t, "rlverify attack --plan concurrent-burst --target http://127.0.0.1:8080 --target http://127.0.0.1:8081 --policy my-policy.yaml --sink http://127.0.0.1:9090",
		"127.0.0.1:8080", a, "127.0.0.1:8081", b, "127.0.0.1:9090", sink)
	out, stderr, code := runReadme(t, dir, args...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	requireVerdict(t, "PASS", out, stderr)
	require.Regexp(t, `(?m)^\s*downstream\s+PASS`, out)
}

// The short attack lines whose comments promise an outcome.
func TestReadmeAttackCommands(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		redis bool // needs redis-server
		code  int
		want  string // a line of the report, as a regexp
	}{
		{"rlverify attack --plan concurrent-burst --store redis --instances 3", true, ExitPass,
			`(?m)^instances\s+PASS\s+1 key spread over instances stayed within one quota`},
		// "shows the ~2× edge effect": the policy's fixed window admits
		// more than its limit of 10 across the edge, and that is no oversell.
		{"rlverify attack --plan boundary-burst --limiter fixed-window", false, ExitPass,
			`(?m)^oversell\s+PASS\s+(1[1-9]|20) requests admitted`},
		{"rlverify attack --plan clock-skew --limiter faulty/instance-clock", true, ExitFail,
			`(?m)^oversell\s+FAIL\s+\d+ proven interval`},
		// The forward step's overrun is named after the step; the
		// backward step's stall is the same defect (token-bounds too when
		// timing shows it the impossible counts).
		{"rlverify attack --plan clock-step --limiter faulty/wall-clock", false, ExitFail,
			`(?m)^FAIL: 1 defect: oversell: .* — after instance 0's clock stepped forward by 3s .*\(explains under-admission, (token-bounds, )?retry-after`},
		{"rlverify attack --plan limit-change --limiter faulty/reload-resets", false, ExitFail,
			`(?m)^FAIL: 1 defect: oversell: .* — across the limit change halve made at`},
		{"rlverify attack --plan regions --region-mode independent", false, ExitFail,
			`(?m)^regions\s+FAIL\s+\d+ keys? overran the declared tolerance`},
	} {
		t.Run(strings.Join(strings.Fields(tc.cmd)[3:], " "), func(t *testing.T) {
			if tc.redis {
				needEnv(t, "local")
			}
			out, stderr, code := runReadme(t, t.TempDir(), readmeArgs(t, tc.cmd)...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
			require.Regexp(t, tc.want, out)
		})
	}
}
