package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

var update = flag.Bool("update", false, "rewrite docs/mutation.md from this run (with RLVERIFY_MUTATION=1)")

// The library under study and what of it is mutated: the files the
// shell's requests run through (the GCRA, the HTTP middleware, the key
// builder, the in-memory store). The library's own tests are those of the
// same packages.
const library = "github.com/throttled/throttled/v2"

var (
	libraryFiles = []string{"rate.go", "http.go", "varyby.go", "store/memstore/memstore.go"}
	libraryTests = []string{library, library + "/store/memstore"}
)

// mutant is one listed mutant: its ID (Mutant.ID) and, for a mutant the
// audit cannot tell from the library, why — an equivalent mutant (no
// answer over HTTP changes) or a change no request of this shell can
// reach. A mutant without a reason must be killed by the audit.
type mutant struct{ id, reason string }

// studied is the fixed set of mutants, chosen from the ~215 the operators
// make of these files: each operator, each file, each function the shell
// runs through, and on purpose some that cannot be told over HTTP.
var studied = []mutant{
	// rate.go: the GCRA.
	{"rate.go:118:63:arith", "equivalent here: the shell calls PerDuration(1, per), and per/1 = per·1"},
	{"rate.go:159:82:arith", ""},
	{"rate.go:159:84:const", ""},
	{"rate.go:161:45:const", ""},
	{"rate.go:186:54:const", "equivalent: any negative RetryAfter means \"no Retry-After header\" (setRateLimitHeaders writes it only when ≥ 0)"},
	{"rate.go:202:13:compare", ""},
	{"rate.go:215:40:arith", ""},
	{"rate.go:216:6:negate", ""},
	{"rate.go:224:37:compare", "not reachable through HTTP: differs only for a request decided at the very nanosecond its token falls due"},
	{"rate.go:225:17:compare", "not reachable through HTTP: differs only when one request asks for all K tokens; the middleware always asks for 1"},
	{"rate.go:226:5:drop", ""},
	{"rate.go:227:5:drop", ""},
	{"rate.go:230:5:drop", ""},
	{"rate.go:243:3:drop", ""},
	{"rate.go:248:4:drop", ""},
	{"rate.go:258:3:drop", "not reachable at the audit's loads: lifts the bound of 10 failed compare-and-swaps in a row on one key, which the in-memory store's contention never reaches"},
	{"rate.go:267:36:arith", ""},
	{"rate.go:268:10:compare", "equivalent: next ≥ 0 always (a stored TAT is never more than the tolerance ahead of now), so > −interval and ≥ −interval agree"},
	// http.go: the middleware and its headers.
	{"http.go:59:15:compare", ""},
	{"http.go:63:71:const", ""},
	{"http.go:72:6:negate", ""},
	{"http.go:79:4:drop", ""},
	{"http.go:86:7:compare", "not reachable through HTTP: the error path runs only when the store fails, and the in-memory store never does"},
	{"http.go:93:27:compare", "equivalent: the limit is MaxBurst+1 ≥ 1, so ≥ 0 and > 0 agree"},
	{"http.go:97:31:compare", ""},
	{"http.go:101:2:drop", ""},
	{"http.go:106:32:compare", "equivalent: RetryAfter is set only to −diff with diff < 0, so it is > 0 whenever it is ≥ 0"},
	{"http.go:106:2:drop", ""},
	// varyby.go: the key.
	{"varyby.go:44:8:compare", ""},
	{"varyby.go:52:9:compare", "equivalent here: the key has one field (X-Api-Key), so without a separator keys stay one-to-one with it"},
	{"varyby.go:55:19:logic", "not reachable from one client address: adds the client's address to every key, and every request of the study comes from 127.0.0.1"},
	{"varyby.go:87:3:drop", "not reachable through this shell: its VaryBy names no cookies"},
	// store/memstore: the in-memory store.
	{"store/memstore/memstore.go:60:2:drop", "not reachable through HTTP: SetTimeNow is a hook for the library's tests; the shell never calls it"},
	{"store/memstore/memstore.go:83:2:drop", "equivalent: the same check is made again under the lock"},
	{"store/memstore/memstore.go:87:2:drop", ""},
	{"store/memstore/memstore.go:92:2:drop", "not reachable through HTTP in practice: differs only when two requests of a brand-new key both pass the unlocked look-up before either takes the lock (a window of a few instructions); then both write one TAT and the key's first burst admits K+1. The audit's 100-request burst at fresh keys did not hit that window"},
	{"store/memstore/memstore.go:116:5:negate", ""},
	{"store/memstore/memstore.go:136:4:drop", "not reachable through this shell: the map without LRU is used only when maxKeys is 0, and the shell bounds it"},
}

