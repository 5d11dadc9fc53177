package headers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// want is an Observed's numbers in short: the value, or -1 absent, or -2
// invalid.
type want struct{ limit, remaining, reset, window int64 }

func short(v Value) int64 {
	switch v.State {
	case Absent:
		return -1
	case Invalid:
		return -2
	}
	return v.N
}

func TestRead(t *testing.T) {
	for _, c := range []struct {
		name string
		g    Generation
		f    Fields
		want want
		// policy is the state of RateLimit-Policy.
		policy State
		err    string // in an Invalid value's error
	}{
		{"none", None, Fields{RateLimit: `"a";r=1`}, want{-1, -1, -1, -1}, Absent, ""},
		{"structured", Structured, Fields{RateLimit: `"free";r=3;t=1`, RateLimitPolicy: `"free";q=10;w=2`}, want{10, 3, 1, 2}, Valid, ""},
		{"structured, named of several", Structured, Fields{RateLimit: `"day";r=3;t=100, "free";r=9`, RateLimitPolicy: `"free";q=10;w=2, "day";q=1000;w=86400`}, want{1000, 3, 100, 86400}, Valid, ""},
		{"structured, no t nor w", Structured, Fields{RateLimit: `"free";r=3`, RateLimitPolicy: `"free";q=10`}, want{10, 3, -1, -1}, Valid, ""},
		{"structured, no RateLimit", Structured, Fields{RateLimitPolicy: `"free";q=10;w=2`}, want{10, -1, -1, 2}, Valid, ""},
		{"structured, no RateLimit, two policies", Structured, Fields{RateLimitPolicy: `"free";q=10;w=2, "day";q=5;w=9`}, want{-1, -1, -1, -1}, Valid, ""},
		{"structured, no policy", Structured, Fields{RateLimit: `"free";r=3;t=1`}, want{-1, 3, 1, -1}, Absent, ""},
		{"structured, unknown name", Structured, Fields{RateLimit: `"x";r=3`, RateLimitPolicy: `"free";q=10;w=2`}, want{-2, 3, -1, -2}, Valid, `RateLimit names policy "x"`},
		{"structured, bad RateLimit", Structured, Fields{RateLimit: `free;r=3`, RateLimitPolicy: `"free";q=10;w=2`}, want{10, -2, -2, 2}, Valid, "must be a String"},
		{"structured, bad policy", Structured, Fields{RateLimit: `"free";r=3`, RateLimitPolicy: `"free";q=-1`}, want{-2, 3, -1, -2}, Invalid, "q must not be negative"},
		{"structured, dictionary sent", Structured, Fields{RateLimit: `limit=10, remaining=1, reset=1`}, want{-1, -2, -2, -1}, Absent, "list"},
		{"dictionary", Dictionary, Fields{RateLimit: `limit=10, remaining=3, reset=1`, RateLimitPolicy: `10;w=2`}, want{10, 3, 1, 2}, Valid, ""},
		{"dictionary, several policies", Dictionary, Fields{RateLimit: `limit=1000, remaining=3, reset=1`, RateLimitPolicy: `10;w=2, 1000;w=86400`}, want{1000, 3, 1, 86400}, Valid, ""},
		{"dictionary, no policy, no remaining", Dictionary, Fields{RateLimit: `limit=10, reset=1`}, want{10, -1, 1, -1}, Absent, ""},
		{"dictionary, policy of another quota", Dictionary, Fields{RateLimit: `limit=10, reset=1`, RateLimitPolicy: `100;w=2`}, want{10, -1, 1, -1}, Valid, ""},
		{"dictionary, bad", Dictionary, Fields{RateLimit: `limit=10, remaining=-1, reset=1`}, want{-2, -2, -2, -1}, Absent, "remaining must not be negative"},
		{"dictionary, bad policy", Dictionary, Fields{RateLimit: `limit=10, reset=1`, RateLimitPolicy: `10`}, want{10, -1, 1, -1}, Invalid, ""},
		{"dictionary, structured sent", Dictionary, Fields{RateLimit: `"free";r=3`}, want{-2, -2, -2, -1}, Absent, "key"},
		{"split", Split, Fields{RateLimitLimit: "10", RateLimitRemaining: "3", RateLimitReset: "1", RateLimitPolicy: "10;w=2"}, want{10, 3, 1, 2}, Valid, ""},
		{"split, policies in the limit", Split, Fields{RateLimitLimit: "10, 10;w=2, 50;w=60", RateLimitRemaining: "3", RateLimitReset: "1"}, want{10, 3, 1, 2}, Absent, ""},
		{"split, only limit", Split, Fields{RateLimitLimit: "10"}, want{10, -1, -1, -1}, Absent, ""},
		{"split, bad remaining", Split, Fields{RateLimitLimit: "10", RateLimitRemaining: "x", RateLimitReset: "1"}, want{10, -2, 1, -1}, Absent, "RateLimit-Remaining"},
		{"split, bad reset", Split, Fields{RateLimitLimit: "10", RateLimitRemaining: "1", RateLimitReset: "1.5"}, want{10, 1, -2, -1}, Absent, "RateLimit-Reset"},
		{"split, bad limit", Split, Fields{RateLimitLimit: "ten", RateLimitRemaining: "1", RateLimitReset: "1"}, want{-2, 1, 1, -1}, Absent, "RateLimit-Limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Read(c.g, c.f)
			assert.Equal(t, c.g, o.Generation)
			assert.Equal(t, c.want, want{short(o.Limit), short(o.Remaining), short(o.Reset), short(o.Window)})
			assert.Equal(t, c.policy, o.Policy.State)
			if c.policy == Invalid {
				assert.Error(t, o.Policy.Err)
			}
			if c.err != "" {
				var errs []string
				for _, v := range []Value{o.Limit, o.Remaining, o.Reset, o.Window} {
					if v.State == Invalid {
						errs = append(errs, v.Err.Error())
					}
				}
				assert.Contains(t, strings.Join(errs, "; "), c.err)
			}
			for _, v := range []Value{o.Limit, o.Remaining, o.Reset, o.Window} {
				assert.Equal(t, v.State == Invalid, v.Err != nil, "an Invalid value says why, no other does")
				assert.GreaterOrEqual(t, v.N, int64(0))
			}
		})
	}
}

