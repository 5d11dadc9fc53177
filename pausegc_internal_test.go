package rlverify

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPauseGCRestoresTheCollector: the collector is off between pauseGC
// and restore and back to its setting after; a GOGC the user set is left
// alone.
func TestPauseGCRestoresTheCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	t.Setenv("GOGC", "")
	restore := pauseGC()
	assert.Equal(t, -1, debug.SetGCPercent(-1), "off while paused")
	restore()
	assert.Equal(t, 150, debug.SetGCPercent(150), "restored")

	t.Setenv("GOGC", "300")
	restore = pauseGC()
	assert.Equal(t, 150, debug.SetGCPercent(150), "GOGC set: not paused")
	restore()
	assert.Equal(t, 150, debug.SetGCPercent(150))
}
