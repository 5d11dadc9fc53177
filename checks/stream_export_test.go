package checks

// SweepEvery makes the oversell streams (oversell's, fail-mode's
// recoveries, bypass's unions) sweep their open keys after every n events
// beyond them and compact their window screens as often (0: after every
// event), for the external tests; it returns the restore.
func SweepEvery(n int) (restore func()) {
	s, c := sweepAfter, compactAfter
	sweepAfter, compactAfter = n, n
	return func() { sweepAfter, compactAfter = s, c }
}
