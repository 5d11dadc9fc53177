package headers

import (
	"encoding/base32"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/require"
)

// SFTestsEnv names the directory of a checkout of
// github.com/httpwg/structured-field-tests (never committed here).
const SFTestsEnv = "RLVERIFY_SF_TESTS"

type sfCase struct {
	Name       string   `json:"name"`
	Raw        []string `json:"raw"`
	HeaderType string   `json:"header_type"`
	Expected   any      `json:"expected"`
	MustFail   bool     `json:"must_fail"`
	CanFail    bool     `json:"can_fail"`
	Canonical  []string `json:"canonical"`
}

// TestStructuredFieldSuite runs the parser this package stands on
// (httpsfv) against the official Structured Field test suite: every parse
// test must parse (or fail) as the suite says and serialise to its
// canonical form, and every serialisation test must serialise (or fail) as
// it says. It skips unless RLVERIFY_SF_TESTS points at the suite.
func TestStructuredFieldSuite(t *testing.T) {
	dir := os.Getenv(SFTestsEnv)
	if dir == "" {
		t.Skipf("set %s to a checkout of github.com/httpwg/structured-field-tests to run it", SFTestsEnv)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	ser, err := filepath.Glob(filepath.Join(dir, "serialisation-tests", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test files in %s", dir)
	total := 0
	for _, file := range append(files, ser...) {
		serialisation := strings.Contains(file, "serialisation-tests")
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		var cases []sfCase
		require.NoError(t, dec.Decode(&cases), file)
		for _, c := range cases {
			total++
			t.Run(filepath.Base(file)+"/"+c.Name, func(t *testing.T) {
				if serialisation {
					runSerialisation(t, c)
				} else {
					runParse(t, c)
				}
			})
		}
	}
	t.Logf("%d cases from %d files", total, len(files)+len(ser))
}

func runParse(t *testing.T, c sfCase) {
	v, err := sfUnmarshal(c.HeaderType, c.Raw)
	if c.MustFail {
		require.Error(t, err, "must fail, parsed as %#v", v)
		return
	}
	if err != nil {
		if c.CanFail {
			return
		}
		require.NoError(t, err)
	}
	require.Equal(t, normExpected(c.Expected), toJSONForm(v), "parsed")
	want := strings.Join(c.Raw, ", ")
	if c.Canonical != nil {
		want = strings.Join(c.Canonical, ", ")
	}
	got, err := httpsfv.Marshal(v)
	if want == "" {
		// An empty List or Dictionary is an omitted field.
		return
	}
	require.NoError(t, err)
	require.Equal(t, want, got, "serialised")
}

func runSerialisation(t *testing.T, c sfCase) {
	var got string
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		v, err := fromExpected(c.HeaderType, c.Expected)
		if err != nil {
			return err
		}
		got, err = httpsfv.Marshal(v)
		return err
	}()
	if c.MustFail {
		require.Error(t, err, "must fail, serialised as %q", got)
		return
	}
	require.NoError(t, err)
	require.Equal(t, strings.Join(c.Canonical, ", "), got)
}

func sfUnmarshal(typ string, raw []string) (httpsfv.StructuredFieldValue, error) {
	switch typ {
	case "item":
		return httpsfv.UnmarshalItem(raw)
	case "list":
		return httpsfv.UnmarshalList(raw)
	case "dictionary":
		return httpsfv.UnmarshalDictionary(raw)
	}
	return nil, fmt.Errorf("unknown header_type %q", typ)
}

// toJSONForm writes a parsed value in the suite's JSON form, with Integers
// as int64 and Decimals as float64.
func toJSONForm(v any) any {
	switch x := v.(type) {
	case httpsfv.Item:
		return []any{bareJSON(x.Value), paramsJSON(x.Params)}
	case httpsfv.InnerList:
		items := []any{}
		for _, it := range x.Items {
			items = append(items, toJSONForm(it))
		}
		return []any{items, paramsJSON(x.Params)}
	case httpsfv.List:
		out := []any{}
		for _, m := range x {
			out = append(out, toJSONForm(m))
		}
		return out
	case *httpsfv.Dictionary:
		out := []any{}
		for _, k := range x.Names() {
			m, _ := x.Get(k)
			out = append(out, []any{k, toJSONForm(m)})
		}
		return out
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func paramsJSON(p *httpsfv.Params) any {
	out := []any{}
	if p == nil {
		return out
	}
	for _, k := range p.Names() {
		v, _ := p.Get(k)
		out = append(out, []any{k, bareJSON(v)})
	}
	return out
}

func typed(typ string, v any) any { return map[string]any{"__type": typ, "value": v} }

func bareJSON(v any) any {
	switch x := v.(type) {
	case httpsfv.Token:
		return typed("token", string(x))
	case []byte:
		return typed("binary", base32.StdEncoding.EncodeToString(x))
	case time.Time:
		return typed("date", x.Unix())
	case httpsfv.DisplayString:
		return typed("displaystring", string(x))
	}
	return v
}

// normExpected turns the suite's JSON numbers into int64 or float64 and
// its base32 into the standard padded form.
func normExpected(v any) any {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(x.String(), ".eE") {
			f, _ := x.Float64()
			return f
		}
		n, _ := x.Int64()
		return n
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normExpected(x[i])
		}
		return out
	case map[string]any:
		typ, _ := x["__type"].(string)
		val := normExpected(x["value"])
		if typ == "binary" {
			b, _ := base32.StdEncoding.DecodeString(val.(string))
			val = base32.StdEncoding.EncodeToString(b)
		}
		return typed(typ, val)
	}
	return v
}

// fromExpected builds an httpsfv value from the suite's JSON form.
func fromExpected(typ string, e any) (httpsfv.StructuredFieldValue, error) {
	e = normExpected(e)
	switch typ {
	case "item":
		return itemFrom(e)
	case "list":
		l := httpsfv.List{}
		for _, m := range e.([]any) {
			mm, err := memberFrom(m)
			if err != nil {
				return nil, err
			}
			l = append(l, mm)
		}
		return l, nil
	case "dictionary":
		d := httpsfv.NewDictionary()
		for _, kv := range e.([]any) {
			pair := kv.([]any)
			m, err := memberFrom(pair[1])
			if err != nil {
				return nil, err
			}
			d.Add(pair[0].(string), m)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unknown header_type %q", typ)
}

func memberFrom(e any) (httpsfv.Member, error) {
	pair := e.([]any)
	if inner, ok := pair[0].([]any); ok {
		il := httpsfv.InnerList{Params: httpsfv.NewParams()}
		for _, it := range inner {
			i, err := itemFrom(it)
			if err != nil {
				return nil, err
			}
			il.Items = append(il.Items, i)
		}
		addParams(il.Params, pair[1])
		return il, nil
	}
	return itemFrom(e)
}

func itemFrom(e any) (httpsfv.Item, error) {
	pair := e.([]any)
	it := httpsfv.NewItem(bareFrom(pair[0]))
	addParams(it.Params, pair[1])
	return it, nil
}

func addParams(p *httpsfv.Params, e any) {
	for _, kv := range e.([]any) {
		pair := kv.([]any)
		p.Add(pair[0].(string), bareFrom(pair[1]))
	}
}

func bareFrom(e any) any {
	m, ok := e.(map[string]any)
	if !ok {
		return e
	}
	switch m["__type"] {
	case "token":
		return httpsfv.Token(m["value"].(string))
	case "binary":
		b, _ := base32.StdEncoding.DecodeString(m["value"].(string))
		return b
	case "date":
		return time.Unix(m["value"].(int64), 0)
	case "displaystring":
		return httpsfv.DisplayString(m["value"].(string))
	}
	panic(fmt.Sprintf("unknown __type %v", m["__type"]))
}