// lab opens the library's lab for a test, skipping when the go command or
// the module is not at hand.
func lab(t *testing.T) *Lab {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the shell with mutants and audits it")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	l, err := NewLab(context.Background(), root, library)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// mutants returns the listed mutants of the lab's library, in list order.
func mutants(t *testing.T, l *Lab, list []mutant) []Mutant {
	t.Helper()
	all := map[string]Mutant{}
	for _, f := range libraryFiles {
		src, err := l.Source(f)
		require.NoError(t, err)
		ms, err := Generate(f, src)
		require.NoError(t, err)
		for _, m := range ms {
			all[m.ID()] = m
		}
	}
	out := make([]Mutant, len(list))
	for i, s := range list {
		m, ok := all[s.id]
		require.True(t, ok, "no mutant %s in %s@%s: the library changed; list the study's mutants again", s.id, l.Module, l.Version)
		out[i] = m
	}
	return out
}

func shellPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Load("policy.yaml")
	require.NoError(t, err)
	return p
}

// The cheap version CI runs: the unmutated library passes a short audit,
// two mutants the short audit reaches are killed by it, and a mutant no
// request can reach survives it while the library's own tests (with their
// fixed clock) kill it.
func TestMutationsInBrief(t *testing.T) {
	l := lab(t)
	s := &Study{Lab: l, Shell: "./internal/mutation/cmd/shell", Policy: shellPolicy(t),
		Plans: []string{"concurrent-burst", "bypass"}, TestTimeout: time.Minute, Log: t.Logf}
	ctx := context.Background()

	orig, err := s.Judge(ctx, nil)
	require.NoError(t, err)
	require.False(t, orig.KilledByAudit(), "the unmutated library: %s", orig.AuditSays())

	ms := mutants(t, l, []mutant{{id: "rate.go:159:84:const"}, {id: "http.go:106:2:drop"}, {id: "rate.go:224:37:compare"}})
	for i, want := range []string{"FAIL: oversell", "FAIL: retry-after"} {
		r, err := s.Judge(ctx, &ms[i])
		require.NoError(t, err)
		assert.Equal(t, want, r.AuditSays(), ms[i].ID())
	}
	s.Tests = libraryTests
	r, err := s.Judge(ctx, &ms[2])
	require.NoError(t, err)
	assert.Equal(t, "PASS", r.AuditSays(), "a decision at the nanosecond a token falls due is out of HTTP's reach")
	assert.True(t, r.KilledByTests(), "the library's tests decide at that nanosecond:\n%s", r.Tests.Output)
}

// TestMutationStudy is the whole study (RLVERIFY_MUTATION=1, about 40
// minutes): the unmutated library audited RLVERIFY_MUTATION_RUNS times
// (default 10) must never be killed; every listed mutant without a reason
// must be killed by the audit and every one with a reason must survive it
// (else its reason is wrong); docs/mutation.md must say the same (-update
// rewrites it).
func TestMutationStudy(t *testing.T) {
	if os.Getenv("RLVERIFY_MUTATION") == "" {
		t.Skip("the whole mutation study takes about 40 minutes: set RLVERIFY_MUTATION=1")
	}
	runs := 10
	if v := os.Getenv("RLVERIFY_MUTATION_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "RLVERIFY_MUTATION_RUNS")
		runs = n
	}
	l := lab(t)
	s := &Study{Lab: l, Shell: "./internal/mutation/cmd/shell", Policy: shellPolicy(t),
		Tests: libraryTests, TestTimeout: time.Minute, Log: t.Logf}
	ctx := context.Background()
	saved := loadResults(t, os.Getenv("RLVERIFY_MUTATION_RESULTS"))
	judge := func(key string, m *Mutant, tests bool) Result {
		if r, ok := saved[key]; ok {
			r.Mutant = m
			return r
		}
		s.Tests = nil
		if tests {
			s.Tests = libraryTests
		}
		r, err := s.Judge(ctx, m)
		require.NoError(t, err)
		saved[key] = r
		saveResults(t, os.Getenv("RLVERIFY_MUTATION_RESULTS"), saved)
		return r
	}

	list := studied
	if only := os.Getenv("RLVERIFY_MUTATION_ONLY"); only != "" {
		ids := strings.Split(only, ",")
		list = slices.DeleteFunc(slices.Clone(studied), func(m mutant) bool { return !slices.Contains(ids, m.id) })
	}
	ms := mutants(t, l, list)
	results := make([]Result, len(ms))
	for i := range ms {
		r := judge(ms[i].ID(), &ms[i], true)
		results[i] = r
		if !assert.False(t, r.Stillborn, "%s does not build: list another", ms[i].ID()) {
			continue
		}
		if list[i].reason == "" {
			assert.True(t, r.KilledByAudit(), "%s (%s) changes what the shell answers and survived the audit", ms[i].ID(), ms[i].Change())
		} else {
			assert.False(t, r.KilledByAudit(), "%s was listed as a survivor (%s) but the audit killed it: %s", ms[i].ID(), list[i].reason, r.AuditSays())
		}
	}
	// The library's tests pass once on the unmutated library; the
	// repeats are for the audit.
	var originals []Result
	for i := range runs {
		r := judge(fmt.Sprintf("original/%d", i+1), nil, i == 0)
		assert.False(t, r.KilledByAudit(), "false kill of the unmutated library in run %d: %s", i+1, r.AuditSays())
		originals = append(originals, r)
	}
	if len(list) < len(studied) {
		return // a part of the study: the page needs the whole
	}
	doc := render(l, originals, ms, results)
	path := filepath.Join("..", "..", "docs", "mutation.md")
	if *update {
		require.NoError(t, os.WriteFile(path, doc, 0o644))
		return
	}
	old, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to write it")
	assert.Equal(t, verdictCells(doc), verdictCells(old), "docs/mutation.md disagrees with this run: rerun with -update")
}

