package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
)

// TestPlansDocListsEveryBuiltinPlan keeps docs/plans.md's table of
// built-in plans equal to attacks/plans/: every plan, with its needs.
func TestPlansDocListsEveryBuiltinPlan(t *testing.T) {
	b, err := os.ReadFile("../../docs/plans.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "## Built-in plans")
	require.GreaterOrEqual(t, start, 0, "docs/plans.md has a Built-in plans section")
	section := doc[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		require.NotContains(t, documented, m[1], "%s is listed twice", m[1])
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	want := map[string]string{}
	for _, p := range attacks.Builtins() {
		needs := "–"
		if len(p.Needs) > 0 {
			needs = strings.Join(p.Needs, ", ")
		}
		want[p.Name] = needs
	}
	require.Equal(t, names(want), names(documented), "the plans in docs/plans.md's table")
	require.Equal(t, want, documented, "the needs column of docs/plans.md's table")
}

// TestEnvironmentsTableIsOneTable: a table row after a paragraph renders
// as text (the external row did).
func TestEnvironmentsTableIsOneTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/environments.md")
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	var envs []string
	tableDone := false // the environments are the first table's rows
	for i, l := range lines {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		require.True(t, strings.HasPrefix(lines[i-1], "|"), "docs/environments.md:%d: a table row after a non-table line renders as text", i+1)
		if first := len(envs) == 0 || strings.HasPrefix(lines[i-1], "| `"); first && !tableDone {
			envs = append(envs, strings.Trim(strings.Fields(l)[1], "`"))
		} else {
			tableDone = true
		}
	}
	require.Equal(t, []string{"embedded", "local", "docker", "external"}, envs)
}

func names(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
