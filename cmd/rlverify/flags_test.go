package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/history"
)

// The library's option errors name fields; the command says them as its
// flags, through the one table.
func TestLibraryFieldsAreSaidAsFlags(t *testing.T) {
	burst, err := attacks.Load("concurrent-burst")
	require.NoError(t, err)
	for _, tc := range []struct {
		o    rlverify.AttackOptions
		want string
	}{
		{rlverify.AttackOptions{}, "--plan is required (see rlverify plans)"},
		{rlverify.AttackOptions{Plan: burst, Instances: -1}, "--instances -1: plan concurrent-burst needs at least 1"},
		{rlverify.AttackOptions{Plan: burst, RedisURL: "redis://192.0.2.1:6379"}, "--redis 192.0.2.1:6379 is not a loopback address; set --allow-remote to use it"},
		{rlverify.AttackOptions{Plan: burst, Targets: []string{"http://127.0.0.1:1"}, Environment: envs.External{Downstream: &envs.RemoteSink{URL: "http://192.0.2.1:9/sink"}}}, "--sink http://192.0.2.1:9/sink is not a loopback address"},
	} {
		err := tc.o.Validate()
		require.Error(t, err)
		require.Contains(t, fromLib(err).Error(), tc.want)
		require.Equal(t, ExitUsage, fromLib(err).(*exitError).code)
	}
}

// The library's notes, summaries and stop reasons name option fields too;
// the command says them as flags wherever it prints or renders them, and
// leaves other words alone.
func TestLibraryNotesAreSaidAsFlags(t *testing.T) {
	for _, tc := range []struct{ lib, cli string }{
		{history.ReasonBound + "MaxRequests 50", "stopped at the bound --max-requests 50"},
		{history.ReasonBound + "MaxDuration 10s", "stopped at the bound --max-duration 10s"},
		{"not run: the request budget (MaxRequests) is spent", "not run: the request budget (--max-requests) is spent"},
		{"waited 1s before the first request so the reused keys (KeysFile, KeepKeys) start with a whole quota", "waited 1s before the first request so the reused keys (--keys, --keep-keys) start with a whole quota"},
		{"the environment cannot inject store-down faults (run the plan with Store redis, or Env docker)", "the environment cannot inject store-down faults (run the plan with --store redis, or --env docker)"},
		{"turned off by Checks.Off (the promise is knowingly not kept, or not judged)", "turned off by --checks-off (the promise is knowingly not kept, or not judged)"},
		{"3 errors exceed Checks.MaxErrorRate 1%", "3 errors exceed --max-error-rate 1%"},
		{"Checks.Slack", "--clock-skew"},
		{"a plan reads body files only inside its own folder . (the load option BodyFilesAnywhere allows any file)", "a plan reads body files only inside its own folder . (the load option --body-files-anywhere allows any file)"},
		{"raise Budget to tell a fixed window from a sliding log", "raise --budget to tell a fixed window from a sliding log"},
		{"check the request shape (Request.Method, Request.Headers, Request.Body), the identity (Overrides.Identity) and the keys, or say which statuses mean admitted (Overrides.Admitted)", "check the request shape (--method, --header, --body), the identity (--identity) and the keys, or say which statuses mean admitted (--admitted)"},
		{"give every instance of the deployment in Targets", "give every instance of the deployment in --target"},
		{"give Importer.Key, or Importer.KeyTag attack (the name given to vegeta attack -name)", "give --key, or --key-tag attack (the name given to vegeta attack -name)"},
		{"skipped 1 request to hosts without an InstanceMap entry", "skipped 1 request to hosts without an --instance entry"},
		{"log:3: bad line (Read.SkipMalformed skips such lines, counted and listed); or raise Read.MaxDisorder", "log:3: bad line (--skip-malformed skips such lines, counted and listed); or raise --max-disorder"},
		{"Admitted requests of one key; identity.max_length", "Admitted requests of one key; identity.max_length"},
	} {
		require.Equal(t, tc.cli, flagWords(tc.lib))
	}
}

// The user's text in the same prose (keys, plan and tier names, header
// names, a policy's values) is data: never said as a flag.
func TestUsersWordsAreNotSaidAsFlags(t *testing.T) {
	for _, tc := range []struct{ in, flags, doc string }{
		{"key Out-1: 40 admitted", "key Out-1: 40 admitted", "key Out-1: 40 admitted"},
		{"identity header X-Force-Key", "identity header X-Force-Key", "identity header X-Force-Key"},
		{"plan my.Store and 'Sink' and Budget_2 and Regions/3", "plan my.Store and 'Sink' and Budget_2 and Regions/3", "plan my.Store and 'Sink' and Budget_2 and Regions/3"},
		{"key Store admitted 5", "key --store admitted 5", "key Store admitted 5"},
		{"raise Budget.", "raise --budget.", "raise Budget."},
		{"the load stopped at MaxRequests 5 for key MaxRequests-x", "the load stopped at --max-requests 5 for key MaxRequests-x", "the load stopped at --max-requests 5 for key MaxRequests-x"},
		{"in Targets: give more", "in --target: give more", "in Targets: give more"},
	} {
		require.Equal(t, tc.flags, flagWords(tc.in), "flagWords(%q)", tc.in)
		require.Equal(t, tc.doc, docWords(tc.in), "docWords(%q)", tc.in)
	}
	yaml := "name: Store # raise Budget to pin it\ntiers:\n  - name: Out\n    key_prefix: \"Force#1\" # Targets\nidentity: {in: header, name: X-Sink}\n"
	want := "name: Store # raise --budget to pin it\ntiers:\n  - name: Out\n    key_prefix: \"Force#1\" # --target\nidentity: {in: header, name: X-Sink}\n"
	require.Equal(t, want, string(commentWords([]byte(yaml))))
}
