package headers

import (
	"errors"
	"fmt"
	"time"

	"github.com/dunglas/httpsfv"
)

// Helpers over httpsfv's parsed values, shared by the generations.

// maxSFInt is the largest Integer a Structured Field holds (RFC 9651 §3.3.1).
const maxSFInt = 999_999_999_999_999

// paramMeaning names the parameters and keys in messages.
var paramMeaning = map[string]string{
	"r": "remaining", "t": "reset", "q": "quota", "w": "window",
	"limit": "limit", "remaining": "remaining", "reset": "reset",
}

// parseList parses a non-empty List: a field without members says nothing.
func parseList(v string) (httpsfv.List, error) {
	list, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, errors.New("empty field")
	}
	return list, nil
}

// parseItem returns m as an Item; an Inner List is not one.
func parseItem(m httpsfv.Member) (httpsfv.Item, error) {
	it, ok := m.(httpsfv.Item)
	if !ok {
		return httpsfv.Item{}, errors.New("an inner list is not allowed here")
	}
	return it, nil
}

// intParam reads the non-negative Integer parameter key: -1 when it is
// absent and optional, an error when it is absent and required.
func intParam(p *httpsfv.Params, key string, optional bool) (int64, error) {
	v, ok := p.Get(key)
	if !ok {
		if optional {
			return -1, nil
		}
		return 0, fmt.Errorf("no %s (%s) parameter", key, paramMeaning[key])
	}
	return nonNegInt(key, v)
}

// nonNegInt reads v as an Integer ≥ 0; what names it in messages.
func nonNegInt(what string, v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%s must be an Integer, not %s", what, typeName(v))
	}
	if n < 0 {
		return 0, fmt.Errorf("%s must not be negative (%d)", what, n)
	}
	return n, nil
}

// bytesParam reads the optional Byte Sequence parameter key.
func bytesParam(p *httpsfv.Params, key string) ([]byte, error) {
	v, ok := p.Get(key)
	if !ok {
		return nil, nil
	}
	b, isBytes := v.([]byte)
	if !isBytes {
		return nil, fmt.Errorf("%s must be a Byte Sequence, not %s", key, typeName(v))
	}
	return b, nil
}

// typeName names the Structured Field type of a bare item for messages.
func typeName(v any) string {
	switch v.(type) {
	case int64:
		return "an Integer"
	case float64:
		return "a Decimal"
	case string:
		return "a String"
	case httpsfv.Token:
		return "a Token"
	case []byte:
		return "a Byte Sequence"
	case bool:
		return "a Boolean"
	case time.Time:
		return "a Date"
	case httpsfv.DisplayString:
		return "a Display String"
	case httpsfv.InnerList:
		return "an Inner List"
	}
	return "nothing"
}

// sfInt clamps n into the Integers a Structured Field holds that a
// counter may take: [0, 10^15−1].
func sfInt(n int64) int64 { return min(max(n, 0), maxSFInt) }

// marshal serialises a Structured Field value of the named field.
func marshal(field string, v httpsfv.StructuredFieldValue) (string, error) {
	s, err := httpsfv.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("headers: writing %s: %w", field, err)
	}
	return s, nil
}
