package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/history"
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
			if err := importers.Known(from); err != nil {
				return usageErr("--from %q: want %s", from, strings.Join(importers.Formats(), ", "))
			}
			if out == "" {
				return usageErr("import: -o FILE is required (- for stdout)")
			}
			inst, err := parseInstances(instances)
			if err != nil {
				return usageWrap(err)
			}
			pol, err := loadPolicy(policyFile)
			if err != nil {
				return err
			}
			o := importers.Options{Policy: pol, Instances: inst, Key: key, KeyTag: keyTag, PlainKeys: plainKeys}
			if err := importers.Validate(from, o); err != nil {
				return usageWrap(err)
			}
			if err := checkImportOut(args[0], out, force); err != nil {
				return err
			}
			return runImport(from, args[0], out, o, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
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

// checkImportOut refuses an -o that would replace its own input (whatever
// --force says) or an existing file without --force.
func checkImportOut(in, out string, force bool) error {
	if out == "-" {
		return nil
	}
	ost, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return runErr(fmt.Errorf("import: -o %s: %w", out, err))
	}
	if in != "-" {
		if ist, err := os.Stat(in); err == nil && os.SameFile(ist, ost) {
			return usageErr("import: -o %s is the file being imported: give another -o", out)
		}
	}
	if !ost.Mode().IsRegular() {
		return usageErr("import: -o %s exists and is not a regular file", out)
	}
	if !force {
		return usageErr("import: -o %s already exists: give another -o, or --force to replace it", out)
	}
	return nil
}

// parseInstances reads HOST=N flags.
func parseInstances(flags []string) ([]importers.Instance, error) {
	var out []importers.Instance
	for _, f := range flags {
		host, n, ok := strings.Cut(f, "=")
		i, err := strconv.Atoi(n)
		if !ok || host == "" || err != nil || i < 0 || i >= envs.MaxInstances {
			return nil, fmt.Errorf("--instance %q: want HOST=N with host[:port] as in the URLs and 0 ≤ N < %d, e.g. 127.0.0.1:8080=0", f, envs.MaxInstances)
		}
		out = append(out, importers.Instance{Host: host, Index: i})
	}
	return out, nil
}

// runImport converts file (- for stdin) into out (- for stdout). A file
// is written whole or not at all: the history goes to a temporary file
// that replaces out when the import succeeded.
func runImport(from, file, out string, o importers.Options, stdin io.Reader, stdout, stderr io.Writer) error {
	in := stdin
	o.Name = "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return usageWrap(fmt.Errorf("import: %w", err))
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return usageErr("import: %s is a directory, not a results file", file)
		}
		in, o.Name = f, file
	}
	var w *history.Writer
	var tmp *os.File
	report := stdout
	if out == "-" {
		w, report = history.NewWriter(noClose{stdout}), stderr
	} else {
		var err error
		if tmp, err = os.CreateTemp(filepath.Dir(out), ".import-*.jsonl"); err != nil {
			return runErr(fmt.Errorf("import: -o: %w", err))
		}
		defer os.Remove(tmp.Name())
		w = history.NewWriter(tmp)
	}
	sum, err := importers.Import(from, in, w, o)
	if err != nil {
		w.Close()
		var ie *importers.InputError
		if errors.As(err, &ie) {
			return usageWrap(err)
		}
		return runErr(err)
	}
	if err := w.Close(); err != nil {
		return runErr(err)
	}
	if tmp != nil {
		if err := os.Rename(tmp.Name(), out); err != nil {
			return runErr(fmt.Errorf("import: -o: %w", err))
		}
	}
	dest := out
	if out == "-" {
		dest = "stdout"
	}
	fmt.Fprintf(report, "imported %d requests from %s (%s) into %s; keys: %d; instances: %s\n",
		sum.Requests, o.Name, from, dest, sum.Keys, strings.Join(sum.Run.Instances, ", "))
	for _, n := range sum.Run.Notes[1:] {
		fmt.Fprintf(report, "  note: %s\n", n)
	}
	if out != "-" {
		fmt.Fprintf(report, "judge it with: rlverify check --history %s\n", out)
	}
	return nil
}

// noClose hides a Close method, so history.Writer.Close leaves stdout open.
type noClose struct{ io.Writer }
