// Package calibrate turns recorded traffic into rate-limit numbers: it reads
// arrivals (time, key, status, route) from access logs (nginx/Apache
// combined, JSON lines), from other load tools' results (through importers)
// and from rlverify histories, replays them per key through the reference
// algorithms of limiters in simulated time, and reports what a candidate
// policy would refuse and the smallest capacity, count or rate that keeps
// refusals of the legitimate traffic at or below a target.
//
// Every decision comes from limiters: calibrate has no second
// implementation of an algorithm. The per-key thresholds it computes in one
// pass (see thresholds.go) only decide which keys a replay may skip, and the
// property test checks them against the reference replay.
//
// calibrate imports history, importers, limiters and policy; it reads no
// flags and no clock.
package calibrate