// names are tier names with any character a policy file can hold.
var names = []string{"free", "café", "a\tb", `q"u\o`, "", "%", "%22", "tab\t\"both\\", "日本語", "line\nbreak", "\x7f", "\xff\xfe", strings.Repeat("x", 300)}

// TestWriteReadRoundTrip: what a Writer sends for a quota, read back with
// FromHTTP and Read, is the quota, in every generation and for any name.
func TestWriteReadRoundTrip(t *testing.T) {
	for _, g := range []Generation{Structured, Dictionary, Split} {
		for _, form := range []ResetForm{ResetRelative, ResetEpoch, ResetDate} {
			for _, name := range names {
				t.Run(fmt.Sprintf("%s/%s/%q", g, form, name), func(t *testing.T) {
					q := Quota{Policy: name, Limit: 10, Window: 2 * time.Second, Remaining: 3, Reset: 1200 * time.Millisecond}
					h := http.Header{}
					require.NoError(t, Writer{Generation: g, XRateLimit: true, XReset: form}.Write(h, q, now))
					f := FromHTTP(h)
					assert.Equal(t, g, Detect(f))
					o := Read(g, f)
					assert.Equal(t, want{10, 3, 2, 2}, want{short(o.Limit), short(o.Remaining), short(o.Reset), short(o.Window)}, "%+v", f)
					assert.Equal(t, Valid, o.Policy.State)
					if g == Structured {
						assert.Equal(t, strings.ToValidUTF8(name, "\uFFFD"), o.Name)
						assert.Equal(t, o.Name, o.Policies[0].Name)
					}
					lim, err := ParseXInt(f.XLimit)
					require.NoError(t, err)
					assert.Equal(t, int64(10), lim)
					rem, err := ParseXInt(f.XRemaining)
					require.NoError(t, err)
					assert.Equal(t, int64(3), rem)
					r, err := ParseXReset(f.XReset, form)
					require.NoError(t, err)
					if r.Absolute() {
						assert.Equal(t, now.Add(2*time.Second), r.At.UTC())
					} else {
						assert.Equal(t, int64(2), r.Delta)
					}
				})
			}
		}
	}
}

func TestWriter(t *testing.T) {
	q := Quota{Policy: "free", Limit: 10, Window: 2 * time.Second, Remaining: -4, Reset: 200 * time.Millisecond}
	for _, c := range []struct {
		w    Writer
		want map[string]string
	}{
		{Writer{}, map[string]string{}},
		{Writer{Generation: Structured}, map[string]string{RateLimit: `"free";r=0;t=1`, RateLimitPolicy: `"free";q=10;w=2`}},
		{Writer{Generation: Dictionary}, map[string]string{RateLimit: `limit=10, remaining=0, reset=1`, RateLimitPolicy: `10;w=2`}},
		{Writer{Generation: Split}, map[string]string{RateLimitLimit: "10", RateLimitRemaining: "0", RateLimitReset: "1", RateLimitPolicy: `10;w=2`}},
		{Writer{XRateLimit: true}, map[string]string{XRateLimitLimit: "10", XRateLimitRemaining: "0", XRateLimitReset: "1"}},
		{Writer{XRateLimit: true, XReset: ResetEpoch}, map[string]string{XRateLimitLimit: "10", XRateLimitRemaining: "0", XRateLimitReset: "1735689601"}},
	} {
		h := http.Header{}
		require.NoError(t, c.w.Write(h, q, now))
		got := map[string]string{}
		for k := range h {
			got[k] = h.Get(k)
		}
		want := map[string]string{}
		for k, v := range c.want {
			want[http.CanonicalHeaderKey(k)] = v
		}
		assert.Equal(t, want, got, "%+v", c.w)
	}
	// Without a window, the optional policy field of the unnamed
	// generations is left out (w is required there).
	for _, g := range []Generation{Dictionary, Split} {
		h := http.Header{}
		require.NoError(t, Writer{Generation: g}.Write(h, Quota{Limit: 5, Remaining: 1}, now))
		assert.Empty(t, h.Get(RateLimitPolicy))
		assert.Equal(t, want{5, 1, 0, -1}, func(o Observed) want {
			return want{short(o.Limit), short(o.Remaining), short(o.Reset), short(o.Window)}
		}(Read(g, FromHTTP(h))))
	}
	h := http.Header{}
	require.NoError(t, Writer{Generation: Structured}.Write(h, Quota{Policy: "p", Limit: 5}, now))
	assert.Equal(t, `"p";q=5`, h.Get(RateLimitPolicy))
	// Values no field can carry are errors.
	require.Error(t, Writer{XRateLimit: true, XReset: "weekly"}.Write(http.Header{}, q, now))
	_, err := FormatRateLimitPolicy(PolicyItem{Name: "x", Quota: 1, QuotaUnit: "bytes\u00e9"})
	require.Error(t, err)
	_, err = FormatQuotaPolicies(PolicyItem{Quota: 5})
	require.ErrorContains(t, err, "no window")
	// Counters are clamped into the Integers a Structured Field holds.
	s, err := FormatRateLimit(Item{Name: "x", Remaining: 1 << 60, Reset: -1})
	require.NoError(t, err)
	assert.Equal(t, `"x";r=999999999999999`, s)
}
