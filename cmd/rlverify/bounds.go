package main

import "github.com/rlverify/rlverify/attacks"

// checkRunBounds refuses run bounds that are not positive. The engine
// reads 0 or less as "the default", so `--max-requests 0` or `--timeout
// -1s` would silently run with the defaults; a user who typed a bound
// means one.
func checkRunBounds(f *attackFlags) error {
	switch {
	case f.maxRequests <= 0:
		return usageErr("--max-requests %d: want a positive number of requests (default %d)", f.maxRequests, attacks.DefaultMaxRequests)
	case f.maxDuration <= 0:
		return usageErr("--max-duration %s: want a positive duration such as 30s (default %s)", f.maxDuration, attacks.DefaultMaxDuration)
	case f.timeout <= 0:
		return usageErr("--timeout %s: want a positive duration such as 5s (default %s)", f.timeout, attacks.DefaultTimeout)
	}
	return nil
}
