package suggest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		word  string
		cands []string
		want  string
		ok    bool
	}{
		{"capacty", []string{"capacity", "rate", "window"}, "capacity", true},
		{"boundry-burst", []string{"boundary-burst", "concurrent-burst"}, "boundary-burst", true},
		{"fixed-windw", []string{"fixed-window", "sliding-log"}, "fixed-window", true},
		{"brust", []string{"burst", "rate", "pause"}, "burst", true},
		{"xyz", []string{"burst", "rate"}, "", false},
		{"ab", []string{"rate"}, "", false},
		{"rate", []string{"rate"}, "", false},
		{"x", nil, "", false},
	} {
		got, ok := Closest(tc.word, tc.cands)
		require.Equal(t, tc.ok, ok, tc.word)
		require.Equal(t, tc.want, got, tc.word)
	}
	require.Equal(t, ` (did you mean "capacity"?)`, DidYouMean("capacty", []string{"capacity"}))
	require.Equal(t, "", DidYouMean("zzzzzz", []string{"capacity"}))
	require.Equal(t, 3, Distance("kitten", "sitting"))
	require.Equal(t, 1, Distance("ü", "u"))
}
