package headers

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseXIntFastPathAgrees: the digits-only fast path of ParseXInt and
// ParseXReset gives strconv's value and error for every kind of input.
func TestParseXIntFastPathAgrees(t *testing.T) {
	for _, v := range []string{
		"0", "7", "007", "10", "999999999999999999", "9999999999999999999", "99999999999999999999",
		"", " ", " 5", "5\t", "-1", "+1", "1.5", "1e3", "x", "１", "5 5", "0x10",
	} {
		t.Run(strconv.Quote(v), func(t *testing.T) {
			want, wantErr := strconv.ParseInt(strings.Trim(v, " \t"), 10, 64)
			got, err := ParseXInt(v)
			require.Equal(t, wantErr == nil, err == nil)
			require.Equal(t, want, got)
			r, err := ParseXReset(v, ResetRelative)
			if wantErr != nil || want < 0 {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Reset{Delta: want}, r)
		})
	}
}
