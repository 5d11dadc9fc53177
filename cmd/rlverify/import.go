package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/importers"
)

func importCmd() *cobra.Command {
	var (
		from, out, policyFile, key, keyTag string
		instances                          []string
		plainKeys, force                   bool
	)
	c := &cobra.Command{
		Use:   "import --from vegeta|k6|har FILE -o history.jsonl",
		Short: "Convert another load tool's results into a history that check can judge",
		Long: `Convert vegeta results (JSON lines of vegeta encode --to json, or vegeta's
gob and CSV), k6's JSON output (k6 run --out json=FILE, also .gz) or a HAR 1.2
file into a history, then judge it with rlverify check --history FILE.

Each request's key is read where the declared policy's identity says (a
header, bearer token, query parameter or cookie). vegeta and k6 keep no request
headers: give --key KEY for a single-key run, or --key-tag (vegeta: attack, the
name given to vegeta attack -name; k6: a tag the script sets on each request).
k6 keeps no response headers either, so Retry-After and RateLimit headers
cannot be judged on its output. Each URL host is an instance, numbered in
order of first appearance, unless --instance maps hosts (then requests to
other hosts, like a page's CDN in a HAR, are skipped). FILE or -o may be - for
stdin or stdout. See docs/history.md for what each format can show.

Examples:
  rlverify import --from vegeta results.json -o history.jsonl --policy policy.yaml --key free-a
  rlverify import --from k6 out.json.gz -o history.jsonl --key-tag key
  rlverify import --from har session.har -o - --instance api.local:8080=0 | rlverify check --history -`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if from == "" {
				return usageErr("import: --from is required: %s", strings.Join(importers.Formats(), ", "))
			}
			pol, err := loadPolicy(policyFile)
			if err != nil {
				return err
			}
			o := rlverify.ImportOptions{From: from, In: args[0], Out: out, Force: force, Stdin: c.InOrStdin(), Stdout: c.OutOrStdout(), InstanceMap: instances,
				Importer: importers.Options{Policy: pol, Key: key, KeyTag: keyTag, PlainKeys: plainKeys}}
			sum, err := rlverify.Import(o)
			if err != nil {
				return fromLib(err)
			}
			report, dest, name := c.OutOrStdout(), out, args[0]
			if name == "-" {
				name = "stdin"
			}
			if out == "-" {
				report, dest = c.ErrOrStderr(), "stdout"
			}
			fmt.Fprintf(report, "imported %d requests from %s (%s) into %s; keys: %d; instances: %s\n",
				sum.Requests, name, from, dest, sum.Keys, strings.Join(sum.Run.Instances, ", "))
			for _, n := range sum.Run.Notes[1:] {
				fmt.Fprintf(report, "  note: %s\n", flagWords(n))
			}
			if out != "-" {
				fmt.Fprintf(report, "judge it with: rlverify check --history %s\n", out)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&from, "from", "", "format of FILE: "+strings.Join(importers.Formats(), ", "))
	fl.StringVarP(&out, "out", "o", "", "history JSONL file to write (- for stdout)")
	fl.StringVar(&policyFile, "policy", "", "declared policy: where the key is, and what check judges (default: the built-in policy)")
	fl.StringArrayVar(&instances, "instance", nil, "HOST=N: requests to HOST (host[:port] as in the URLs) went to instance N (repeat; default: each host in order of first appearance)")
	fl.StringVar(&key, "key", "", "key of the requests whose record does not show the declared identity")
	fl.BoolVar(&force, "force", false, "replace -o FILE when it already exists")
	fl.BoolVar(&plainKeys, "plain-keys", false, "keep the keys in plain text in the history (by default each is redacted to its tier prefix and a hash, and scrubbed from every recorded value: they are real keys)")
	fl.StringVar(&keyTag, "key-tag", "", "where else the record carries the key: vegeta attack (the attack name), or a k6 tag name")
	return c
}
