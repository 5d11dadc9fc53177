package mutation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `package p

func f(a, b int, ok bool) int {
	x := a + b
	if a < b && ok {
		x = 2
	}
	if !ok {
		x++
	}
	g(x)
	return x
}

func g(int) {}
`

func TestGenerateAndApply(t *testing.T) {
	ms, err := Generate("p.go", []byte(sample))
	require.NoError(t, err)
	got := map[string]string{}
	for _, m := range ms {
		out, err := m.Apply([]byte(sample))
		require.NoError(t, err, m.ID())
		assert.NotEqual(t, sample, string(out), m.ID())
		got[m.ID()] = m.Change()
		assert.Equal(t, "f", m.Func, m.ID())
	}
	assert.Equal(t, map[string]string{
		"p.go:4:9:arith":   "`+` → `-`",
		"p.go:5:2:drop":    "drop `if a < b && ok { x = 2 }`",
		"p.go:5:5:negate":  "`a < b && ok` → `!(a < b && ok)`",
		"p.go:5:7:compare": "`<` → `<=`",
		"p.go:5:11:logic":  "`&&` → `||`",
		"p.go:6:3:drop":    "drop `x = 2`",
		"p.go:6:7:const":   "`2` → `3`",
		"p.go:8:2:drop":    "drop `if !ok { x++ }`",
		"p.go:8:5:negate":  "`!ok` → `ok`",
		"p.go:9:3:drop":    "drop `x++`",
		"p.go:11:2:drop":   "drop `g(x)`",
	}, got)
	for i := 1; i < len(ms); i++ {
		assert.Less(t, ms[i-1].Offset, ms[i].Offset, "mutants in the file's order")
	}
}

// A dropped statement keeps its lines, so a panic in a mutant points at
// the original line numbers.
func TestDropKeepsLineNumbers(t *testing.T) {
	ms, err := Generate("p.go", []byte(sample))
	require.NoError(t, err)
	for _, m := range ms {
		if m.ID() != "p.go:8:2:drop" {
			continue
		}
		out, err := m.Apply([]byte(sample))
		require.NoError(t, err)
		// Lines 8–10 (the if) are empty; g(x) is still line 11.
		assert.Equal(t, "package p\n\nfunc f(a, b int, ok bool) int {\n\tx := a + b\n\tif a < b && ok {\n\t\tx = 2\n\t}\n\t\n\n\n\tg(x)\n\treturn x\n}\n\nfunc g(int) {}\n", string(out))
		return
	}
	t.Fatal("no drop of the second if")
}

func TestApplyRefusesAnotherFile(t *testing.T) {
	ms, err := Generate("p.go", []byte(sample))
	require.NoError(t, err)
	_, err = ms[0].Apply([]byte("package p\n"))
	require.ErrorContains(t, err, "p.go:4:9:arith")
	_, err = Generate("bad.go", []byte("package"))
	require.ErrorContains(t, err, "bad.go")
}

func TestFirstFailure(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"=== RUN TestA\n--- FAIL: TestA (0.00s)\n    a_test.go:3: no\nFAIL\n", "TestA"},
		{"panic: test timed out after 1m0s\n", "timeout"},
		{"panic: runtime error: index out of range\n", "panic"},
		{"FAIL\tgithub.com/x/y [build failed]\n", "build"},
		{"exit status 1\n", "failed"},
	} {
		assert.Equal(t, tc.want, firstFailure(tc.out), tc.out)
	}
}
