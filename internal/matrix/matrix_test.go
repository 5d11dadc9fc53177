package matrix

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/limiters/catalog"
)

// root is the repository root (this file is internal/matrix/matrix_test.go).
func root(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// The published documents carry exactly what the committed data renders
// to, and every surprising cell in it is explained.
func TestDocumentsCarryTheCommittedMatrix(t *testing.T) {
	d, err := Load(filepath.Join(root(t), "docs", "compare", "matrix.json"))
	require.NoError(t, err)
	assert.Empty(t, d.Unexplained(), "add an explanation to internal/matrix/explain.go")
	for doc, notesIn := range map[string]string{"README.md": "docs/compare.md", "docs/compare.md": ""} {
		b, err := os.ReadFile(filepath.Join(root(t), doc))
		require.NoError(t, err)
		got, err := Section(string(b))
		require.NoError(t, err, doc)
		assert.Equal(t, Render(d, notesIn), got, "%s: run bash scripts/compare-matrix.sh --render", doc)
	}
	require.Len(t, d.Tables, len(Plans))
	for i, tb := range d.Tables {
		assert.Equal(t, Plans[i].Name, tb.Plan)
		require.Len(t, tb.Columns, len(Implementations))
		for j, c := range tb.Columns {
			assert.Equal(t, Implementations[j], c.Name)
		}
	}
}

func TestPlansAndImplementationsExist(t *testing.T) {
	for _, p := range Plans {
		_, err := attacks.Load(p.Name)
		assert.NoError(t, err, p.Name)
	}
	for _, name := range Implementations {
		_, err := catalog.Lookup(name, "")
		assert.NoError(t, err, name)
	}
}

func TestMergeMarksCellsThatChanged(t *testing.T) {
	a := Table{Plan: "p", Columns: []Column{{Name: "x", Checks: map[string]string{"oversell": "pass", "headers": "fail"}}}}
	a.Merge(Table{Plan: "p", Columns: []Column{{Name: "x", Checks: map[string]string{"oversell": "unknown", "headers": "fail"}}}})
	a.Merge(Table{Plan: "p", Columns: []Column{{Name: "x", Checks: map[string]string{"oversell": "fail", "headers": "fail"}}}})
	assert.Equal(t, map[string]string{"oversell": "pass/unknown/fail"}, a.Columns[0].Unstable)
	d := &Data{Tables: []Table{a}}
	assert.Equal(t, map[[3]string]string{{"p", "x", "headers"}: "fail"}, d.Stable())
	assert.Contains(t, Render(d, ""), "| oversell | PASS ~ |")
}

func TestSplice(t *testing.T) {
	doc := "intro\n" + Begin + "\nold\n" + End + "\nrest\n"
	got, err := Splice(doc, "new\n")
	require.NoError(t, err)
	assert.Equal(t, "intro\n"+Begin+"\nnew\n"+End+"\nrest\n", got)
	sec, err := Section(got)
	require.NoError(t, err)
	assert.Equal(t, "new\n", sec)
	_, err = Splice("no markers", "x")
	require.ErrorContains(t, err, "has no")
}

func TestExplainFallsBackToTheFamily(t *testing.T) {
	assert.Contains(t, Explain("nginx/limit-req-delay", "bypass", "retry-after").Why, "limit_req_status")
	assert.Contains(t, Explain("gubernator/global", "multi-instance", "oversell").Why, "GLOBAL")
	assert.Contains(t, Explain("gubernator/local", "tenant-isolation", "token-bounds").Why, "K + 0.999")
	assert.Empty(t, Explain("token-bucket", "concurrent-burst", "oversell").Why)
}

func TestTimingDependentCellsAreUnstable(t *testing.T) {
	d := &Data{Tables: []Table{{Plan: "p", Columns: []Column{
		{Name: "gubernator/global", Checks: map[string]string{"oversell": "pass", "headers": "pass", "instances": "skip"}},
		{Name: "token-bucket", Checks: map[string]string{"oversell": "pass"}},
	}}}}
	d.MarkTimingDependent()
	assert.Equal(t, map[string]string{"oversell": "pass (timing-dependent)"}, d.Tables[0].Columns[0].Unstable)
	assert.Nil(t, d.Tables[0].Columns[1].Unstable)
	assert.Equal(t, map[[3]string]string{{"p", "gubernator/global", "headers"}: "pass", {"p", "gubernator/global", "instances"}: "skip", {"p", "token-bucket", "oversell"}: "pass"}, d.Stable())
}

func TestDifferencesLeaveUnstableCellsAlone(t *testing.T) {
	committed := Table{Plan: "p", Columns: []Column{{Name: "x",
		Checks:   map[string]string{"oversell": "pass", "headers": "fail", "instances": "pass"},
		Unstable: map[string]string{"instances": "pass/fail"}}}}
	got := Table{Plan: "p", Columns: []Column{{Name: "x", Checks: map[string]string{"oversell": "fail", "headers": "fail", "instances": "fail"}}}}
	assert.Equal(t, []string{"p / x / oversell: pass → fail"}, committed.Differences(got))
	assert.Empty(t, committed.Differences(committed))
}
