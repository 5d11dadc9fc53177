// Package checks decides, from a history and the declared policy, whether a
// limiter kept its promise. Every checker is a pure function: no network, no
// clock, no files. A checker never claims a violation that timing uncertainty
// could explain: each request was decided somewhere in [Sent, Recv], widened
// on both sides by the slack (Options.Slack + Policy.ClockQuantum).
//
// checks imports only history, policy, headers and the standard library.
//
// # Common rules
//
// A request belongs to its Event.Key (the logical identity); its tier is
// Event.Tier when set (the first event of a key that sets it wins), else
// Policy.TierFor(key); keys with no tier are not judged. A key whose tier has
// several limits is judged against each limit separately. Events with a
// Variant (bypass probes) are judged only by the bypass check (and, as
// possible consumers, by the lower-bound checks). Checks that bound
// admissions from above count only Admitted outcomes; checks that bound them
// from below treat Unknown outcomes as possibly consumed. Fixed windows are
// epoch-aligned in wall time: window k is [k·W, (k+1)·W) of Unix time, and the
// wall time of an offset is Run.Start + offset.
//
// # Envelope proofs (oversell, instances, bypass, fail-mode recovery)
//
// For a token bucket (and GCRA) of capacity K refilling at r, a set of
// admissions is possible iff some choice of decision times, each inside its
// request's interval, puts at most K + r·(b−a) decisions in every [a, b].
// The checker first looks for a witness schedule: earliest-deadline-first
// over the bucket's supply, as early as possible. Without one it computes
// the interval [a, b] that maximises #{requests with Sent−slack ≥ a and
// Recv+slack ≤ b} − (K + r·(b−a)) with a segment tree (O(n log n)); those
// requests must all have been decided in [a, b], so a positive excess is a
// certificate, and only a certificate fails a check. Without one, EDF runs
// backwards (the constraint is symmetric in time), then an exact search:
// the admissions fit the bucket iff unit jobs of length 1/r, released at
// Sent−slack and due by Recv+slack+K/r, fit one machine (GCRA's virtual
// schedule), which Garey, Johnson, Simons and Tarjan (1981) decide by
// forbidden regions, then EDF (see exactWitness: O(n log n) plus a
// re-packing of neighbours, its work bounded at 256 steps per admission,
// about 200 ns per admission measured). So a correct bucket's history
// passes (a schedule exists: its own decision times) unless the search
// reaches its work bound (never on the histories of TestExactWitnessStudy);
// that, and a cluster with no schedule but no single-interval certificate
// (the proof spans several intervals), give Unknown, saying which.
// Requests are split into independent clusters wherever a gap of K/r (a
// full refill) separates them.
//
// Sliding log and sliding counter: a group of requests, consecutive by send
// time, that must all have been decided within less than W and counts more
// than N (log) or N·(1+ErrorBound) (counter) is a violation. Fixed window:
// more than N admissions whose whole interval lies inside one aligned window.
//
// # Regions
//
// The regions check applies when some event's Phase starts with "region", or
// when the policy declares a Tolerance > 0 and the run used more than one
// instance. For each key and limit, the admissions of the whole run must not
// exceed (1+Tolerance)·E(span), where span runs from the earliest possible
// decision of an admitted request to the latest, and E is K + r·span for
// buckets, N·(⌊span/W⌋+1) for sliding windows (times 1+ErrorBound for the
// counter) and N·(⌊span/W⌋+2) for fixed windows.
//
// The Doc string of each Checker states precisely what it proves; Run runs
// them in the order of All.
package checks