// verdictCells are each table row's first four cells (mutant, change, the
// audit's and the tests' kill), what a rerun must reproduce; the findings
// and timings may differ.
func verdictCells(doc []byte) []string {
	var out []string
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 5 {
			continue
		}
		tests, _, _ := strings.Cut(cells[4], " ")
		out = append(out, strings.Join(append(cells[:4:4], tests), " | "))
	}
	return out
}

// render writes docs/mutation.md.
func render(l *Lab, originals []Result, ms []Mutant, results []Result) []byte {
	var b bytes.Buffer
	killedAudit, killedTests, survivors, reach := 0, 0, 0, 0
	var auditTime, testTime time.Duration
	for i, r := range results {
		auditTime += r.AuditTime
		testTime += r.TestTime
		if r.KilledByAudit() {
			killedAudit++
		} else {
			survivors++
		}
		if r.KilledByTests() {
			killedTests++
		}
		if studied[i].reason == "" {
			reach++
		}
	}
	falseKills := 0
	var origTime time.Duration
	for _, r := range originals {
		origTime += r.AuditTime + r.TestTime
		if r.KilledByAudit() {
			falseKills++
		}
	}
	fmt.Fprintf(&b, mutationDocHead, l.Module, l.Version)
	fmt.Fprintf(&b, "\n## Results\n\n")
	fmt.Fprintf(&b, "- **%d mutants**; the audit killed **%d**, the library's own tests %d.\n", len(ms), killedAudit, killedTests)
	fmt.Fprintf(&b, "- Every one of the %d mutants that change what the shell answers over HTTP was killed by the audit; the %d survivors each have their reason below.\n", reach, survivors)
	fmt.Fprintf(&b, "- The unmutated library: **%d false kills in %d audits**.\n", falseKills, len(originals))
	fmt.Fprintf(&b, "- Time on a busy shared 2-core machine: %s of audits and tests in all (the shell's builds, about 3 s each, besides); an audit took %s on average, the library's tests %s (their build included).\n",
		(auditTime + testTime + origTime).Round(time.Minute), (auditTime / time.Duration(max(1, len(results)))).Round(time.Second), (testTime / time.Duration(max(1, len(results)))).Round(time.Second))
	fmt.Fprintf(&b, "\n| mutant | change | audit | library's tests | the audit's findings | why it survives the audit |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- |\n")
	pass := 0
	for _, r := range originals {
		if !r.KilledByAudit() {
			pass++
		}
	}
	tests := "—"
	if len(originals) > 0 && originals[0].TestsRn {
		tests = "pass"
		if originals[0].KilledByTests() {
			tests = "FAIL (" + originals[0].Tests.Failed + ")"
		}
	}
	fmt.Fprintf(&b, "| (none) | the library as released | PASS in %d of %d | %s | | |\n", pass, len(originals), tests)
	for i, r := range results {
		m := ms[i]
		audit := "survived"
		if r.KilledByAudit() {
			audit = "killed"
		}
		tests := "survived"
		if r.KilledByTests() {
			tests = "killed (" + r.Tests.Failed + ")"
		}
		loc := fmt.Sprintf("`%s` %s", m.ID(), m.Func)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", loc, cell(m.Change()), audit, tests, cell(r.AuditSays()), cell(studied[i].reason))
	}
	b.WriteString(mutationDocTail)
	return b.Bytes()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

const mutationDocHead = `# Mutation study

Does ` + "`rlverify audit`" + ` tell a rate limiter from a slightly broken copy of
it? This study makes small changes (mutants) to a widely used limiter
library nobody here wrote, serves each behind one small HTTP shell, audits
the shell against its honest declared policy, and puts the audit's kills
beside those of the library's own unit tests.

- **Library**: ` + "`%s`" + ` %s — its GCRA limiter, its HTTP middleware
  (` + "`HTTPRateLimiterCtx`" + `, which writes the 429 and the ` + "`X-RateLimit-*`" + ` and
  ` + "`Retry-After`" + ` headers), its key builder (` + "`VaryBy`" + `) and its in-memory store.
- **Shell**: ` + "`internal/mutation/cmd/shell`" + `, the library wired as its
  documentation shows, keyed by ` + "`X-Api-Key`" + `; it writes nothing of its own.
  Its policy is ` + "`internal/mutation/policy.yaml`" + `: a token bucket of 5 refilled
  at 2.5/s, case-insensitive keys, X-RateLimit-* with a relative reset.
- **Mutants**: made at test time from the module cache's source (nothing of
  the library is copied into this repository) by six operators — a
  comparison flipped (` + "`<`↔`<=`, `>`↔`>=`, `==`↔`!=`" + `), ` + "`&&`↔`||`" + `, ` + "`+`↔`-`" + ` and
  ` + "`*`↔`/`" + `, an integer constant plus one, a statement dropped, an if's
  condition negated — and built into the shell with ` + "`go build -modfile -overlay`" + `
  over a temporary copy of the module (the go command refuses overlays of the
  module cache). The set is fixed and listed in
  ` + "`internal/mutation/study_test.go`" + ` (` + "`studied`" + `): every function the shell's
  requests run through, every operator, and on purpose mutants that no
  request can tell apart.
- **Judged by**: the whole ` + "`rlverify audit`" + ` (every plan that applies to the
  policy; one instance, no faults) — a mutant is killed when the audit's
  verdict is anything but PASS or the shell stops answering; and the
  library's own tests (` + "`go test`" + ` of its root and ` + "`store/memstore`" + ` packages with
  the same overlay).
- **Survivors**: each has its reason — *equivalent* (no answer over HTTP
  changes) or *not reachable through HTTP* (no request of this shell runs
  the changed code in a way that differs).

Run it (about 40 minutes; ` + "`-update`" + ` rewrites this page):

    RLVERIFY_MUTATION=1 go test ./internal/mutation -run TestMutationStudy -timeout 2h -v -update

With ` + "`RLVERIFY_MUTATION_RESULTS=FILE`" + ` each result is kept in FILE as it is
judged: a rerun resumes from it, and a changed reason re-renders this page
without judging again (this page was made so, over three sittings: two
listed mutants that did not build were replaced). ` + "`RLVERIFY_MUTATION_ONLY=ID,…`" + `
judges only those mutants; ` + "`RLVERIFY_MUTATION_RUNS`" + ` sets how often the
unmutated library is audited (default 10).

CI runs ` + "`TestMutationsInBrief`" + `: the unmutated library and three mutants with a
short audit (` + "`concurrent-burst`, `bypass`" + `).
`

const mutationDocTail = `
## What it shows

- Over HTTP the audit tells every mutant that changes an answer from the
  library. The library's own tests kill more, because they reach what no
  request can: they drive the GCRA with a fixed clock (a decision at the
  very nanosecond a token falls due), with a quantity of K, with a store
  that fails (the middleware's error path) or never lets a
  compare-and-swap through, with several VaryBy fields and cookies, and
  with the store's map without LRU, and they read ` + "`RetryAfter == -1`" + `
  where HTTP sees only a missing header.
- Besides the equivalent ones, two mutants survive both while a request
  could in principle reach them: the client's address added to the key
  (` + "`varyby.go:55:19`" + `: a second client address would show it, and every
  request here comes from 127.0.0.1), and the dropped second look-up of
  the store's first write (` + "`memstore.go:92:2`" + `: a race a few instructions
  wide at a key's first request).
- A bucket shared by every key (` + "`http.go:59:15`" + `, ` + "`varyby.go:44:8`" + `) is killed, but
  the audit names under-admission, retry-after and calibration, not
  isolation, as what failed: the attribution of colliding keys that issue
  27 asks to make stable.

## Reading the table

- *audit* is killed when the audit's verdict was FAIL or UNKNOWN (its
  findings say which properties), or the shell broke under it.
- *library's tests* names the first failing test of the library's own
  suite.
- A mutant with a reason must survive the audit, and one without must be
  killed: ` + "`TestMutationStudy`" + ` fails otherwise, so a reason that stops being
  true is noticed.
`

// loadResults reads the results a previous run saved (RLVERIFY_MUTATION_RESULTS),
// so an interrupted study resumes and a changed reason re-renders the page
// without judging again; none when path is empty or the file is absent.
func loadResults(t *testing.T, path string) map[string]Result {
	t.Helper()
	out := map[string]Result{}
	if path == "" {
		return out
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), path)
	return out
}

func saveResults(t *testing.T, path string, res map[string]Result) {
	t.Helper()
	if path == "" {
		return
	}
	b, err := json.MarshalIndent(res, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
