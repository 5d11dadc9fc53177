package rlverify

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRelayHandsOverEveryItemInOrder: what the producer fills on its
// goroutine reaches the consumer whole and in order, across batch edges,
// without the slots it took back, and each returns once the relay is
// closed, with nothing handed over too.
func TestRelayHandsOverEveryItemInOrder(t *testing.T) {
	for _, n := range []int{0, 1, relayBatch - 1, relayBatch, relayBatch + 1, relayBatches*relayBatch + 7, 10 * relayBatch} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := newRelay[[2]int]()
			go func() {
				defer r.close()
				for i := range n {
					*r.slot() = [2]int{i, -i}
					if i%5 == 0 {
						*r.slot() = [2]int{-1, -1} // taken back
						r.unslot()
					}
				}
			}()
			var got [][2]int
			r.each(func(it *[2]int) { got = append(got, *it) })
			require.Len(t, got, n)
			for i, it := range got {
				require.Equal(t, [2]int{i, -i}, it)
			}
		})
	}
}
