// Package rlverify is the library behind the rlverify command: it runs
// attack plans against rate limiters, records every request as a history,
// judges the history with the checkers and returns the result document.
//
//   - Attack runs one plan against a built-in reference limiter (the
//     embedded, local or docker environment), your own instances (Targets)
//     or an http.Handler served on 127.0.0.1, and judges it.
//   - Check judges recorded histories (files, stdin, or one in memory).
//   - Compare runs one plan against several columns and lines them up.
//   - Audit runs every built-in plan that applies to a policy and merges
//     the verdicts per property.
//   - Selftest runs the mutation matrix: each faulty reference limiter must
//     be caught by the check written for it.
//
// Events stream to AttackOptions.OnEvent while the run goes, as vegeta's
// library streams results. Bad options come back as *OptionError; any
// other error means the run could not be done. rlverify reads no flags
// and writes no report: cmd/rlverify does that. Importing it pulls in no
// Docker code: pass a docker.Docker (envs/docker) as the Environment.
//
// The package rlverifytest wraps it for tests (testing.TB helpers).
package rlverify
