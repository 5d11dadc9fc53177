package history

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseUintAgreesWithStrconv: the decoder's integer parser (two
// words at once when 16 bytes are there, else eight digits at a time, then
// one) gives strconv's value, length and refusal for integers of every
// length, followed by what may and may not end a JSON integer, short and
// long (every byte value but digits after one).
func TestParseUintAgreesWithStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var inputs []string
	for digits := 1; digits <= 22; digits++ {
		for range 40 {
			var sb strings.Builder
			sb.WriteByte(byte('1' + rng.IntN(9)))
			for range digits - 1 {
				sb.WriteByte(byte('0' + rng.IntN(10)))
			}
			inputs = append(inputs, sb.String())
		}
		inputs = append(inputs, strings.Repeat("9", digits), "1"+strings.Repeat("0", digits-1))
	}
	for c := range 256 {
		if c < '0' || c > '9' {
			inputs = append(inputs, "12345678"+string([]byte{byte(c)})+"0000000000000000", "9"+string([]byte{byte(c)})+"0000000000000000", "123456789012"+string([]byte{byte(c)})+"0000000000000000")
		}
	}
	inputs = append(inputs, "0", "18446744073709551615", "18446744073709551616", "12345678:", "1234567/8", "123456789012345678901234")
	for _, num := range inputs {
		for _, tail := range []string{"", ",", "}", " ", ".5", "e3", "a", "/", ":", "1234567x",
			`,"x_limit":"10","x_reset":"1"}`, "\xff\x80\xb9\xba\xb0\xaf\x00\x7f\xff\x80\xb9\xba\xb0\xaf\x00\x7f", "/:/:/:/:/:/:/:/:/:", ".0000000000000000", "e10000000000000000"} {
			b := []byte(num + tail)
			v, n, ok := parseUint(b)
			// The digits at the front, as strconv reads them.
			m := 0
			for m < len(b) && b[m] >= '0' && b[m] <= '9' {
				m++
			}
			want, err := strconv.ParseUint(string(b[:m]), 10, 64)
			wantOK := err == nil && endOfNumber(b, m)
			if b[0] == '0' && m > 1 {
				wantOK = false // JSON has no leading zeros
			}
			require.Equal(t, wantOK, ok, "%q", b)
			if ok {
				require.Equal(t, want, v, "%q", b)
				require.Equal(t, m, n, "%q", b)
			}
		}
	}
}
