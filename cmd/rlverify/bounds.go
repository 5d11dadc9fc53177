package main

import "github.com/rlverify/rlverify/attacks"

// checkRunBounds refuses run bounds that are not positive. The engine
// reads 0 or less as "the default", so `--max-requests 0` or `--timeout
// -1s` would silently run with the defaults; a user who typed a bound
// means one.
func checkRunBounds(f *attackFlags) error {
	switch {
	case f.o.MaxRequests <= 0:
		return usageErr("--max-requests %d: want a positive number of requests (default %d)", f.o.MaxRequests, attacks.DefaultMaxRequests)
	case f.o.MaxDuration <= 0:
		return usageErr("--max-duration %s: want a positive duration such as 30s (default %s)", f.o.MaxDuration, attacks.DefaultMaxDuration)
	case f.o.Timeout <= 0:
		return usageErr("--timeout %s: want a positive duration such as 5s (default %s)", f.o.Timeout, attacks.DefaultTimeout)
	}
	return nil
}
