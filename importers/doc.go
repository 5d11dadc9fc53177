// Package importers converts the results of other load tools into rlverify
// histories, so `rlverify check` can judge a run that rlverify did not
// drive: vegeta results (JSON lines, also gob and CSV), k6's JSON output
// (`k6 run --out json=…`) and HAR 1.2 files (browser and devtools exports).
//
// Each request becomes one history.Event: its key is read where the declared
// policy's identity says the limiter reads it (a header, a bearer token, a
// query parameter or a cookie) when the format keeps that part of the
// request; its instance is the index of its URL's host; its send and
// receive times become offsets from the earliest send. What a format does
// not keep cannot be judged: see Notes and docs/history.md.
//
// An imported history's run header says so (Run.Env "import:FORMAT"), so a
// history without an end record is known to be complete as written rather
// than a run that was cut off (Complete).
//
// importers imports only history, policy, headers, the standard library and the
// vegeta library (for vegeta's own result encodings).
package importers
