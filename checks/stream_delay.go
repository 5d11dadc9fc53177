package checks

import (
	"slices"

	"github.com/rlverify/rlverify/policy"
)

// Delay on the stream. A policy that declares no delay (policy.Delays)
// makes delay a SKIP decided by the policy alone: the Streamer gives it
// without reading an event. A policy that declares one is judged in
// memory (StreamableUnder leaves delay out): checkDelay's judgement holds
// each delaying key's admissions in a segment tree (the bucket's next due
// instant, max over i of hi_i + (c_i + 1 − K)/r, with admissions joining
// in send order but ordered by hi) and takes its default tolerance from
// the p99 latency of every refusal of the run. docs/streaming.md says how
// it could stream: the terms of admissions whose hi is before the latest
// send are frozen (later admissions raise them all alike), so only their
// maximum and the admissions in flight need be kept, with a look-ahead of
// one latency (and of the tolerance) and the tolerance from a first pass;
// not built, because the float arithmetic must then match the segment
// tree's to give Run's figures exactly.

// streamsUnder reports whether a Streamer judges check name under p, and
// why not.
func streamsUnder(p *policy.Policy, name string) (bool, string) {
	if !slices.Contains(Streamable(), name) && !slices.Contains(streamsWhenUnspread, name) {
		return false, "does not stream yet"
	}
	if name == DelayCheck && p.Delays() {
		return false, "streams only when the policy declares no delay (this one does)"
	}
	return true, ""
}

// StreamableUnder lists the checks a Streamer judges under p, in the
// order of All: Streamable, less delay when p declares a delay.
func StreamableUnder(p *policy.Policy) []string {
	var out []string
	for _, n := range Streamable() {
		if ok, _ := streamsUnder(p, n); ok {
			out = append(out, n)
		}
	}
	return out
}
