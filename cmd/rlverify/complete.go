package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/calibrate"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policies"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/service"
)

// valueCompletion completes one flag's values.
type valueCompletion struct {
	values func() []string
	// list: the flag takes comma-separated values (complete the last one).
	list bool
	// files: file names are values too (plans and policies).
	files bool
	// open: a value is typed on after the completion (no space).
	open bool
}

// completions are the values shells complete (rlverify completion
// bash|zsh|fish), by flag name, for every command that has the flag.
var completions = map[string]valueCompletion{
	"plan":        {values: attacks.BuiltinNames, files: true},
	"plans":       {values: rlverify.AuditPlanNames, list: true},
	"limiter":     {values: catalog.Names},
	"policy":      {values: policies.Names, files: true},
	"checks":      {values: checks.Names, list: true},
	"checks-off":  {values: checks.Names, list: true},
	"format":      {values: reports.FormatNames, list: true},
	"fail-on":     {values: rlverify.FailOnTokens, list: true},
	"env":         {values: fixed("embedded", "local", "docker", "external")},
	"store":       {values: fixed(catalog.Memory, catalog.Redis)},
	"region-mode": {values: fixed(service.RegionReplicated, service.RegionStrict, service.RegionIndependent)},
	"from":        {values: importers.Formats},
	"identity":    {values: fixed("header:", "bearer", "query:", "cookie:"), open: true},
	"threshold":   {values: thresholdExamples, open: true},
}

// commandCompletions override completions for one command whose flag of
// the same name takes other values (calibrate's --report takes calibrate's own formats).
var commandCompletions = map[string]map[string]valueCompletion{
	"calibrate": {
		"from":   {values: calibrate.Formats},
		"report": {values: calibrate.ReportFormats, open: true},
	},
}

func fixed(vs ...string) func() []string { return func() []string { return vs } }

func thresholdExamples() []string {
	return []string{"latency.p99<", "latency.p50<", "errors<", "admitted.rate>=", "rejected.count<", "phase."}
}

// registerCompletions gives every flag of root's commands that names
// something rlverify knows its value completion.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, vc := range completions {
			if c.LocalNonPersistentFlags().Lookup(name) == nil {
				continue
			}
			if own, ok := commandCompletions[c.Name()][name]; ok {
				vc = own
			}
			_ = c.RegisterFlagCompletionFunc(name, vc.complete)
		}
		for name, vc := range commandCompletions[c.Name()] {
			if _, shared := completions[name]; !shared && c.LocalNonPersistentFlags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, vc.complete)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func (vc valueCompletion) complete(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	prefix, last := "", toComplete
	if vc.list {
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			prefix, last = toComplete[:i+1], toComplete[i+1:]
		}
	}
	var out []string
	for _, v := range vc.values() {
		if strings.HasPrefix(v, last) {
			out = append(out, prefix+v)
		}
	}
	dir := cobra.ShellCompDirectiveNoFileComp
	if vc.files {
		dir = cobra.ShellCompDirectiveDefault
	}
	if vc.list || vc.open {
		dir |= cobra.ShellCompDirectiveNoSpace
	}
	return out, dir
}
