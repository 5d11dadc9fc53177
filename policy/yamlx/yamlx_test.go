package yamlx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// selfDecoding decodes itself (like policy.Duration): its numbers are its
// own business.
type selfDecoding int64

func (s *selfDecoding) UnmarshalYAML(n *yaml.Node) error {
	var f float64
	if err := n.Decode(&f); err != nil {
		return err
	}
	*s = selfDecoding(f * 10)
	return nil
}

type inner struct {
	Count int     `yaml:"count"`
	Ratio float64 `yaml:"ratio"`
}

type common struct {
	Seed uint32 `yaml:"seed"`
}

type doc struct {
	Name     string           `yaml:"name"`
	Requests int              `yaml:"requests"`
	Limit    *int64           `yaml:"limit"`
	Items    []inner          `yaml:"items"`
	ByName   map[string]inner `yaml:"by_name"`
	Weight   float64          `yaml:"weight"`
	Own      selfDecoding     `yaml:"own"`
	Plain    int
	common   `yaml:",inline"`
	Skipped  int `yaml:"-"`
}

func TestDecodeRefusesNonWholeNumbers(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // "" for no error
	}{
		{"whole numbers", "requests: 12\nlimit: 7\nitems: [{count: 3}]\n", ""},
		{"whole numbers written as floats", "requests: 12.0\nlimit: 1e3\n", ""},
		{"fractions where floats belong", "weight: 0.5\nitems: [{ratio: 0.25}]\n", ""},
		{"a type that decodes itself", "own: 1.5\n", ""},
		{"a quoted number is not a number", "name: '12.9'\n", ""},
		{"top-level int", "name: x\nrequests: 12.9\n", "f.yaml:2: requests: 12.9 is not a whole number"},
		{"through a pointer", "limit: 10.7\n", "f.yaml:1: limit: 10.7 is not a whole number"},
		{"in a list", "items:\n  - count: 1\n  - count: 2.5\n", "f.yaml:3: items.1.count: 2.5 is not a whole number"},
		{"in a map", "by_name:\n  a:\n    count: 0.1\n", "f.yaml:3: by_name.a.count: 0.1 is not a whole number"},
		{"field without a tag", "plain: 3.3\n", "f.yaml:1: plain: 3.3 is not a whole number"},
		{"inlined struct", "seed: 4.5\n", "f.yaml:1: seed: 4.5 is not a whole number"},
		{"negative", "requests: -1.5\n", "f.yaml:1: requests: -1.5 is not a whole number"},
		{"through an alias", "x: &n 2.5\nrequests: *n\n", ""}, // x is unknown: KnownFields refuses first
		{"through a merge key", "items:\n  - &base {count: 1.5}\n  - <<: *base\n", "f.yaml:2: items.0.count: 1.5 is not a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			_, err := Decode("f.yaml", []byte(tc.yaml), &d)
			switch {
			case tc.name == "through an alias":
				require.ErrorContains(t, err, `unknown field "x"`)
			case tc.want == "":
				require.NoError(t, err)
			default:
				require.EqualError(t, err, tc.want)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	require.NoError(t, os.WriteFile(small, []byte("name: x\n"), 0o644))
	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("#", MaxBytes+1)), 0o644))
	data, err := ReadFile(small)
	require.NoError(t, err)
	require.Equal(t, "name: x\n", string(data))
	_, err = ReadFile(big)
	require.EqualError(t, err, big+": document is 1048577 bytes, more than the 1048576 allowed")
	_, err = ReadFile("/dev/zero")
	require.EqualError(t, err, "/dev/zero: document holds more than the 1048576 bytes allowed (not a regular file: read up to the limit)")
	_, err = ReadFile(filepath.Join(dir, "nope.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A mistyped field is named as written in the YAML with the field meant,
// never by a Go type name, and every problem of the document is reported,
// each with its line.
func TestUnknownFieldsAreNamedWithASuggestionAndAllReported(t *testing.T) {
	var d doc
	_, err := Decode("policy.yaml", []byte("name: x\nitems:\n  - cout: 3\n    ratio: 1.5\n  - count: 2\n    zzzzzz: 1\nrequests: many\n"), &d)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Equal(t, []string{
		`policy.yaml:3: unknown field "cout" (did you mean "count"?)`,
		`policy.yaml:6: unknown field "zzzzzz" (known fields: count, ratio)`,
		`policy.yaml:7: cannot unmarshal a string ` + "`many`" + ` into int`,
	}, lines)
	require.NotContains(t, err.Error(), "yamlx.inner")
	var ye *Error
	require.ErrorAs(t, err, &ye)
	require.Equal(t, 3, ye.Line)
}
