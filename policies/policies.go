// Package policies ships the example policies as files users can read and
// copy (policies/*.yaml) and embeds them so `--policy NAME` and a plan's
// `policy:` field can name them without a path.
//
// It holds data only and imports nothing from rlverify.
package policies

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Get returns the YAML of the shipped policy name (file name without .yaml).
func Get(name string) ([]byte, bool) {
	b, err := files.ReadFile(name + ".yaml")
	return b, err == nil
}

// Names lists the shipped policies.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}
